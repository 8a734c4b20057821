package main

import (
	"encoding/json"
	"fmt"

	"github.com/seamlm/seam/bench"
	"github.com/seamlm/seam/loader"
	"github.com/spf13/cobra"
)

// benchKernelCommands are `seam bench decode` and `seam bench prefill`.
func benchKernelCommands() []*cobra.Command {
	return []*cobra.Command{newBenchDecodeCmd(), newBenchPrefillCmd(), newBenchBandwidthCmd(), newBenchLlama2cQ8Cmd(), newBenchToLlama2cCmd()}
}

const speedMethod = `The model is loaded first (not timed) with no tokenizer. The machine's read
bandwidth is measured with the same thread count (unless --bandwidth gives it):
the threads sum disjoint parts of a 1 GiB buffer with the SIMD dot kernel,
best of 5 rounds after a warm-up round. GB/s counts the weights one forward
pass reads: every layer tensor, the final norm and classifier, one embedding
row (not the KV cache). Speeds are wall-clock; other load on the machine
lowers them.`

type speedFlags struct {
	model     string
	threads   int
	bandwidth float64
	json      bool
}

func (f *speedFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model: GGUF file, llama2.c checkpoint or container directory (required)")
	fl.IntVar(&f.threads, "threads", 0, "worker threads (0: every core)")
	fl.Float64Var(&f.bandwidth, "bandwidth", 0, "read bandwidth in GB/s to compare with, instead of measuring it")
	fl.BoolVar(&f.json, "json", false, "print one JSON object (tok_s, gb_s, bandwidth_gb_s, ...) instead of a line of text")
	cmd.MarkFlagRequired("model")
}

// run loads the model, runs measure on it and prints the result.
func (f *speedFlags) run(cmd *cobra.Command, measure func(*loader.Model, bench.SpeedOptions) (bench.Speed, error)) error {
	m, err := loader.Open(f.model, loader.Options{NoTokenizer: true})
	if err != nil {
		return err
	}
	defer m.Close()
	opts := bench.SpeedOptions{Threads: f.threads, Bandwidth: f.bandwidth}
	if !f.json {
		opts.Progress = cmd.ErrOrStderr()
	}
	res, err := measure(m, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", f.model, err)
	}
	if f.json {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), res)
	return err
}

func newBenchDecodeCmd() *cobra.Command {
	var f speedFlags
	var steps, warmup int
	cmd := &cobra.Command{
		Use:   "decode --model M [-n N] [--threads N] [--json]",
		Short: "Measure greedy decode speed (tok/s, GB/s of weights, share of read bandwidth)",
		Long: `Decode feeds token 1, then N times the argmax of the previous logits, one
token per step through every layer and the classifier, and reports the speed
of the timed steps. --warmup steps run first and are not timed.

` + speedMethod,
		Example: `  seam bench decode --model stories110m.gguf -n 200
  seam bench decode --model model.bin --threads 1 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(m *loader.Model, o bench.SpeedOptions) (bench.Speed, error) {
				return bench.Decode(m.Weights, bench.DecodeOptions{SpeedOptions: o, Steps: steps, Warmup: noneIfZero(warmup)})
			})
		},
	}
	f.add(cmd)
	cmd.Flags().IntVarP(&steps, "steps", "n", 128, "decode steps to time")
	cmd.Flags().IntVar(&warmup, "warmup", 8, "untimed decode steps first")
	return cmd
}

func newBenchPrefillCmd() *cobra.Command {
	var f speedFlags
	var tokens, reps, warmup int
	cmd := &cobra.Command{
		Use:   "prefill --model M [--tokens T] [--threads N] [--json]",
		Short: "Measure prompt processing speed (tok/s for a T-token prompt)",
		Long: `Prefill runs a fixed T-token prompt (token 1, then pseudo-random ids)
through every layer as one batch from an empty cache, then the classifier on
its last token, --reps times after --warmup untimed runs, and reports tokens
per second over the timed runs. GB/s counts the weights once per run.

` + speedMethod,
		Example: `  seam bench prefill --model stories110m-q4_0.gguf --tokens 128`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(m *loader.Model, o bench.SpeedOptions) (bench.Speed, error) {
				return bench.Prefill(m.Weights, bench.PrefillOptions{SpeedOptions: o, Tokens: tokens, Reps: reps, Warmup: noneIfZero(warmup)})
			})
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&tokens, "tokens", 128, "prompt length")
	cmd.Flags().IntVar(&reps, "reps", 5, "timed repetitions")
	cmd.Flags().IntVar(&warmup, "warmup", 1, "untimed repetitions first")
	return cmd
}

// noneIfZero maps a flag's 0 ("no warm-up") to the package's -1.
func noneIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
