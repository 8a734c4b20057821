package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// ScalingOptions configure MeasureScaling.
type ScalingOptions struct {
	// Threads are the worker counts compared, the first the baseline of
	// the ratios: at least two distinct counts, each at least 1.
	Threads []int
	// Rounds is how many times every count runs; the first round is a
	// warm-up and is not reported. 0 means 6; at least 2.
	Rounds int
	// Bandwidth, when given, is the read bandwidth in GB/s at each count
	// of Threads, instead of measuring it.
	Bandwidth []float64
	// Meter, when set (and Bandwidth is not), measures the read bandwidth
	// with a thread count just before every run at that count, so that
	// each run's share of the bandwidth is against the machine of that
	// moment. Otherwise the warm-up round's runs measure it (Decode and
	// Prefill do when handed 0) and later runs reuse their figure.
	Meter func(threads int) (float64, error)
	// Progress, if set, receives a line per measurement.
	Progress io.Writer
}

// Scaling is how the speed of one workload changes with the thread count,
// measured as an A/B in one process: every round runs every count once,
// in the given order in even rounds and reversed in odd ones, so that a
// machine that slows down or speeds up during the run (other load, a
// neighbour on a virtual machine) shifts both sides of a round alike.
// JSON names are stable.
type Scaling struct {
	Mode    string `json:"mode"` // the workload's Speed.Mode
	Threads []int  `json:"threads"`
	// TokS[r][i] is the tok/s at Threads[i] in reported round r (the
	// warm-up round is not among them).
	TokS [][]float64 `json:"tok_s"`
	// Median, Min and Max are over the reported rounds, per count.
	Median []float64 `json:"median_tok_s"`
	Min    []float64 `json:"min_tok_s"`
	Max    []float64 `json:"max_tok_s"`
	// Ratio[i] is the median over rounds of TokS[r][i] / TokS[r][0]: each
	// round's speed against the baseline's in the same round. RatioMin and
	// RatioMax are that ratio's extremes.
	Ratio    []float64 `json:"ratio"`
	RatioMin []float64 `json:"ratio_min"`
	RatioMax []float64 `json:"ratio_max"`
	// GBs[i] is the median over rounds of the weights streamed per second
	// at Threads[i] (Speed.GBs), BandwidthGBs[i] the median read bandwidth
	// with that many threads (see ScalingOptions: given, measured before
	// every run, or once in the warm-up round), and Fraction[i] the median
	// over rounds of each run's GB/s over the bandwidth it was compared with.
	GBs          []float64 `json:"gb_s"`
	BandwidthGBs []float64 `json:"bandwidth_gb_s"`
	Fraction     []float64 `json:"bandwidth_fraction"`
	// BandwidthRatio[i] is the median over rounds of the read bandwidth at
	// Threads[i] over the baseline's in the same round: what a workload
	// bound by memory bandwidth alone could gain from the extra threads.
	BandwidthRatio []float64 `json:"bandwidth_ratio"`
	gbs, bws       [][]float64
}

// RunAt runs a workload once at a thread count; bandwidthGBs, when > 0, is
// the read bandwidth to report rather than measure.
type RunAt func(threads int, bandwidthGBs float64) (Speed, error)

// MeasureScaling runs the workload opts.Rounds times at each of
// opts.Threads, alternating the order, and returns the speeds of every
// round but the first with their medians and per-round ratios. The read
// bandwidth each run is compared with is opts.Bandwidth's, or opts.Meter's
// just before the run, or else what the count's run in round 0 measured.
func MeasureScaling(run RunAt, opts ScalingOptions) (Scaling, error) {
	if opts.Rounds == 0 {
		opts.Rounds = 6
	}
	if err := checkScaling(opts); err != nil {
		return Scaling{}, err
	}
	n := len(opts.Threads)
	res := Scaling{Threads: slices.Clone(opts.Threads)}
	known := make([]float64, n) // the bandwidth handed to the next run at each count
	copy(known, opts.Bandwidth)
	for r := range opts.Rounds {
		speeds, gbs, bws := make([]float64, n), make([]float64, n), make([]float64, n)
		for _, i := range roundOrder(n, r) {
			th := opts.Threads[i]
			if opts.Meter != nil && opts.Bandwidth == nil {
				bw, err := opts.Meter(th)
				if err != nil {
					return Scaling{}, fmt.Errorf("round %d, %d threads: %w", r, th, err)
				}
				known[i] = bw
			}
			s, err := run(th, known[i])
			if err != nil {
				return Scaling{}, fmt.Errorf("round %d, %d threads: %w", r, th, err)
			}
			if !(s.TokS > 0) || !(s.BandwidthGBs > 0) {
				return Scaling{}, fmt.Errorf("round %d, %d threads: a speed of %g tok/s against a bandwidth of %g GB/s", r, th, s.TokS, s.BandwidthGBs)
			}
			res.Mode = s.Mode
			known[i] = s.BandwidthGBs
			speeds[i], gbs[i], bws[i] = s.TokS, s.GBs, s.BandwidthGBs
			what := "warm-up"
			if r > 0 {
				what = "timed"
			}
			progress(opts.Progress, "round %d (%s), %d threads: %.2f tok/s, %.1f GB/s of weights, read bandwidth %.1f GB/s", r, what, th, s.TokS, s.GBs, s.BandwidthGBs)
		}
		if r > 0 {
			res.TokS, res.gbs, res.bws = append(res.TokS, speeds), append(res.gbs, gbs), append(res.bws, bws)
		}
	}
	res.summarize()
	return res, nil
}

func checkScaling(opts ScalingOptions) error {
	if opts.Rounds < 2 {
		return fmt.Errorf("rounds %d: want at least 2 (the first is a warm-up)", opts.Rounds)
	}
	if len(opts.Threads) < 2 {
		return fmt.Errorf("threads %v: want at least two counts to compare", opts.Threads)
	}
	for i, th := range opts.Threads {
		if th < 1 {
			return fmt.Errorf("threads %v: count %d is %d, want at least 1", opts.Threads, i+1, th)
		}
		if slices.Contains(opts.Threads[:i], th) {
			return fmt.Errorf("threads %v: %d is given twice", opts.Threads, th)
		}
	}
	if len(opts.Bandwidth) > 0 && len(opts.Bandwidth) != len(opts.Threads) {
		return fmt.Errorf("bandwidth %v: want one figure per thread count (%d)", opts.Bandwidth, len(opts.Threads))
	}
	for _, bw := range opts.Bandwidth {
		if !(bw > 0) || math.IsInf(bw, 0) {
			return fmt.Errorf("bandwidth %v: want positive GB/s figures", opts.Bandwidth)
		}
	}
	return nil
}

// roundOrder is the order of the counts' runs in round r: forward in even
// rounds, backward in odd ones.
func roundOrder(n, r int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if r%2 == 1 {
			order[i] = n - 1 - i
		}
	}
	return order
}

func (s *Scaling) summarize() {
	for i := range s.Threads {
		rounds := len(s.TokS)
		speeds, ratios := make([]float64, rounds), make([]float64, rounds)
		gbs, bws, fracs, bwRatios := make([]float64, rounds), make([]float64, rounds), make([]float64, rounds), make([]float64, rounds)
		for r, round := range s.TokS {
			speeds[r], ratios[r] = round[i], round[i]/round[0]
			gbs[r], bws[r] = s.gbs[r][i], s.bws[r][i]
			fracs[r], bwRatios[r] = gbs[r]/bws[r], bws[r]/s.bws[r][0]
		}
		s.Median = append(s.Median, median(speeds))
		s.Min = append(s.Min, slices.Min(speeds))
		s.Max = append(s.Max, slices.Max(speeds))
		s.Ratio = append(s.Ratio, median(ratios))
		s.RatioMin = append(s.RatioMin, slices.Min(ratios))
		s.RatioMax = append(s.RatioMax, slices.Max(ratios))
		s.GBs = append(s.GBs, median(gbs))
		s.BandwidthGBs = append(s.BandwidthGBs, median(bws))
		s.Fraction = append(s.Fraction, median(fracs))
		s.BandwidthRatio = append(s.BandwidthRatio, median(bwRatios))
	}
}

// String is a table: a row per thread count.
func (s Scaling) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d rounds after a warm-up round, order alternated\n", s.Mode, len(s.TokS))
	fmt.Fprintf(&b, "%-8s %-12s %-18s %-22s %-28s %s\n", "threads", "median tok/s", "min-max tok/s", fmt.Sprintf("vs %d threads (min-max)", s.Threads[0]),
		"weights GB/s, share of read", "read bandwidth vs "+fmt.Sprint(s.Threads[0]))
	for i, th := range s.Threads {
		share := fmt.Sprintf("%.1f GB/s, %.0f%% of %.1f", s.GBs[i], 100*s.Fraction[i], s.BandwidthGBs[i])
		fmt.Fprintf(&b, "%-8d %-12.2f %-18s %-22s %-28s %.2fx\n", th, s.Median[i],
			fmt.Sprintf("%.2f-%.2f", s.Min[i], s.Max[i]),
			fmt.Sprintf("%.2fx (%.2f-%.2f)", s.Ratio[i], s.RatioMin[i], s.RatioMax[i]), share, s.BandwidthRatio[i])
	}
	return strings.TrimSuffix(b.String(), "\n")
}
