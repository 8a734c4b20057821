// Package bench holds Seam's measurements that are commands rather than
// `go test -bench` functions: split inference over emulated links, opening
// a stage's range of a container, and writing synthetic GGUF files for
// import benchmarks. Each follows the project's rule for speed claims: an
// A/B measured in one run, warm-up discarded, order alternated.
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// Link is one emulated network: bandwidth and one-way latency.
type Link struct {
	Mbps      float64
	LatencyMs float64
}

func (l Link) String() string { return fmt.Sprintf("%g Mbit/s, %g ms", l.Mbps, l.LatencyMs) }

// Config is the link emulation for this link.
func (l Link) Config() link.Config {
	return link.Config{RateMbps: l.Mbps, Latency: time.Duration(l.LatencyMs * float64(time.Millisecond))}
}

// ParseLinks reads MBPS@LATENCYms,... such as 1000@1ms,100@10ms.
func ParseLinks(s string) ([]Link, error) {
	var out []Link
	for _, part := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(part, "@")
		mbps, err1 := strconv.ParseFloat(a, 64)
		lat, err2 := strconv.ParseFloat(strings.TrimSuffix(b, "ms"), 64)
		if !ok || err1 != nil || err2 != nil || !(mbps > 0) || !(lat >= 0) {
			return nil, fmt.Errorf("--links %q: want MBPS@LATENCYms,... such as 1000@1ms,100@10ms,20@30ms", part)
		}
		out = append(out, Link{mbps, lat})
	}
	return out, nil
}

// SplitOptions configure Split.
type SplitOptions struct {
	Stages       int // in-process stages, even layer ranges
	Encodings    []wire.EncodingID
	Links        []Link
	PromptTokens int // prefill length (clamped to fit the context with the decode steps)
	DecodeTokens int // greedy decode steps
	Rounds       int // measured rounds, after one warm-up round
	Logger       *slog.Logger
	// Progress, when set, is told after each run how many of the runs
	// (links x encodings x rounds, warm-up included) are done.
	Progress func(done, total int)
}

// SplitRow is one link and encoding's medians.
type SplitRow struct {
	Link         Link
	Encoding     wire.EncodingID
	FrameBytes   int     // one decode step's frame across the first boundary: header plus payload
	PrefillTokS  float64 // median prefill tok/s
	DecodeTokS   float64 // median decode tok/s
	PromptTokens int
	DecodeTokens int
}

// Split starts the stages in this process on loopback, with every
// connection's sending side limited to each link, and measures prefill and
// decode tok/s per encoding. Each round runs every encoding once, in an
// order that alternates between rounds; round 0 warms up and is discarded;
// the rows hold the medians of the others.
func Split(ctx context.Context, m *loader.Model, o SplitOptions) ([]SplitRow, error) {
	if o.Rounds < 1 || o.PromptTokens < 1 || o.DecodeTokens < 1 {
		return nil, fmt.Errorf("--rounds %d, --prompt-tokens %d, --decode-tokens %d: each must be at least 1", o.Rounds, o.PromptTokens, o.DecodeTokens)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	id, err := m.Identity()
	if err != nil {
		return nil, err
	}
	ranges, err := stage.EvenRanges(m.Weights.Config.NLayers, o.Stages)
	if err != nil {
		return nil, err
	}
	if o.PromptTokens+o.DecodeTokens >= m.Weights.Config.SeqLen {
		return nil, fmt.Errorf("--prompt-tokens %d plus --decode-tokens %d do not fit the context of %d", o.PromptTokens, o.DecodeTokens, m.Weights.Config.SeqLen)
	}
	var rows []SplitRow
	done, total := 0, len(o.Links)*len(o.Encodings)*(o.Rounds+1)
	for _, l := range o.Links {
		res := map[wire.EncodingID][]splitRun{}
		for round := 0; round <= o.Rounds; round++ {
			order := slices.Clone(o.Encodings)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, enc := range order {
				r, err := splitOnce(ctx, m, id, ranges, l.Config(), enc, o.PromptTokens, o.DecodeTokens)
				if err != nil {
					return nil, err
				}
				o.Logger.Info("bench split", "session", 0, "stage", "bench", "link", l.String(), "wire", enc.String(), "round", round, "of", o.Rounds, "warmup", round == 0,
					"prefill_tok_s", r.prefill, "decode_tok_s", r.decode)
				if round > 0 {
					res[enc] = append(res[enc], r)
				}
				if done++; o.Progress != nil {
					o.Progress(done, total)
				}
			}
		}
		for _, enc := range o.Encodings {
			size, err := decodeFrameBytes(m, enc, ranges)
			if err != nil {
				return nil, err
			}
			var pre, dec []float64
			for _, r := range res[enc] {
				pre, dec = append(pre, r.prefill), append(dec, r.decode)
			}
			rows = append(rows, SplitRow{Link: l, Encoding: enc, FrameBytes: size, PrefillTokS: Median(pre), DecodeTokS: Median(dec),
				PromptTokens: o.PromptTokens, DecodeTokens: o.DecodeTokens})
		}
	}
	return rows, nil
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
		if c.Variable() { // entropy-coded: the fit's measured mean one-token stream
			return int(math.Ceil(c.MeanPayloadBytes())) + wire.HeaderSize, nil
		}
		e = codec.NewWire(c)
	} else {
		var err error
		if e, err = wire.Default.Lookup(enc, 0); err != nil {
			return 0, err
		}
	}
	size, err := e.PayloadSize(1, m.Weights.Config.Dim)
	return size + wire.HeaderSize, err
}

// Median of v (0 for none).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// splitOnce starts the stages, prefills a prompt and decodes greedily,
// returning the two rates.
func splitOnce(ctx context.Context, m *loader.Model, id [32]byte, ranges [][2]int, lc link.Config, enc wire.EncodingID, prompt, decode int) (splitRun, error) {
	quiet := slog.New(slog.DiscardHandler)
	local, err := stage.StartLocal(m.Weights, ranges, stage.Config{Identity: id, Link: lc, Timeout: time.Minute, Logger: quiet}, m.Codecs)
	if err != nil {
		return splitRun{}, err
	}
	defer local.Close()
	chain, err := pipeline.Dial(ctx, local.Addrs, pipeline.Options{Identity: id, Config: m.Weights.Config, Encoding: enc,
		Codecs: codec.Digests(m.Codecs), Timeout: time.Minute, Link: lc, Logger: quiet})
	if err != nil {
		return splitRun{}, err
	}
	defer chain.Close()
	sess, err := chain.NewSession(ctx)
	if err != nil {
		return splitRun{}, err
	}
	cfg := m.Weights.Config
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
