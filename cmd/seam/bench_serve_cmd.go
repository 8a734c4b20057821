package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/seamlm/seam/batch"
	"github.com/seamlm/seam/bench"
	"github.com/seamlm/seam/loader"
	"github.com/spf13/cobra"
)

func newBenchServeCmd() *cobra.Command {
	var (
		modelPath, tokPath, counts string
		threads                    int
		setup                      bench.ServeSetup
		wireName                   string
		o                          bench.ServeOptions
		linkMbps, linkLatMs        float64
		asJSON                     bool
	)
	cmd := &cobra.Command{
		Use:   "serve --model PATH [--split N] [--streams 1,4,16] [--prompt 16] [-n 64]",
		Short: "Aggregate and per-stream tok/s, latency and stage utilisation under concurrent streams",
		Long: `Bench serve runs N concurrent greedy streams, each a prompt of --prompt
tokens (its own ids) and -n generated tokens, against the whole model in this
process (its sessions batched: every active session's tokens run as one step)
or against --split N in-process stages on loopback (layer ranges balanced by
compute, the classifier counted with the last stage; optionally over emulated
links), for each stream count of --streams in turn, after one short warm-up
stream that is not reported.

It reports the aggregate tok/s (every stream's generated tokens over the wall
time from the first request to the last token), the median stream's own
tok/s, p50 and p99 time to first token (request to first generated token)
and inter-token latency (over every gap of every stream), the worst stream's
p99 gap against the p50 (fairness), each stage's busy fraction (its compute
time over the wall time), and for the whole model the batched steps and the
GB/s of weights they streamed. Model loading is not timed.`,
		Example: `  seam bench serve --model stories110m.gguf --streams 1,2,4,8,16,64 --prompt 16 -n 64
  seam bench serve --model model.seam --split 3 --streams 1,8 --link-mbps 100 --link-latency-ms 10 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyThreads(threads); err != nil {
				return err
			}
			var list []int
			for _, f := range strings.Split(counts, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 1 {
					return fmt.Errorf("--streams %q: want stream counts of at least 1, comma-separated", counts)
				}
				list = append(list, n)
			}
			if setup.Split < 0 {
				return fmt.Errorf("--split %d: want 0 (the whole model) or more stages", setup.Split)
			}
			lc, err := linkConfig(linkMbps, linkLatMs)
			if err != nil {
				return err
			}
			if (lc.RateMbps > 0 || lc.Latency > 0) && setup.Split == 0 {
				return fmt.Errorf("--link-mbps and --link-latency-ms emulate links between stages: add --split")
			}
			if setup.Split > 0 && (cmd.Flags().Changed("prefill-chunk") || cmd.Flags().Changed("kv-f16")) {
				return fmt.Errorf("--prefill-chunk and --kv-f16 size the whole model's batcher; the in-process stages use their defaults")
			}
			setup.Link = lc
			m, err := loader.Open(modelPath, modelOpts(loader.Options{TokenizerPath: tokPath, NoTokenizer: tokPath == ""}))
			if err != nil {
				return err
			}
			defer m.Close()
			if wireName != "" {
				if setup.Split == 0 {
					return fmt.Errorf("--wire %s encodes activations between stages: add --split", wireName)
				}
				if setup.Encoding, err = encodingByName(wireName); err != nil {
					return fmt.Errorf("--wire: %w", err)
				}
				setup.Codecs = m.Codecs
			}
			id, err := m.Identity()
			if err != nil {
				return err
			}
			if o.LongPrompt < 0 || o.LongPrompt+1 > m.Weights.Config.SeqLen {
				return fmt.Errorf("--long-prompt %d: want 0 (none) or a prompt that fits the context of %d", o.LongPrompt, m.Weights.Config.SeqLen)
			}
			if o.Prompt+o.Output > m.Weights.Config.SeqLen {
				return fmt.Errorf("--prompt %d and -n %d need %d positions; the context holds %d", o.Prompt, o.Output, o.Prompt+o.Output, m.Weights.Config.SeqLen)
			}
			setup.Logger = slog.Default()
			o.Progress = cmd.ErrOrStderr()
			rows, err := bench.ServeCurve(cmd.Context(), m.Weights, id, setup, list, o)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 8, 2, ' ', 0)
			fmt.Fprintf(tw, "streams\tlong prompt\ttok/s\tper stream\tTTFT p50 ms\tTTFT p99 ms\tITL p50 ms\tITL p99 ms\tworst p99/p50\tstage busy\tweights GB/s\n")
			for _, r := range rows {
				util := make([]string, len(r.Utilisation))
				for i, u := range r.Utilisation {
					util[i] = fmt.Sprintf("%.0f%%", 100*u)
				}
				gbs := "-"
				if r.Steps > 0 {
					gbs = fmt.Sprintf("%.1f", r.GBs)
				}
				long := "-"
				if r.LongPrompt > 0 {
					long = fmt.Sprintf("%d (TTFT %.0f ms)", r.LongPrompt, r.LongTTFT)
				}
				fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%s\t%s\n", r.Streams, long, r.TokS, r.StreamTokS, r.TTFTp50, r.TTFTp99,
					r.ITLp50, r.ITLp99, r.ITLWorstRatio, strings.Join(util, " "), gbs)
			}
			return tw.Flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelPath, "model", "", "model: GGUF file, llama2.c checkpoint or container directory (required)")
	fl.StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (not needed: prompts are token ids)")
	fl.StringVar(&wireName, "wire", "", "with --split: the activation encoding between the stages: f32 (default), f16, q8, q5, q4, or lowrank (the container's codecs)")
	fl.IntVar(&setup.Split, "split", 0, "run through N in-process stages on loopback (0: the whole model in this process, batched)")
	fl.StringVar(&counts, "streams", "1,4,16", "concurrent stream counts to run, one after the other")
	addThreadsFlag(fl, &threads)
	fl.IntVar(&o.Prompt, "prompt", 16, "prompt tokens per stream")
	fl.IntVarP(&o.Output, "tokens", "n", 64, "tokens each stream generates")
	fl.IntVar(&o.LongPrompt, "long-prompt", 0, "also run each stream count with one more stream, a prompt of this many tokens arriving when the first stream is half way: how much a long prompt costs the others")
	fl.IntVar(&setup.Chunk, "prefill-chunk", batch.DefaultChunk, "prompt tokens one session runs per batched step")
	fl.BoolVar(&setup.F16KV, "kv-f16", false, "f16 KV caches")
	fl.BoolVar(&asJSON, "json", false, "print a JSON array, one object per stream count")
	registerLinkFlags(cmd, &linkMbps, &linkLatMs)
	cmd.MarkFlagRequired("model")
	return cmd
}
