package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/seamlm/seam/llama2c"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/spf13/cobra"
)

func newSynthCmd() *cobra.Command {
	var shape, out string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "synth --shape demo|wide|stories110m --out DIR",
		Short: "Write a random-weight llama2.c checkpoint and tokenizer, for benchmarks",
		Long: `Synth writes model.bin (llama2.c version 0, f32) and tokenizer.bin with
deterministic RANDOM weights in a given shape, so that decode speed can be
compared with other implementations (for example llama2.c's run.c) on
identical inputs without downloading a model.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var cfg model.Config
			switch shape {
			case "demo":
				cfg = synth.DemoConfig()
			case "stories110m":
				cfg = synth.Stories110MConfig()
			case "wide":
				cfg = synth.WideConfig()
			default:
				return fmt.Errorf("--shape %q: want demo, wide or stories110m", shape)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			w, err := synth.Weights(cfg, seed)
			if err != nil {
				return err
			}
			if err := writeFile(filepath.Join(out, "model.bin"), func(f *os.File) error { return llama2c.WriteLegacy(f, w) }); err != nil {
				return err
			}
			tok, err := synth.Tokenizer(cfg.VocabSize)
			if err != nil {
				return err
			}
			if err := writeFile(filepath.Join(out, "tokenizer.bin"), func(f *os.File) error { return synth.WriteLlama2cTokenizer(f, tok) }); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s/model.bin and %s/tokenizer.bin (%s; random weights)\n", out, out, cfg.String())
			return nil
		},
	}
	cmd.Flags().StringVar(&shape, "shape", "stories110m", "model shape: demo (dim 128), wide (dim 1024, 4 layers) or stories110m")
	cmd.Flags().StringVar(&out, "out", "", "output directory (required)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "random seed for the weights")
	cmd.MarkFlagRequired("out")
	return cmd
}

// writeFile creates path, lets fill write it, and closes it, reporting the first error.
func writeFile(path string, fill func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
