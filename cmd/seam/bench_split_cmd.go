package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
	"github.com/spf13/cobra"
)

// linkSpec is one emulated network: bandwidth and one-way latency.
type linkSpec struct {
	mbps  float64
	latMs float64
}

func (l linkSpec) String() string { return fmt.Sprintf("%g Mbit/s, %g ms", l.mbps, l.latMs) }

func parseLinks(s string) ([]linkSpec, error) {
	var out []linkSpec
	for _, part := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(part, "@")
		mbps, err1 := strconv.ParseFloat(a, 64)
		lat, err2 := strconv.ParseFloat(strings.TrimSuffix(b, "ms"), 64)
		if !ok || err1 != nil || err2 != nil || mbps <= 0 || lat < 0 {
			return nil, fmt.Errorf("--links %q: want MBPS@LATENCYms,... such as 1000@1ms,100@10ms", part)
		}
		out = append(out, linkSpec{mbps, lat})
	}
	return out, nil
}

func newBenchSplitCmd() *cobra.Command {
	var (
		modelPath, tokPath, wires, links          string
		split, promptTokens, decodeTokens, rounds int
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
Bytes per token are the frame (52-byte header plus payload) of one decode step.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			specs, err := parseLinks(links)
			if err != nil {
				return err
			}
			var encs []wire.EncodingID
			for _, name := range strings.Split(wires, ",") {
				id, err := encodingByName(name)
				if err != nil {
					return err
				}
				encs = append(encs, id)
			}
			m, err := loader.Open(modelPath, loader.Options{TokenizerPath: tokPath})
			if err != nil {
				return err
			}
			defer m.Close()
			id, err := m.Identity()
			if err != nil {
				return err
			}
			ranges, err := stage.EvenRanges(m.Weights.Config.NLayers, split)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 8, 2, ' ', 0)
			fmt.Fprintf(tw, "link\twire\tbytes/token\tprefill tok/s\tdecode tok/s\n")
			for _, spec := range specs {
				lc := link.Config{RateMbps: spec.mbps, Latency: time.Duration(spec.latMs * float64(time.Millisecond))}
				res := map[wire.EncodingID][]splitRun{}
				for round := 0; round <= rounds; round++ {
					order := encs
					if round%2 == 1 {
						order = reversed(encs)
					}
					for _, enc := range order {
						r, err := runSplitOnce(m, id, ranges, lc, enc, promptTokens, decodeTokens)
						if err != nil {
							return err
						}
						if round > 0 { // round 0 warms up
							res[enc] = append(res[enc], r)
						}
					}
				}
				for _, enc := range encs {
					size, err := decodeFrameBytes(m, enc, ranges)
					if err != nil {
						return err
					}
					pre, dec := medians(res[enc])
					fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.1f\n", spec, enc, size, pre, dec)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "model to split (required)")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (for llama2.c checkpoints)")
	cmd.Flags().IntVar(&split, "split", 2, "number of stages")
	cmd.Flags().StringVar(&wires, "wire", "f32,f16,q8", "encodings to compare")
	cmd.Flags().StringVar(&links, "links", "1000@1ms,100@10ms,20@30ms", "emulated links, MBPS@LATENCYms, comma-separated")
	cmd.Flags().IntVar(&promptTokens, "prompt-tokens", 128, "prefill length")
	cmd.Flags().IntVar(&decodeTokens, "decode-tokens", 32, "greedy decode steps")
	cmd.Flags().IntVar(&rounds, "rounds", 3, "measured rounds (after one warm-up round)")
	cmd.MarkFlagRequired("model")
	return cmd
}

type splitRun struct{ prefill, decode float64 }

// decodeFrameBytes is the size of one decode step's frame across the first
// boundary: header plus payload.
func decodeFrameBytes(m *loader.Model, enc wire.EncodingID, ranges [][2]int) (int, error) {
	var e wire.Encoding
	if enc == wire.EncodingLowRank {
		c, ok := m.Codecs[ranges[0][1]]
		if !ok {
			return 0, fmt.Errorf("--wire lowrank: no codec attached at boundary %d", ranges[0][1])
		}
		e = codec.NewWire(c)
	} else {
		e, _ = wire.Default.Lookup(enc, 0)
	}
	size, err := e.PayloadSize(1, m.Weights.Config.Dim)
	return size + wire.HeaderSize, err
}

func reversed[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func medians(rs []splitRun) (float64, float64) {
	pre := make([]float64, len(rs))
	dec := make([]float64, len(rs))
	for i, r := range rs {
		pre[i], dec[i] = r.prefill, r.decode
	}
	return median(pre), median(dec)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	for i := range s { // insertion sort: a handful of values
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runSplitOnce starts the stages, prefills a prompt and decodes greedily,
// returning the two rates.
func runSplitOnce(m *loader.Model, id [32]byte, ranges [][2]int, lc link.Config, enc wire.EncodingID, prompt, decode int) (splitRun, error) {
	local, err := stage.StartLocal(m.Weights, ranges, stage.Config{Identity: id, Link: lc, Timeout: time.Minute}, m.Codecs)
	if err != nil {
		return splitRun{}, err
	}
	defer local.Close()
	ctx := context.Background()
	chain, err := pipeline.Dial(ctx, local.Addrs, pipeline.Options{Identity: id, Config: m.Weights.Config, Encoding: enc,
		Codecs: codec.Digests(m.Codecs), Timeout: time.Minute, Link: lc})
	if err != nil {
		return splitRun{}, err
	}
	defer chain.Close()
	sess, err := chain.NewSession(ctx)
	if err != nil {
		return splitRun{}, err
	}
	cfg := m.Weights.Config
	prompt = min(prompt, cfg.SeqLen-decode-1)
	tokens := make([]int, prompt)
	for i := range tokens {
		tokens[i] = (i*7919 + 1) % cfg.VocabSize // a fixed, arbitrary prompt
	}
	// Greedy: the last stage answers with the next token id, not logits.
	t0 := time.Now()
	next, err := sess.ForwardArgmax(ctx, tokens, 0)
	if err != nil {
		return splitRun{}, err
	}
	pre := float64(prompt) / time.Since(t0).Seconds()
	t0 = time.Now()
	for i := 0; i < decode; i++ {
		if next, err = sess.ForwardArgmax(ctx, []int{next}, prompt+i); err != nil {
			return splitRun{}, err
		}
	}
	return splitRun{prefill: pre, decode: float64(decode) / time.Since(t0).Seconds()}, nil
}
