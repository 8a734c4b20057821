package main

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/seamlm/seam/bench"
	"github.com/seamlm/seam/loader"
	"github.com/spf13/cobra"
)

// benchKernelCommands are `seam bench decode` and `seam bench prefill`.
func benchKernelCommands() []*cobra.Command {
	return []*cobra.Command{newBenchDecodeCmd(), newBenchPrefillCmd(), newBenchThreadsCmd(), newBenchBandwidthCmd(), newBenchLlama2cQ8Cmd(), newBenchToLlama2cCmd()}
}

const speedMethod = `The model is loaded first (not timed) with no tokenizer, its layers and
classifier copied into huge-page memory as seam serve and seam run do
(--mmap: read from the file's mapping instead). The machine's read
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
	if err := checkThreads(f.threads); err != nil { // the measurement sets the count itself
		return err
	}
	m, err := loader.Open(f.model, modelOpts(loader.Options{NoTokenizer: true}))
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

func newBenchThreadsCmd() *cobra.Command {
	var model, counts, bandwidths string
	var rounds, steps, warmup, tokens, block int
	var prefill, perToken, asJSON bool
	cmd := &cobra.Command{
		Use:   "threads --model M [--threads 1,N] [--rounds 6] [--prefill | --per-token [--block B]] [--json]",
		Short: "A/B of decode (or prefill) speed across thread counts, alternated in one process",
		Long: `Threads measures how the speed of bench decode (or, with --prefill, bench
prefill) changes with the worker count: every round runs the workload once
at each count of --threads, in that order in even rounds and reversed in odd
ones, and the first round is a warm-up that is not reported. Each round's
speed is divided by the first count's in the same round, so a machine whose
speed drifts during the run (other load, a busy neighbour of a virtual
machine) moves both sides of a ratio alike; the median ratio and its range
over the rounds are reported, with each count's median tok/s, its weight
stream as a share of the read bandwidth, and the read bandwidth against the
first count's (what a decode bound by memory alone could gain: a speed
ratio near it says the machine, not the code, sets the limit).

Each run is the workload of bench decode (-n steps after --warmup untimed
ones, from an empty cache) or bench prefill (one --tokens prompt, one
untimed and one timed repetition). The model is loaded once, first, and not
timed. Just before every run the read bandwidth is measured with its thread
count (threads summing disjoint parts of one 1 GiB buffer, filled once, with
the SIMD dot kernel; best of 5 reads after a warm-up read), and the run's
weight stream (every layer tensor, the final norm and classifier, one
embedding row per forward pass; not the KV cache) is compared with that
figure: the bandwidth of a shared machine moves too. --bandwidth gives the
figures instead. Speeds are wall-clock.

With --per-token (decode only), the counts alternate token by token instead
of run by run: each round decodes the first -n positions, every position at
each count in turn (the cache rewound to it between them), the order of the
counts rotating from one position and round to the next. A token at one
count then always has a neighbour in time at the other, so a machine
whose speed moves from minute to minute moves both sides alike. Before
each token at more than one thread, an untimed empty parallel region wakes
the helper threads, which the token before, at one thread, left asleep: a
continuous decode never waits for them. --block B alternates blocks of B
consecutive positions instead of single tokens (the helpers woken before
each block): every token but a block's first then follows one at the same
count, as in a continuous decode, where single tokens can flatter a change
to what the threads do between tokens (docs/performance.md measured both).
The
ratio is the baseline's total time over each count's, with the 10th and
90th percentiles of the same ratio per position. Every count's logits are
checked bit for bit against the first count's. The read bandwidth is
measured at each count before every round (or given by --bandwidth), and
the share and the bandwidth against the first count's reported are the
medians of the rounds'. --warmup and --tokens do not apply and are
refused.`,
		Example: `  seam bench threads --model stories110m-q4_0.gguf
  seam bench threads --model model.gguf --threads 1,2,4 --rounds 8 --json
  seam bench threads --model model.gguf --prefill --tokens 128
  seam bench threads --model model.gguf --per-token --rounds 17 -n 128
  seam bench threads --model model.gguf --per-token --block 32 --rounds 9`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ths, err := threadCounts(counts)
			if err != nil {
				return err
			}
			if perToken {
				if err := perTokenFlags(cmd, prefill); err != nil {
					return err
				}
			} else if cmd.Flags().Changed("block") {
				return fmt.Errorf("--block applies with --per-token only (run by run, each run is -n positions in a row)")
			}
			m, err := loader.Open(model, modelOpts(loader.Options{NoTokenizer: true}))
			if err != nil {
				return err
			}
			defer m.Close()
			run := func(threads int, bw float64) (bench.Speed, error) {
				o := bench.SpeedOptions{Threads: threads, Bandwidth: bw}
				if prefill {
					return bench.Prefill(m.Weights, bench.PrefillOptions{SpeedOptions: o, Tokens: tokens, Reps: 1, Warmup: 1})
				}
				return bench.Decode(m.Weights, bench.DecodeOptions{SpeedOptions: o, Steps: steps, Warmup: noneIfZero(warmup)})
			}
			opts := bench.ScalingOptions{Threads: ths, Rounds: rounds}
			if bandwidths != "" {
				if opts.Bandwidth, err = parseFloats("--bandwidth", bandwidths); err != nil {
					return err
				}
			} else {
				var meter *bench.BandwidthMeter // made at the first run, once the options are checked
				opts.Meter = func(threads int) (float64, error) {
					if meter == nil {
						infof(cmd, "filling a 1 GiB buffer to measure the read bandwidth before every run")
						if meter, err = bench.NewBandwidthMeter(0); err != nil {
							return 0, err
						}
					}
					return meter.Measure(threads)
				}
			}
			if !asJSON {
				opts.Progress = cmd.ErrOrStderr()
			}
			var res fmt.Stringer
			if perToken {
				res, err = bench.DecodeByToken(m.Weights, bench.TokenScalingOptions{Threads: ths, Positions: steps, Rounds: rounds, Block: block,
					Bandwidth: opts.Bandwidth, Meter: opts.Meter, Progress: opts.Progress})
			} else {
				res, err = bench.MeasureScaling(run, opts)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", model, err)
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), res)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&model, "model", "", "model: GGUF file, llama2.c checkpoint or container directory (required)")
	fl.StringVar(&counts, "threads", "", "comma-separated worker counts, the first the baseline (default 1 and every core)")
	fl.StringVar(&bandwidths, "bandwidth", "", "read bandwidth in GB/s at each thread count, comma-separated, instead of measuring it")
	fl.IntVar(&rounds, "rounds", 6, "rounds, the first a warm-up that is not reported (at least 2)")
	fl.BoolVar(&prefill, "prefill", false, "time prompt processing (bench prefill) instead of decode")
	fl.BoolVar(&perToken, "per-token", false, "decode only: alternate the counts token by token (-n positions a round) instead of run by run")
	fl.IntVar(&block, "block", 1, "with --per-token: consecutive positions each count decodes before the next count takes them")
	fl.IntVarP(&steps, "steps", "n", 128, "decode steps to time per run (with --per-token: positions per round)")
	fl.IntVar(&warmup, "warmup", 8, "untimed decode steps first in every run")
	fl.IntVar(&tokens, "tokens", 128, "with --prefill: the prompt length")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object (threads, tok_s per round, median_tok_s, ratio, ...) instead of a table")
	cmd.MarkFlagRequired("model")
	return cmd
}

// perTokenFlags refuses, by name, the flags --per-token does not use.
func perTokenFlags(cmd *cobra.Command, prefill bool) error {
	if prefill {
		return fmt.Errorf("--per-token times decode; it does not go with --prefill")
	}
	for _, name := range []string{"warmup", "tokens"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s does not apply with --per-token (every round starts at position 0, and the first round is the warm-up)", name)
		}
	}
	return nil
}

// threadCounts parses --threads of bench threads: empty means 1 and every
// core, refused on a machine of one core.
func threadCounts(s string) ([]int, error) {
	if s == "" {
		if runtime.NumCPU() < 2 {
			return nil, fmt.Errorf("--threads: this machine has 1 core; give the counts to compare, such as 1,2")
		}
		return []int{1, runtime.NumCPU()}, nil
	}
	return parseInts("--threads", s)
}

// noneIfZero maps a flag's 0 ("no warm-up") to the package's -1.
func noneIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
