package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/seamlm/seam/llama2c"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
	"github.com/spf13/cobra"
)

func newSynthCmd() *cobra.Command {
	var shape, out, arch, vocab, dtype string
	var seed uint64
	var logitStd float64
	var layers int
	cmd := &cobra.Command{
		Use:   "synth (--shape demo|wide|stories110m --out DIR | --arch llama3|qwen2|qwen3 [--vocab DIR] --out FILE.gguf)",
		Short: "Write a random-weight model: a llama2.c checkpoint, or a GGUF of a real family's architecture",
		Long: `Synth writes models with deterministic RANDOM weights, for tests and benchmarks.

With --shape it writes model.bin (llama2.c version 0, f32) and tokenizer.bin
into the directory --out, in a given shape, so that decode speed can be
compared with other implementations (for example llama2.c's run.c).

With --arch it writes one GGUF file (--out) of a real family's architecture,
small (width 256, 4 layers) but with every variant of it: llama3 (RoPE base
500000 and Llama 3.1's scaling as a rope_freqs tensor, grouped-query
attention, untied classifier), qwen2 (Q/K/V biases, NeoX RoPE, tied) or qwen3
(per-head Q/K norms, head size 128 apart from width/heads, NeoX RoPE, tied).
--vocab names a Hugging Face tokenizer folder (tokenizer.json and
tokenizer_config.json) whose vocabulary the file carries, so that llama.cpp
and Seam load it like a real model; without it a synthetic 512-piece
SentencePiece vocabulary is written. --logit-std scales the final norm so the
logits of a random state have that spread: random weights otherwise predict
nearly uniformly over a large vocabulary.`,
		Example: `  seam synth --shape demo --out /tmp/demo
  seam synth --arch qwen3 --vocab ../shared/tokenizers/qwen3 --out /tmp/qwen3.gguf --dtype q8_0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if arch != "" {
				if cmd.Flags().Changed("shape") {
					return fmt.Errorf("give --shape or --arch, not both")
				}
				return synthArch(cmd, arch, vocab, out, dtype, layers, seed, logitStd)
			}
			if cmd.Flags().Changed("vocab") || cmd.Flags().Changed("dtype") {
				return fmt.Errorf("--vocab and --dtype go with --arch")
			}
			return synthShape(cmd, shape, out, seed)
		},
	}
	f := cmd.Flags()
	f.StringVar(&shape, "shape", "stories110m", "llama2.c model shape: demo (dim 128), wide (dim 1024, 4 layers) or stories110m")
	f.StringVar(&arch, "arch", "", "write a GGUF of this architecture: llama3, qwen2 or qwen3")
	f.StringVar(&vocab, "vocab", "", "with --arch: Hugging Face tokenizer folder whose vocabulary the GGUF carries")
	f.StringVar(&dtype, "dtype", "q8_0", "with --arch: weight type of every matrix, embedding and classifier: f32, f16, q8_0 or q4_k")
	f.IntVar(&layers, "layers", 0, "with --arch: number of layers (default 4)")
	f.Float64Var(&logitStd, "logit-std", 4, "with --arch: standard deviation of the logits of a random state (0: final norm of ones)")
	f.StringVar(&out, "out", "", "output: a directory for --shape, a .gguf file for --arch (required)")
	f.Uint64Var(&seed, "seed", 1, "random seed for the weights")
	cmd.MarkFlagRequired("out")
	return cmd
}

func synthArch(cmd *cobra.Command, arch, vocabDir, out, dtype string, layers int, seed uint64, logitStd float64) error {
	dt, err := tensor.ParseDType(dtype)
	if err != nil {
		return fmt.Errorf("--dtype: %w", err)
	}
	a := synth.ArchFile{Arch: arch, DType: dt, Layers: layers, Seed: seed, LogitStd: logitStd}
	if vocabDir != "" {
		if a.Vocab, err = tokenizer.ReadHFVocab(vocabDir); err != nil {
			return fmt.Errorf("--vocab: %w", err)
		}
	}
	if bar := newBar(cmd, "writing"); bar != nil {
		a.Progress = func(done, total int64) { bar.ChangeMax64(total); bar.Set64(done) }
	}
	cfg, err := synth.WriteArchFile(out, a)
	if err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s %s, %s, %d bytes (random weights)\n", out, arch, dt, cfg.String(), st.Size())
	return nil
}

func synthShape(cmd *cobra.Command, shape, out string, seed uint64) error {
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
