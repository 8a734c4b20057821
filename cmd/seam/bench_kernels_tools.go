package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"

	"github.com/seamlm/seam/bench"
	"github.com/seamlm/seam/llama2c"
	"github.com/seamlm/seam/loader"
	"github.com/spf13/cobra"
)

// newBenchLlama2cQ8Cmd converts a llama2.c f32 checkpoint to version 2 (Q8),
// so that Seam and llama2.c's runq.c can be compared on the same model.
func newBenchLlama2cQ8Cmd() *cobra.Command {
	var in, out string
	var group int
	cmd := &cobra.Command{
		Use:   "llama2c-q8 --in model.bin --out model-q8.bin [--group-size 64]",
		Short: "Quantize a llama2.c f32 checkpoint to llama2.c's version 2 (int8 groups), for runq.c comparisons",
		Long: `Llama2c-q8 reads a llama2.c version 0 (f32) checkpoint and writes it as
version 2, the format of llama2.c's runq.c: norms in f32, every matrix as int8
values with one f32 scale per --group-size values (scale = max |w| / 127, as
llama2.c's export.py computes it). The group size must divide dim.`,
		Example: `  seam synth --shape stories110m --out /tmp/s110
  seam bench llama2c-q8 --in /tmp/s110/model.bin --out /tmp/s110/model-q8.bin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := llama2c.Open(in)
			if err != nil {
				return err
			}
			defer c.Close()
			if c.Version != 0 {
				return fmt.Errorf("%s: version %d; llama2c-q8 reads version 0 (f32) checkpoints", in, c.Version)
			}
			return writeFile(out, func(f *os.File) error { return llama2c.WriteQ8(f, c.Weights, group) })
		},
	}
	cmd.Flags().StringVar(&in, "in", "", "llama2.c version 0 checkpoint (required)")
	cmd.Flags().StringVar(&out, "out", "", "version 2 checkpoint to write (required)")
	cmd.Flags().IntVar(&group, "group-size", 64, "values per int8 group")
	cmd.MarkFlagRequired("in")
	cmd.MarkFlagRequired("out")
	return cmd
}

// newBenchToLlama2cCmd writes any f32 model (a GGUF, say) as a llama2.c
// version 0 checkpoint: the same weights in llama2.c's layout, to compare
// the two formats, or Seam with run.c, on identical numbers.
func newBenchToLlama2cCmd() *cobra.Command {
	var in, out string
	cmd := &cobra.Command{
		Use:   "to-llama2c --in MODEL --out model.bin",
		Short: "Write an f32 model (GGUF, container) as a llama2.c version 0 checkpoint with the same weights",
		Long: `To-llama2c loads a model whose tensors are all f32 and writes them as a
llama2.c version 0 checkpoint (the format of run.c): the same values, in
llama2.c's tensor order, after its 28-byte header. An untied classifier is
kept (llama2.c marks it with a negative vocabulary size).`,
		Example: `  seam bench make-gguf --out s110.gguf --matrices f32 --embedding f32 --dim 768 --hidden 2048 \
    --layers 12 --heads 12 --kv-heads 12 --vocab 32000 --seq-len 1024
  seam bench to-llama2c --in s110.gguf --out s110.bin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := loader.Open(in, loader.Options{NoTokenizer: true, Mapped: true})
			if err != nil {
				return err
			}
			defer m.Close()
			return writeFile(out, func(f *os.File) error { return llama2c.WriteLegacy(f, m.Weights) })
		},
	}
	cmd.Flags().StringVar(&in, "in", "", "f32 model to convert (required)")
	cmd.Flags().StringVar(&out, "out", "", "llama2.c checkpoint to write (required)")
	cmd.MarkFlagRequired("in")
	cmd.MarkFlagRequired("out")
	return cmd
}

func newBenchBandwidthCmd() *cobra.Command {
	var threads int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bandwidth [--threads N] [--json]",
		Short: "Measure the machine's memory read bandwidth (GB/s), as decode and prefill do",
		Long: `Bandwidth measures how fast N threads read memory: they sum disjoint parts of
a 1 GiB buffer with the SIMD dot kernel; the best of 5 rounds after a warm-up
round is printed. Scripts measure it once and pass it to decode and prefill
with --bandwidth.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if threads <= 0 {
				threads = runtime.NumCPU()
			}
			bw, err := bench.ReadBandwidth(threads, 0)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"threads": threads, "bandwidth_gb_s": bw})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "read bandwidth: %.2f GB/s with %d threads\n", bw, threads)
			return err
		},
	}
	cmd.Flags().IntVar(&threads, "threads", 0, "reading threads (0: every core)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"threads": N, "bandwidth_gb_s": X}`)
	return cmd
}
