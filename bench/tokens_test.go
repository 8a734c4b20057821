package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
)

// DecodeByToken times every position at each count, reports the passes
// after the warm-up, compares against the figures given, and puts the
// thread count back.
func TestDecodeByToken(t *testing.T) {
	m, err := loader.Open(tinyGGUF(t), loader.Options{NoTokenizer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	before := kernels.Threads()
	var logs strings.Builder
	res, err := DecodeByToken(m.Weights, TokenScalingOptions{Threads: []int{1, 2}, Positions: 20, Rounds: 3, Bandwidth: []float64{30, 60}, Progress: &logs})
	if err != nil {
		t.Fatal(err)
	}
	if kernels.Threads() != before {
		t.Errorf("threads %d after the run, %d before", kernels.Threads(), before)
	}
	if res.Mode != "decode, token by token" || res.Positions != 20 || res.Rounds != 2 || len(res.Threads) != 2 || res.Threads[1] != 2 {
		t.Errorf("%+v", res)
	}
	for i := range 2 {
		if !(res.TokS[i] > 0) || !(res.Ratio[i] > 0) || !(res.RatioP10[i] <= res.RatioP90[i]) || !(res.Fraction[i] > 0) {
			t.Errorf("count %d: tok/s %v ratio %v (%v-%v) share %v", i, res.TokS[i], res.Ratio[i], res.RatioP10[i], res.RatioP90[i], res.Fraction[i])
		}
	}
	if res.Ratio[0] != 1 || res.RatioP10[0] != 1 || res.RatioP90[0] != 1 {
		t.Errorf("the baseline against itself: %v (%v-%v)", res.Ratio[0], res.RatioP10[0], res.RatioP90[0])
	}
	// The share is the median of the rounds' weight streams over the
	// figure given: between the slowest and the fastest round's.
	if res.BandwidthGBs[0] != 30 || res.BandwidthGBs[1] != 60 {
		t.Errorf("bandwidth %v, want the figures given", res.BandwidthGBs)
	}
	if res.BandwidthRatio[0] != 1 || res.BandwidthRatio[1] != 2 {
		t.Errorf("bandwidth ratio %v, want 1 and 60/30 = 2", res.BandwidthRatio)
	}
	if !strings.Contains(res.String(), "read bandwidth vs 1") || !strings.Contains(res.String(), "2.00x\n") && !strings.HasSuffix(res.String(), "2.00x") {
		t.Errorf("table without the bandwidth ratio:\n%s", res)
	}
	lo, hi := math.Inf(1), 0.0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n")[1:] {
		var r, of, positions, th1, th2 int
		var s1, s2 float64
		if _, err := fmt.Sscanf(line, "round %d of %d (timed): %d positions at each of [1 2] threads, %f tok/s at %d, %f tok/s at %d", &r, &of, &positions, &s1, &th1, &s2, &th2); err != nil {
			t.Fatalf("progress line %q: %v", line, err)
		}
		lo, hi = min(lo, s2), max(hi, s2)
	}
	bytes := float64(WeightBytes(m.Weights))
	if f := res.Fraction[1]; !(f >= lo*bytes/1e9/60*0.999 && f <= hi*bytes/1e9/60*1.001) {
		t.Errorf("share at 2 threads %v, want between %v and %v", f, lo*bytes/1e9/60, hi*bytes/1e9/60)
	}
	if n := strings.Count(logs.String(), "round "); n != 3 {
		t.Errorf("%d progress lines, want one per round (3):\n%s", n, logs.String())
	}
	if !strings.Contains(res.String(), "vs 1 threads (positions 10-90%)") {
		t.Errorf("table:\n%s", res)
	}
	// Without figures, the meter reads each count before every round, and
	// the bandwidth reported is the median of the reported rounds'.
	var calls []int
	metered, err := DecodeByToken(m.Weights, TokenScalingOptions{Threads: []int{1, 2}, Positions: 4, Rounds: 4,
		Meter: func(th int) (float64, error) { calls = append(calls, th); return float64(10*len(calls) + th), nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, []int{1, 2, 1, 2, 1, 2, 1, 2}) {
		t.Errorf("meter called for %v, want each count before each of 4 rounds", calls)
	}
	// Readings 11, 22 (warm-up), 31, 42, 51, 62, 71, 82: medians 51 and 62.
	// Ratios per round: 22/11, 42/31, 62/51, 82/71; the reported rounds'
	// median is that of 42/31, 62/51 and 82/71, which is 62/51.
	if want := 62.0 / 51; math.Abs(metered.BandwidthRatio[1]-want) > 1e-12 {
		t.Errorf("metered bandwidth ratio %v, want %v", metered.BandwidthRatio[1], want)
	}
	if metered.BandwidthGBs[0] != 51 || metered.BandwidthGBs[1] != 62 || !(metered.Fraction[1] > 0) {
		t.Errorf("metered bandwidth %v, share %v, want 51 and 62", metered.BandwidthGBs, metered.Fraction)
	}
	for _, c := range []struct {
		opts TokenScalingOptions
		want string
	}{
		{TokenScalingOptions{Threads: []int{1}}, "want at least two counts"},
		{TokenScalingOptions{Threads: []int{2, 2}}, "2 is given twice"},
		{TokenScalingOptions{Threads: []int{1, 2}, Rounds: 1}, "rounds 1: want at least 2"},
		{TokenScalingOptions{Threads: []int{1, 2}, Positions: 65}, "positions 65: want 1 to the context, 64"},
		{TokenScalingOptions{Threads: []int{1, 2}, Bandwidth: []float64{30}}, "want one figure per thread count"},
		{TokenScalingOptions{Threads: []int{1, 2}, Positions: 8, Block: 9}, "block 9: want 1 to the positions, 8"},
		{TokenScalingOptions{Threads: []int{1, 2}, Positions: 8, Block: -1}, "block -1: want 1 to the positions, 8"},
	} {
		if _, err := DecodeByToken(m.Weights, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opts, err, c.want)
		}
	}
}

// With a block, each count decodes that many positions in a row (the last
// block shorter), every position is still timed at every count, and the
// result says so.
func TestDecodeByTokenBlocks(t *testing.T) {
	m, err := loader.Open(tinyGGUF(t), loader.Options{NoTokenizer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	res, err := DecodeByToken(m.Weights, TokenScalingOptions{Threads: []int{1, 2}, Positions: 12, Rounds: 3, Block: 5, Bandwidth: []float64{30, 60}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "decode, blocks of 5 tokens" || res.Block != 5 || res.Positions != 12 || res.Rounds != 2 {
		t.Errorf("%+v", res)
	}
	for i := range 2 {
		if !(res.TokS[i] > 0) || !(res.RatioP10[i] > 0) || !(res.RatioP10[i] <= res.RatioP90[i]) {
			t.Errorf("count %d: tok/s %v ratio %v (%v-%v): a position went untimed", i, res.TokS[i], res.Ratio[i], res.RatioP10[i], res.RatioP90[i])
		}
	}
	if !strings.Contains(res.String(), "every block of 5 positions at each count in turn") {
		t.Errorf("table:\n%s", res)
	}
	one, err := DecodeByToken(m.Weights, TokenScalingOptions{Threads: []int{1, 2}, Positions: 4, Rounds: 2, Bandwidth: []float64{30, 60}})
	if err != nil {
		t.Fatal(err)
	}
	if one.Mode != "decode, token by token" || one.Block != 1 {
		t.Errorf("no block given: mode %q, block %d, want token by token and 1", one.Mode, one.Block)
	}
	// The first count's logits of a block are kept: their size is capped.
	wide := &model.Weights{Config: model.Config{SeqLen: 4096, VocabSize: 1 << 20}}
	err = checkTokenScaling(wide, TokenScalingOptions{Threads: []int{1, 2}, Rounds: 2, Positions: 64, Block: 64})
	if err == nil || !strings.Contains(err.Error(), "block 64: 64 positions of a 1048576-token vocabulary's logits would be kept, at most 16777216 values") {
		t.Errorf("a block of 64 positions of a million logits: %v", err)
	}
	if err := checkTokenScaling(wide, TokenScalingOptions{Threads: []int{1, 2}, Rounds: 2, Positions: 64, Block: 16}); err != nil {
		t.Errorf("16 positions of a million logits, 64 MiB: %v", err)
	}
}

// firstDifference compares bits: -0 is not +0, and two NaNs with
// different payloads differ.
func TestFirstDifference(t *testing.T) {
	negZero, nan1, nan2 := float32(math.Copysign(0, -1)), math.Float32frombits(0x7fc00001), math.Float32frombits(0x7fc00002)
	for _, c := range []struct {
		a, b []float32
		want int
	}{
		{[]float32{1, 2, 3}, []float32{1, 2, 3}, -1},
		{[]float32{1, 2, 3}, []float32{1, 2, 4}, 2},
		{[]float32{0, 1}, []float32{negZero, 1}, 0},
		{[]float32{1, nan1}, []float32{1, nan1}, -1},
		{[]float32{1, nan1}, []float32{1, nan2}, 1},
	} {
		if got := firstDifference(c.a, c.b); got != c.want {
			t.Errorf("%v against %v: %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// wakeHelpers returns once every goroutine of the count entered its
// region, helpers parked or not.
func TestWakeHelpers(t *testing.T) {
	defer kernels.SetThreads(0)
	for _, th := range []int{1, 2, 3} {
		kernels.SetThreads(th)
		for range 3 {
			if !wakeHelpers(th) {
				t.Fatalf("%d threads: not every goroutine entered the region within 10 ms", th)
			}
		}
	}
}
