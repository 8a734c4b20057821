package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// TokenScalingOptions configure DecodeByToken.
type TokenScalingOptions struct {
	// Threads are the worker counts compared, the first the baseline: at
	// least two distinct counts, each at least 1.
	Threads []int
	// Positions is how many positions, from 0, every round decodes. 0
	// means 128; at most the model's context.
	Positions int
	// Rounds is how many passes over the positions are made; the first is
	// a warm-up and is not reported. 0 means 6; at least 2.
	Rounds int
	// Block is how many consecutive positions one count decodes before
	// the next count decodes the same ones: 0 means 1, token by token; at
	// most Positions. With a block of one, every token at more than one
	// thread follows a token at another count, and a change to what the
	// threads do between tokens can look better than in a continuous
	// decode (docs/performance.md, § Token by token, or in blocks); longer
	// blocks are closer to a continuous decode and still alternate.
	Block int
	// Bandwidth, when given, is the read bandwidth in GB/s at each count
	// of Threads; otherwise Meter measures it at each count before every
	// round, and without a Meter no share is reported.
	Bandwidth []float64
	Meter     func(threads int) (float64, error)
	// Progress, if set, receives a line per round.
	Progress io.Writer
}

// TokenScaling is DecodeByToken's result. JSON names are stable.
type TokenScaling struct {
	Mode      string `json:"mode"` // "decode, token by token" or "decode, blocks of N tokens"
	Threads   []int  `json:"threads"`
	Positions int    `json:"positions"`
	Block     int    `json:"block"`  // consecutive positions at one count
	Rounds    int    `json:"rounds"` // reported passes over the positions, the warm-up not among them
	// TokS[i] is the tokens decoded at Threads[i] over the time they took,
	// across the reported rounds.
	TokS []float64 `json:"tok_s"`
	// Ratio[i] is the baseline's total time over Threads[i]'s: the speed
	// at Threads[i] against the baseline's. RatioP10 and RatioP90 are the
	// 10th and 90th percentiles (nearest rank, as quantile) of the same
	// ratio taken per position (summed over the rounds), how much it varies.
	Ratio    []float64 `json:"ratio"`
	RatioP10 []float64 `json:"ratio_p10"`
	RatioP90 []float64 `json:"ratio_p90"`
	// GBs[i] is TokS[i] times the weight bytes a token streams.
	// BandwidthGBs[i] is the median over the reported rounds of the read
	// bandwidth at Threads[i], and Fraction[i] the median over them of
	// each round's weight stream over that round's bandwidth (0 when there
	// is no figure).
	GBs          []float64 `json:"gb_s"`
	BandwidthGBs []float64 `json:"bandwidth_gb_s"`
	Fraction     []float64 `json:"bandwidth_fraction"`
	// BandwidthRatio[i] is the median over the reported rounds of the read
	// bandwidth at Threads[i] over the baseline's in the same round (0
	// when there is no figure): what a decode bound by memory alone could
	// gain from the extra threads, beside Ratio.
	BandwidthRatio []float64 `json:"bandwidth_ratio"`
}

// DecodeByToken measures decode speed at several thread counts token by
// token, or block by block: every position (every block of opts.Block
// positions) is decoded at each count in turn, the cache rewound to its
// start between them, the order of the counts rotating from one block and
// round to the next, so that every block at one count has a neighbour in
// time at each other count: on a machine whose speed moves from minute to
// minute, a change moves both sides of a ratio alike, where alternating
// whole runs (MeasureScaling) leaves each round's two runs seconds apart.
// Before each block at more than one thread, the helpers are woken,
// untimed (wakeHelpers), as a continuous decode finds them. The thread
// count changes no bit of a token's logits (docs/kernels.md), and each
// count's logits are checked against the first's: a difference is an
// error.
func DecodeByToken(w *model.Weights, opts TokenScalingOptions) (TokenScaling, error) {
	if opts.Positions == 0 {
		opts.Positions = 128
	}
	if opts.Rounds == 0 {
		opts.Rounds = 6
	}
	if opts.Block == 0 {
		opts.Block = 1
	}
	if err := checkTokenScaling(w, opts); err != nil {
		return TokenScaling{}, err
	}
	m, s, err := wholeModel(w)
	if err != nil {
		return TokenScaling{}, err
	}
	defer s.Release()
	restore := setThreads(1)
	defer restore()
	n := len(opts.Threads)
	// secs[i][p] is count i's time at position p over the reported rounds;
	// roundSecs[r][i] and bws[r][i] its time in reported round r and the
	// read bandwidth it is compared with there.
	secs := make([][]float64, n)
	for i := range secs {
		secs[i] = make([]float64, opts.Positions)
	}
	var roundSecs, bws [][]float64
	b := &blockRun{m: m, s: s, opts: opts, secs: secs}
	b.init(&w.Config)
	for round := range opts.Rounds {
		bw, err := roundBandwidth(opts)
		if err != nil {
			return TokenScaling{}, fmt.Errorf("round %d: %w", round, err)
		}
		took := make([]float64, n)
		b.tokens[0] = 1
		for start := 0; start < opts.Positions; start += opts.Block {
			end := min(start+opts.Block, opts.Positions)
			first := (start/opts.Block + round) % n // the count that goes first
			for k := range n {
				if err := b.decode(round, (first+k)%n, first, start, end, took); err != nil {
					return TokenScaling{}, err
				}
			}
		}
		what := "timed"
		if round == 0 {
			what = "warm-up"
		} else {
			roundSecs, bws = append(roundSecs, took), append(bws, bw)
		}
		progress(opts.Progress, "round %d of %d (%s): %d positions at each of %v threads, %s", round, opts.Rounds, what, opts.Positions, opts.Threads, tokSList(opts, took))
	}
	return summarizeTokens(opts, secs, roundSecs, bws, float64(WeightBytes(w))), nil
}

// blockRun decodes DecodeByToken's blocks and keeps what the first count
// of a block found, for the others to be checked against.
type blockRun struct {
	m      *model.Model
	s      *model.State
	opts   TokenScalingOptions
	secs   [][]float64
	x      []float32
	logits []float32
	// first holds the first count's logits of the block's positions, one
	// row each, and tokens[p] the token decoded at position p (the
	// first count's choice at p-1).
	first  []float32
	tokens []int
}

func (b *blockRun) init(c *model.Config) {
	b.x, b.logits = make([]float32, c.Dim), make([]float32, c.VocabSize)
	b.first = make([]float32, b.opts.Block*c.VocabSize)
	b.tokens = make([]int, b.opts.Positions+1)
}

// decode times positions [start, end) at count i, each token alone, and
// adds them to took[i] and, after the warm-up round, to secs. Count
// firstCount decoded the block first: its logits are kept, and the other
// counts' checked against them.
func (b *blockRun) decode(round, i, firstCount, start, end int, took []float64) error {
	th := b.opts.Threads[i]
	kernels.SetThreads(th)
	wakeHelpers(th)
	vocab := len(b.logits)
	for pos := start; pos < end; pos++ {
		t0 := time.Now()
		if err := decodeOne(b.m, b.s, b.tokens[pos], pos, b.x, b.logits); err != nil {
			return fmt.Errorf("round %d, position %d, %d threads: %w", round, pos, th, err)
		}
		d := time.Since(t0).Seconds()
		took[i] += d
		if round > 0 {
			b.secs[i][pos] += d
		}
		row := b.first[(pos-start)*vocab : (pos-start+1)*vocab]
		if i == firstCount {
			copy(row, b.logits)
			b.tokens[pos+1] = argmax(b.logits)
		} else if j := firstDifference(row, b.logits); j >= 0 {
			return fmt.Errorf("position %d: logit %d is %v at %d threads and %v at %d threads; the thread count must not change a bit",
				pos, j, b.logits[j], th, row[j], b.opts.Threads[firstCount])
		}
	}
	return nil
}

// roundBandwidth is the read bandwidth at each count for one round: the
// figures given, or the meter's just before the round, or zeros.
func roundBandwidth(opts TokenScalingOptions) ([]float64, error) {
	bw := make([]float64, len(opts.Threads))
	if opts.Bandwidth != nil {
		copy(bw, opts.Bandwidth)
		return bw, nil
	}
	if opts.Meter == nil {
		return bw, nil
	}
	for i, th := range opts.Threads {
		var err error
		if bw[i], err = opts.Meter(th); err != nil {
			return nil, fmt.Errorf("read bandwidth at %d threads: %w", th, err)
		}
	}
	return bw, nil
}

// tokSList is a round's speed at each count, for the progress line.
func tokSList(opts TokenScalingOptions, took []float64) string {
	parts := make([]string, len(took))
	for i, t := range took {
		parts[i] = fmt.Sprintf("%.1f tok/s at %d", float64(opts.Positions)/t, opts.Threads[i])
	}
	return strings.Join(parts, ", ")
}

// wakeHelpers runs an untimed, empty parallel region on threads
// goroutines whose items each wait, up to 10 ms, until all of them have
// entered, and reports whether they all did. A token at one thread leaves
// the kernels' helpers parked (they poll for work only briefly), and a
// token timed at more threads right after it would first wait for them to
// wake, which no token of a continuous decode does: in a throwaway test on
// 2026-12-04, a q4_0 token on two threads decoded 4.8 % faster with its
// helpers woken first, a q8_0 one 2.7 %.
func wakeHelpers(threads int) bool {
	if threads < 2 {
		return true
	}
	var arrived atomic.Int32
	deadline := time.Now().Add(10 * time.Millisecond)
	kernels.Parallel(threads, threads, func(_, _ int) {
		arrived.Add(1)
		for arrived.Load() < int32(threads) && time.Now().Before(deadline) {
		}
	})
	return arrived.Load() == int32(threads)
}

// decodeOne runs token tok at position pos through the whole model.
func decodeOne(m *model.Model, s *model.State, tok, pos int, x, logits []float32) error {
	if err := m.Embed(tok, x); err != nil {
		return err
	}
	if err := m.Layers(s, x, pos); err != nil {
		return err
	}
	return m.Head(x, logits)
}

// firstDifference is the first index where a and b differ in bits, or -1.
func firstDifference(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func checkTokenScaling(w *model.Weights, opts TokenScalingOptions) error {
	if err := checkScaling(ScalingOptions{Threads: opts.Threads, Rounds: opts.Rounds, Bandwidth: opts.Bandwidth}); err != nil {
		return err
	}
	if opts.Positions < 1 || opts.Positions > w.Config.SeqLen {
		return fmt.Errorf("positions %d: want 1 to the context, %d", opts.Positions, w.Config.SeqLen)
	}
	if opts.Block < 1 || opts.Block > opts.Positions {
		return fmt.Errorf("block %d: want 1 to the positions, %d", opts.Block, opts.Positions)
	}
	// The first count's logits of a block are kept to check the others'.
	if keep, err := tensor.MulSize(opts.Block, w.Config.VocabSize); err != nil || keep > maxBlockLogits {
		return fmt.Errorf("block %d: %d positions of a %d-token vocabulary's logits would be kept, at most %d values", opts.Block, opts.Block, w.Config.VocabSize, maxBlockLogits)
	}
	return nil
}

// maxBlockLogits bounds the logits DecodeByToken keeps for a block (64 MiB
// of float32): 524 positions of a 32000-token vocabulary, 110 of Qwen's.
const maxBlockLogits = 16 << 20

func summarizeTokens(opts TokenScalingOptions, secs, roundSecs, bws [][]float64, weightBytes float64) TokenScaling {
	res := TokenScaling{Mode: "decode, token by token", Threads: slices.Clone(opts.Threads), Positions: opts.Positions, Block: opts.Block, Rounds: opts.Rounds - 1}
	if opts.Block > 1 {
		res.Mode = fmt.Sprintf("decode, blocks of %d tokens", opts.Block)
	}
	tokens := float64(opts.Positions * (opts.Rounds - 1))
	totals := make([]float64, len(secs))
	for i, perPos := range secs {
		for _, s := range perPos {
			totals[i] += s
		}
	}
	for i := range opts.Threads {
		tokS := tokens / totals[i]
		ratios := make([]float64, opts.Positions)
		for p := range ratios {
			ratios[p] = secs[0][p] / secs[i][p]
		}
		res.TokS = append(res.TokS, tokS)
		res.Ratio = append(res.Ratio, totals[0]/totals[i])
		res.RatioP10 = append(res.RatioP10, quantile(ratios, 0.1))
		res.RatioP90 = append(res.RatioP90, quantile(ratios, 0.9))
		res.GBs = append(res.GBs, tokS*weightBytes/1e9)
		// The share, round by round against that round's reading.
		bw, frac, bwRatio := make([]float64, len(bws)), make([]float64, len(bws)), make([]float64, len(bws))
		for r := range bws {
			bw[r] = bws[r][i]
			if bw[r] > 0 {
				frac[r] = float64(opts.Positions) / roundSecs[r][i] * weightBytes / 1e9 / bw[r]
				bwRatio[r] = bw[r] / bws[r][0]
			}
		}
		res.BandwidthGBs = append(res.BandwidthGBs, median(bw))
		res.Fraction = append(res.Fraction, median(frac))
		res.BandwidthRatio = append(res.BandwidthRatio, median(bwRatio))
	}
	return res
}

// String is a table: a row per thread count.
func (s TokenScaling) String() string {
	var b strings.Builder
	each := "every position"
	if s.Block > 1 {
		each = fmt.Sprintf("every block of %d positions", s.Block)
	}
	fmt.Fprintf(&b, "%s: %d positions x %d rounds after a warm-up round, %s at each count in turn\n", s.Mode, s.Positions, s.Rounds, each)
	fmt.Fprintf(&b, "%-8s %-10s %-30s %-28s %s\n", "threads", "tok/s", fmt.Sprintf("vs %d threads (positions 10-90%%)", s.Threads[0]),
		"weights GB/s, share of read", fmt.Sprintf("read bandwidth vs %d", s.Threads[0]))
	for i, th := range s.Threads {
		share, bwRatio := fmt.Sprintf("%.1f GB/s", s.GBs[i]), "-"
		if s.BandwidthGBs[i] > 0 {
			share += fmt.Sprintf(", %.0f%% of %.1f", 100*s.Fraction[i], s.BandwidthGBs[i])
			bwRatio = fmt.Sprintf("%.2fx", s.BandwidthRatio[i])
		}
		fmt.Fprintf(&b, "%-8d %-10.2f %-30s %-28s %s\n", th, s.TokS[i], fmt.Sprintf("%.3fx (%.3f-%.3f)", s.Ratio[i], s.RatioP10[i], s.RatioP90[i]), share, bwRatio)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
