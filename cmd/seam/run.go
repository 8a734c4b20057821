package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/tokenizer"
	"github.com/spf13/cobra"
)

type samplingFlags struct {
	steps       int
	temperature float64
	topP        float64
	seed        uint64
}

func (f *samplingFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVarP(&f.steps, "steps", "n", 256, "total positions to run, prompt included (clamped to the context length)")
	cmd.Flags().Float64Var(&f.temperature, "temperature", 1.0, "sampling temperature; 0 is greedy")
	cmd.Flags().Float64Var(&f.topP, "top-p", 0.9, "nucleus sampling mass in (0, 1]; 1 disables it")
	cmd.Flags().Uint64Var(&f.seed, "seed", 0, "random seed; 0 picks one from the clock")
}

func (f *samplingFlags) sampler() (*sample.Sampler, error) {
	if f.steps < 1 {
		return nil, fmt.Errorf("--steps %d: want at least 1", f.steps)
	}
	seed := f.seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return sample.New(f.temperature, f.topP, seed)
}

func newRunCmd() *cobra.Command {
	var (
		modelPath, tokPath string
		sf                 samplingFlags
		split              splitFlags
	)
	cmd := &cobra.Command{
		Use:   "run --model PATH [flags] PROMPT",
		Short: "Generate text from a prompt",
		Long: `Run encodes BOS + PROMPT, echoes the prompt and streams the continuation
to stdout, as llama2.c's run does. Timing goes to stderr.

--model takes a GGUF file, a llama2.c checkpoint (with --tokenizer) or a Seam
container directory. A GGUF's own vocabulary is used unless --tokenizer is given.

Split inference: --stages ADDR1,ADDR2,... runs through stage servers started
with 'seam serve', whose layer ranges must tile the model in the order given;
--split N starts N stages in this process on loopback. --wire picks the
activation encoding between stages (f32 is exact: bit-identical to the whole
model). A stage that fails, disconnects or stays silent past --timeout aborts
the run with an error naming it; nothing is printed after a failure.`,
		Example: `  seam run --model stories260K.bin --tokenizer tok512.bin -n 256 --temperature 0 "Once upon a time"
  seam run --model model.seam --split 3 --wire q8 "Once upon a time"
  seam run --model model.seam --stages 10.0.0.2:7070,10.0.0.3:7070 "Once upon a time"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt := strings.Join(args, " ")
			smp, err := sf.sampler()
			if err != nil {
				return err
			}
			if err := split.pool.check(cmd); err != nil {
				return err
			}
			split.pool.greedy = sf.temperature == 0
			if !split.active() && split.auth.set() {
				return fmt.Errorf("--key, --trust and --insecure are for remote stages (--stages, --pool); this run is in one process")
			}
			if split.active() {
				sess, head, stop, err := split.session(cmd.Context(), modelPath, tokPath)
				if err != nil {
					return err
				}
				defer stop()
				return runGeneration(cmd, sess, head.Tokenizer, head.Config.SeqLen, prompt, sf.steps, smp)
			}
			m, sess, err := localSession(modelPath, tokPath)
			if err != nil {
				return err
			}
			defer m.Close()
			return runGeneration(cmd, sess, m.Tokenizer, m.Weights.Config.SeqLen, prompt, sf.steps, smp)
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "model: GGUF file, llama2.c checkpoint or container directory (required)")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (required for llama2.c checkpoints)")
	cmd.MarkFlagRequired("model")
	sf.register(cmd)
	split.register(cmd)
	return cmd
}

// localSession opens the whole model in this process.
func localSession(modelPath, tokPath string) (*loader.Model, generate.Session, error) {
	m, mod, err := openFull(modelPath, tokPath)
	if err != nil {
		return nil, nil, err
	}
	sess, err := generate.NewLocal(mod)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("%s: %w", modelPath, err)
	}
	return m, sess, nil
}

// runGeneration streams a generation to stdout and its timing to stderr.
func runGeneration(cmd *cobra.Command, sess generate.Session, tok tokenizer.Tokenizer, contextLen int, prompt string, steps int, smp *sample.Sampler) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	defer sess.Close()
	out := bufio.NewWriter(cmd.OutOrStdout())
	w := &flushWriter{w: out}
	st, err := generate.Generate(ctx, sess, tok, contextLen, prompt,
		generate.Options{Steps: steps, Sampler: smp, EchoPrompt: true}, w)
	if err != nil {
		out.Flush()
		fmt.Fprintln(cmd.OutOrStdout())
		return err
	}
	fmt.Fprintln(out)
	out.Flush()
	if st.GeneratedTokens > 1 && st.Decode > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "achieved tok/s: %.1f (prompt %d tokens in %v, %d generated, stop: %s)\n",
			float64(st.GeneratedTokens-1)/st.Decode.Seconds(), st.PromptTokens, st.Prefill.Round(time.Microsecond), st.GeneratedTokens, st.StopReason)
	}
	return nil
}

// flushWriter flushes after every piece so text streams as it is produced.
type flushWriter struct{ w *bufio.Writer }

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}
