package main

import (
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/seamlm/seam/bench"
	"github.com/seamlm/seam/loader"
	"github.com/spf13/cobra"
)

func newBenchSplitCmd() *cobra.Command {
	var (
		modelPath, tokPath, wires, links string
		o                                bench.SplitOptions
	)
	cmd := &cobra.Command{
		Use:   "split --model PATH [--split N] [--wire f32,f16,q8] [--links 1000@1ms,100@10ms,20@30ms]",
		Short: "Prefill and decode tok/s through in-process stages over emulated links, per encoding",
		Long: `Bench split starts N stages in this process on loopback, with every
connection's sending side limited to the given bandwidth and one-way latency,
and measures prefill tok/s (one prompt of --prompt-tokens) and decode tok/s
(--decode-tokens greedy steps) for each wire encoding. Each round runs every
encoding once, in an order that alternates between rounds; the first round is
a warm-up and is discarded; the table reports the median of the others.
Bytes per token are the frame (52-byte header plus payload) of one decode step.
A progress bar shows on a terminal; with -v each run is logged as it finishes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Links, err = bench.ParseLinks(links); err != nil {
				return err
			}
			for _, name := range strings.Split(wires, ",") {
				id, err := encodingByName(name)
				if err != nil {
					return err
				}
				o.Encodings = append(o.Encodings, id)
			}
			m, err := loader.Open(modelPath, modelOpts(loader.Options{TokenizerPath: tokPath}))
			if err != nil {
				return err
			}
			defer m.Close()
			o.Logger, o.Progress = slog.Default(), progress(cmd, "bench split")
			rows, err := bench.Split(cmd.Context(), m, o)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 8, 2, ' ', 0)
			fmt.Fprintf(tw, "link\twire\tbytes/token\tprefill tok/s\tdecode tok/s\n")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\n", r.Link, r.Encoding, r.FrameBytes, r.PrefillTokS, r.DecodeTokS)
			}
			return tw.Flush()
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&modelPath, "model", "", "model to split (required)")
	fl.StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (for llama2.c checkpoints)")
	fl.IntVar(&o.Stages, "split", 2, "number of stages")
	fl.StringVar(&wires, "wire", "f32,f16,q8", "encodings to compare")
	fl.StringVar(&links, "links", "1000@1ms,100@10ms,20@30ms", "emulated links, MBPS@LATENCYms, comma-separated")
	fl.IntVar(&o.PromptTokens, "prompt-tokens", 128, "prefill length")
	fl.IntVar(&o.DecodeTokens, "decode-tokens", 32, "greedy decode steps")
	fl.IntVar(&o.Rounds, "rounds", 3, "measured rounds (after one warm-up round)")
	cmd.MarkFlagRequired("model")
	return cmd
}
