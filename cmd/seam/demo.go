package main

import (
	"fmt"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	var modelPath, tokPath string
	var sf samplingFlags
	cmd := &cobra.Command{
		Use:   "demo [--model PATH] [PROMPT]",
		Short: "Show Seam working, with no download (random weights unless --model is given)",
		Long: `Demo generates text on this machine. Without --model it builds a small
deterministic model with RANDOM WEIGHTS, so its text is noise: it shows the
machinery (tokenizer, forward pass, sampling), not a trained model.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt := "Once upon a time"
			if len(args) == 1 {
				prompt = args[0]
			}
			smp, err := sf.sampler()
			if err != nil {
				return err
			}
			m, err := demoModel(cmd, modelPath, tokPath)
			if err != nil {
				return err
			}
			defer m.Close()
			mod, err := model.New(m.Weights)
			if err != nil {
				return err
			}
			sess, err := generate.NewLocal(mod)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "model: %s\n", m.Weights.Config.String())
			return runGeneration(cmd, sess, m.Tokenizer, m.Weights.Config.SeqLen, prompt, sf.steps, smp)
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "a real model to use instead of the random-weight one")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (with a llama2.c --model)")
	sf.register(cmd)
	cmd.Flags().Lookup("steps").DefValue = "64"
	cmd.Flags().Set("steps", "64")
	cmd.Flags().Set("seed", "1")
	cmd.Flags().Lookup("seed").DefValue = "1"
	return cmd
}

// demoModel opens --model, or builds the synthetic random-weight model.
func demoModel(cmd *cobra.Command, modelPath, tokPath string) (*loader.Model, error) {
	if modelPath != "" {
		return loader.Open(modelPath, loader.Options{TokenizerPath: tokPath})
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "demo: using a synthetic model with RANDOM WEIGHTS (no download needed); its text is noise, not language. Pass --model for a real one.")
	cfg := synth.DemoConfig()
	w, err := synth.Weights(cfg, 1)
	if err != nil {
		return nil, err
	}
	tok, err := synth.Tokenizer(cfg.VocabSize)
	if err != nil {
		return nil, err
	}
	return &loader.Model{Path: "(synthetic)", Weights: w, Tokenizer: tok}, nil
}
