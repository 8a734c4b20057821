package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/signals"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/tokenizer"
	"github.com/spf13/cobra"
)

func newRunCmd() *cobra.Command {
	var (
		modelPath, tokPath string
		threads            int
		sf                 samplingFlags
		split              splitFlags
	)
	cmd := &cobra.Command{
		Use:   "run --model PATH [flags] PROMPT...",
		Short: "Generate text from a prompt",
		Long: `Run encodes BOS + PROMPT, echoes the prompt and streams the continuation
to stdout, as llama2.c's run does. The prompt is every argument after the
flags, joined with spaces (quoting it is optional). Speeds (prefill and decode
tok/s) go to stderr.

--model takes a GGUF file, a llama2.c checkpoint (with --tokenizer) or a Seam
container directory. A GGUF's own vocabulary is used unless --tokenizer is given.

Split inference: --stages ADDR1,ADDR2,... runs through stage servers started
with 'seam serve', whose layer ranges must tile the model in the order given;
--split N starts N stages in this process on loopback. --wire picks the
activation encoding between stages: f32 (exact: bit-identical to the whole
model), f16, q8, q5, q4, or lowrank (each boundary's learned codec, attached
to the container with 'seam codec add'). A stage that fails, disconnects,
shuts down or stays silent past --timeout aborts the run with an error naming
it; nothing is printed after a failure. Ctrl-C stops the generation and
prints the speeds so far.`,
		Example: `  seam run --model stories260K.bin --tokenizer tok512.bin -n 256 --temperature 0 Once upon a time
  seam run --model model.seam --split 3 --wire q8 "Once upon a time"
  seam run --model model.seam --stages 10.0.0.2:7070,10.0.0.3:7070 "Once upon a time"`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyThreads(threads); err != nil {
				return err
			}
			prompt := strings.Join(args, " ")
			smp, err := sf.sampler()
			if err != nil {
				return err
			}
			if err := split.validate(cmd); err != nil {
				return err
			}
			split.pool.greedy = sf.temperature == 0
			if split.active() {
				sess, head, stop, err := split.session(cmd.Context(), modelPath, tokPath)
				if err != nil {
					return err
				}
				defer stop()
				return runGeneration(cmd, sess, head.Tokenizer, head.Config.SeqLen, prompt, &sf, smp)
			}
			m, sess, err := localSession(modelPath, tokPath)
			if err != nil {
				return err
			}
			defer m.Close()
			return runGeneration(cmd, sess, m.Tokenizer, m.Weights.Config.SeqLen, prompt, &sf, smp)
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "model: GGUF file, llama2.c checkpoint or container directory (required)")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (required for llama2.c checkpoints)")
	addThreadsFlag(cmd.Flags(), &threads)
	cmd.MarkFlagRequired("model")
	sf.register(cmd, 256)
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

// runGeneration streams a generation to stdout and its speeds to stderr,
// also when Ctrl-C or SIGTERM stops it.
func runGeneration(cmd *cobra.Command, sess generate.Session, tok tokenizer.Tokenizer, contextLen int, prompt string, sf *samplingFlags, smp *sample.Sampler) error {
	ctx := cmd.Context()
	defer sess.Close()
	steps, err := sf.stepsFor(cmd, contextLen)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(cmd.OutOrStdout())
	start := time.Now()
	st, err := generate.Generate(ctx, sess, tok, contextLen, prompt,
		generate.Options{Steps: steps, Sampler: smp, EchoPrompt: true}, &flushWriter{w: out})
	out.Flush()
	if st.GeneratedTokens > 0 || err == nil {
		fmt.Fprintln(cmd.OutOrStdout())
	}
	var se *generate.StepsError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("-n/--steps %d: %w", steps, err)
	case err != nil && signals.Cause(ctx) != nil:
		if st.Decode == 0 && st.Prefill > 0 {
			st.Decode = time.Since(start) - st.Prefill
		}
		fmt.Fprintln(cmd.ErrOrStderr(), speeds(st)+" (interrupted)")
		return signals.Cause(ctx)
	case err != nil:
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr(), speeds(st))
	return nil
}
