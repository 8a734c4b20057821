package main

import (
	"fmt"

	"github.com/seamlm/seam/bench"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
	"github.com/spf13/cobra"
)

func newBenchMakeGGUFCmd() *cobra.Command {
	var (
		out, size, matrices, embedding             string
		layers, dim, hidden, heads, kvHeads, vocab int
		seqLen                                     int
		seed                                       uint64
		tied                                       bool
	)
	cmd := &cobra.Command{
		Use:   "make-gguf --out FILE [--size 2GiB | --layers N]",
		Short: "Write a synthetic llama GGUF of a given size, for import benchmarks",
		Long: `Make-gguf streams a GGUF (version 3) llama model with RANDOM weights: Q8_0
layer matrices, f16 token embedding and classifier, f32 norms, the llama
metadata and a synthetic vocabulary, so that 'seam import' takes it without
--tokenizer. The shape defaults to LLaMA-7B's widths; the number of layers is
chosen so that the tensor data is as close to --size as possible, unless
--layers is given. The file is written under FILE.tmp, synced, and renamed.`,
		Example: `  seam bench make-gguf --out /tmp/synth-2g.gguf --size 2GiB
  seam bench make-gguf --out tiny.gguf --dim 64 --hidden 96 --heads 4 --kv-heads 2 --vocab 300 --layers 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts synth.GGUFOptions
			var err error
			if opts.Matrices, err = tensor.ParseDType(matrices); err != nil {
				return fmt.Errorf("--matrices: %w", err)
			}
			if opts.Embedding, err = tensor.ParseDType(embedding); err != nil {
				return fmt.Errorf("--embedding: %w", err)
			}
			opts.Seed = seed
			cfg := model.Config{Dim: dim, HiddenDim: hidden, NLayers: layers, NHeads: heads, NKVHeads: kvHeads, VocabSize: vocab,
				SeqLen: seqLen, RopeTheta: 10000, NormEps: 1e-5, TiedOutput: tied}
			if heads > 0 {
				cfg.RopeDim = dim / heads
			}
			if layers == 0 {
				target, err := bench.ParseByteSize(size)
				if err != nil {
					return fmt.Errorf("--size: %w", err)
				}
				if cfg, err = synth.FitGGUFLayers(cfg, opts, target); err != nil {
					return err
				}
			}
			if _, err := synth.GGUFLayout(cfg, opts); err != nil {
				return err
			}
			opts.Progress = byteProgress(cmd, "writing")
			fmt.Fprintf(cmd.ErrOrStderr(), "writing %s: %s\n", out, cfg.String())
			res, err := bench.MakeGGUF(out, cfg, opts)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "GGUF file to write (required)")
	f.StringVar(&size, "size", "2GiB", "target tensor data size, e.g. 2GiB, 500MiB, 3GB (ignored with --layers)")
	f.IntVar(&layers, "layers", 0, "number of layers (0: as many as --size needs)")
	f.IntVar(&dim, "dim", 4096, "model width")
	f.IntVar(&hidden, "hidden", 11008, "feed-forward width")
	f.IntVar(&heads, "heads", 32, "attention heads")
	f.IntVar(&kvHeads, "kv-heads", 32, "key/value heads")
	f.IntVar(&vocab, "vocab", 32000, "vocabulary size (at least 259)")
	f.IntVar(&seqLen, "seq-len", 4096, "context length recorded in the metadata")
	f.StringVar(&matrices, "matrices", "q8_0", "layer matrix type: q8_0, q4_0, q4_k, q6_k, f16 or f32")
	f.StringVar(&embedding, "embedding", "f16", "embedding and classifier type: f16, f32, q8_0, q4_0, q4_k or q6_k")
	f.BoolVar(&tied, "tied", false, "tie the classifier to the embedding (no output.weight)")
	f.Uint64Var(&seed, "seed", 1, "random seed for the weights")
	cmd.MarkFlagRequired("out")
	return cmd
}
