package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/synth"
	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	var modelPath, tokPath string
	var sf samplingFlags
	var split int
	cmd := &cobra.Command{
		Use:   "demo [--model PATH] [--split N] [PROMPT]",
		Short: "Show Seam working, with no download (random weights unless --model is given)",
		Long: `Demo generates text twice: once with the whole model in this process, then
with the model split into --split pipeline stages that talk over loopback TCP
with the stage wire protocol (f32 activations), and checks that the two
outputs are identical, as split inference must be.

Without --model it builds a small deterministic model with RANDOM WEIGHTS, so
its text is noise: it shows the machinery (tokenizer, forward pass, stages,
wire, sampling), not a trained model.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt := "Once upon a time"
			if len(args) > 0 {
				prompt = strings.Join(args, " ")
			}
			if split < 0 || split == 1 {
				return fmt.Errorf("--split %d: want 2 or more stages, or 0 to skip the split run", split)
			}
			m, err := demoModel(cmd, modelPath, tokPath)
			if err != nil {
				return err
			}
			defer m.Close()
			stderr := cmd.ErrOrStderr()
			fmt.Fprintf(stderr, "model: %s\n\n-- whole model, in this process --\n", m.Weights.Config.String())
			whole, err := demoRun(cmd, m, prompt, &sf, 0)
			if err != nil {
				return err
			}
			if split < 2 {
				return nil
			}
			fmt.Fprintf(stderr, "\n-- the same model split into %d stages over loopback TCP (f32 wire) --\n", split)
			staged, err := demoRun(cmd, m, prompt, &sf, split)
			if err != nil {
				return err
			}
			if staged != whole {
				return fmt.Errorf("split output differs from the whole model's: this is a bug in Seam")
			}
			fmt.Fprintf(stderr, "\nsplit output is identical to the whole model's\n")
			return nil
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "a real model to use instead of the random-weight one")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (with a llama2.c --model)")
	cmd.Flags().IntVar(&split, "split", 3, "stages to split the model into for the second run (0: skip it)")
	sf.register(cmd, 64)
	cmd.Flags().Set("seed", "1")
	cmd.Flags().Lookup("seed").DefValue = "1"
	return cmd
}

// demoRun generates once, whole (split == 0) or through split in-process
// stages, streaming to stdout, and returns the text.
func demoRun(cmd *cobra.Command, m *loader.Model, prompt string, sf *samplingFlags, split int) (string, error) {
	smp, steps, err := sf.forModel(cmd, m.Weights.Config.SeqLen)
	if err != nil {
		return "", err
	}
	var sess generate.Session
	if split == 0 {
		mod, err := model.New(m.Weights)
		if err != nil {
			return "", err
		}
		if sess, err = generate.NewLocal(mod); err != nil {
			return "", err
		}
	} else {
		id, err := m.Identity()
		if err != nil {
			return "", err
		}
		ranges, err := stage.EvenRanges(m.Weights.Config.NLayers, split)
		if err != nil {
			return "", err
		}
		local, err := stage.StartLocal(m.Weights, ranges, stage.Config{Identity: id, Timeout: 30 * time.Second}, m.Codecs)
		if err != nil {
			return "", err
		}
		defer local.Close()
		chain, err := pipeline.Dial(cmd.Context(), local.Addrs, pipeline.Options{Identity: id, Config: m.Weights.Config, Timeout: 30 * time.Second})
		if err != nil {
			return "", err
		}
		defer chain.Close()
		for _, s := range chain.Stages() {
			fmt.Fprintln(cmd.ErrOrStderr(), "  "+s)
		}
		if sess, err = chain.NewSession(cmd.Context()); err != nil {
			return "", err
		}
	}
	defer sess.Close()
	var text strings.Builder
	out := io.MultiWriter(cmd.OutOrStdout(), &text)
	st, err := generate.Generate(cmd.Context(), sess, m.Tokenizer, m.Weights.Config.SeqLen, prompt,
		generate.Options{Steps: steps, Sampler: smp, EchoPrompt: true}, out)
	fmt.Fprintln(cmd.OutOrStdout())
	if err != nil {
		return "", err
	}
	fmt.Fprintln(cmd.ErrOrStderr(), speeds(st))
	return text.String(), nil
}

// demoModel opens --model, or builds the synthetic random-weight model.
func demoModel(cmd *cobra.Command, modelPath, tokPath string) (*loader.Model, error) {
	if modelPath != "" {
		return loader.Open(modelPath, modelOpts(loader.Options{TokenizerPath: tokPath}))
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "demo: using a synthetic model with RANDOM WEIGHTS (no download needed); its text is noise, not language. Pass --model for a real one.")
	cfg := synth.DemoConfig()
	w, err := synth.DemoWeights(1)
	if err != nil {
		return nil, err
	}
	tok, err := synth.Tokenizer(cfg.VocabSize)
	if err != nil {
		return nil, err
	}
	return &loader.Model{Path: "(synthetic)", Weights: w, Tokenizer: tok}, nil
}
