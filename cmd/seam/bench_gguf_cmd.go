package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

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
				target, err := parseByteSize(size)
				if err != nil {
					return fmt.Errorf("--size: %w", err)
				}
				if cfg, err = synth.FitGGUFLayers(cfg, opts, target); err != nil {
					return err
				}
			}
			layout, err := synth.GGUFLayout(cfg, opts)
			if err != nil {
				return err
			}
			return makeGGUF(cmd, out, cfg, opts, layout)
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
	f.StringVar(&matrices, "matrices", "q8_0", "layer matrix type: q8_0, f16 or f32")
	f.StringVar(&embedding, "embedding", "f16", "embedding and classifier type: f16, q8_0 or f32")
	f.BoolVar(&tied, "tied", false, "tie the classifier to the embedding (no output.weight)")
	f.Uint64Var(&seed, "seed", 1, "random seed for the weights")
	cmd.MarkFlagRequired("out")
	return cmd
}

// makeGGUF writes the file, reporting progress, and prints its size and its
// largest tensor (which bounds an import's expected peak memory).
func makeGGUF(cmd *cobra.Command, out string, cfg model.Config, opts synth.GGUFOptions, layout []synth.GGUFTensor) error {
	var total int64
	largest := layout[0]
	for _, t := range layout {
		total += t.Bytes
		if t.Bytes > largest.Bytes {
			largest = t
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "writing %s: %s, %d tensors, %d bytes of tensor data\n", out, cfg.String(), len(layout), total)
	opts.Progress = byteProgress(cmd, "writing")
	start := time.Now()
	tmp := out + ".tmp"
	err := writeFile(tmp, func(f *os.File) error {
		if err := synth.WriteGGUF(f, cfg, opts); err != nil {
			return err
		}
		// Synced, so that its write-back does not run during the import
		// measured next.
		return f.Sync()
	})
	if err == nil {
		err = os.Rename(tmp, out)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	elapsed := time.Since(start)
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d bytes (%.3f GiB), %d layers, largest tensor %s (%s %dx%d) %d bytes, in %v (%.0f MB/s)\n",
		out, st.Size(), float64(st.Size())/(1<<30), cfg.NLayers, largest.Name, largest.Type, largest.Rows, largest.Cols, largest.Bytes,
		elapsed.Round(time.Millisecond), float64(st.Size())/elapsed.Seconds()/1e6)
	return nil
}

// parseByteSize reads a size such as 2GiB, 1.5GB, 500MiB, 64KiB or 1000 (bytes).
func parseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	num, mult := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	x, err := strconv.ParseFloat(num, 64)
	v := x * mult
	if err != nil || !(v >= 1) || v > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes with an optional unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB, B)", s)
	}
	return int64(math.Round(v)), nil
}
