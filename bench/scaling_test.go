package bench

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// A scripted workload: the speeds, the call order and the bandwidth each
// call was handed are all known, so every figure of the result can be
// checked by hand.
func TestMeasureScaling(t *testing.T) {
	// speed[round][threads]; round 0 is absurd, so that counting it would
	// show in every median.
	speed := []map[int]float64{
		{1: 1, 2: 1000, 4: 1},
		{1: 100, 2: 150, 4: 180},
		{1: 80, 2: 160, 4: 100},
		{1: 120, 2: 180, 4: 300},
	}
	var calls []string
	round := 0
	run := func(threads int, bw float64) (Speed, error) {
		calls = append(calls, fmt.Sprintf("r%d:%d@%g", round, threads, bw))
		s := Speed{Mode: "decode", TokS: speed[round][threads], GBs: speed[round][threads] / 10, BandwidthGBs: float64(10 * threads)}
		if len(calls)%3 == 0 {
			round++
		}
		return s, nil
	}
	var log strings.Builder
	res, err := MeasureScaling(run, ScalingOptions{Threads: []int{1, 2, 4}, Rounds: 4, Progress: &log})
	if err != nil {
		t.Fatal(err)
	}
	// Forward in even rounds, backward in odd ones; the bandwidth is
	// measured (0 handed over) only in the warm-up round.
	wantCalls := []string{"r0:1@0", "r0:2@0", "r0:4@0", "r1:4@40", "r1:2@20", "r1:1@10", "r2:1@10", "r2:2@20", "r2:4@40", "r3:4@40", "r3:2@20", "r3:1@10"}
	if !reflect.DeepEqual(calls, wantCalls) {
		t.Errorf("calls %v, want %v", calls, wantCalls)
	}
	if want := [][]float64{{100, 150, 180}, {80, 160, 100}, {120, 180, 300}}; !reflect.DeepEqual(res.TokS, want) {
		t.Errorf("rounds %v, want %v (the warm-up dropped)", res.TokS, want)
	}
	check := func(name string, got, want []float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s %v, want %v", name, got, want)
		}
		for i := range want {
			if d := got[i] - want[i]; d > 1e-12 || d < -1e-12 {
				t.Errorf("%s %v, want %v", name, got, want)
				return
			}
		}
	}
	check("median", res.Median, []float64{100, 160, 180})
	check("min", res.Min, []float64{80, 150, 100})
	check("max", res.Max, []float64{120, 180, 300})
	// Per-round ratios: 2 threads 1.5, 2.0, 1.5; 4 threads 1.8, 1.25, 2.5.
	check("ratio", res.Ratio, []float64{1, 1.5, 1.8})
	check("ratio min", res.RatioMin, []float64{1, 1.5, 1.25})
	check("ratio max", res.RatioMax, []float64{1, 2, 2.5})
	check("GB/s", res.GBs, []float64{10, 16, 18})
	check("bandwidth", res.BandwidthGBs, []float64{10, 20, 40})
	check("fraction", res.Fraction, []float64{1, 0.8, 0.45})
	check("bandwidth ratio", res.BandwidthRatio, []float64{1, 2, 4})
	if res.Mode != "decode" {
		t.Errorf("mode %q", res.Mode)
	}
	if n := strings.Count(log.String(), "\n"); n != 12 {
		t.Errorf("%d progress lines, want one per run (12):\n%s", n, log.String())
	}
	table := res.String()
	for _, want := range []string{"3 rounds after a warm-up round", "1.50x (1.50-2.00)", "16.0 GB/s, 80% of 20.0"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// A given bandwidth is handed to every run, the warm-up's included.
func TestMeasureScalingGivenBandwidth(t *testing.T) {
	var got []float64
	run := func(threads int, bw float64) (Speed, error) {
		got = append(got, bw)
		return Speed{TokS: 1, BandwidthGBs: bw}, nil
	}
	res, err := MeasureScaling(run, ScalingOptions{Threads: []int{1, 2}, Rounds: 2, Bandwidth: []float64{30, 55}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{30, 55, 55, 30}; !reflect.DeepEqual(got, want) {
		t.Errorf("bandwidths handed %v, want %v", got, want)
	}
	if !reflect.DeepEqual(res.BandwidthGBs, []float64{30, 55}) {
		t.Errorf("reported %v", res.BandwidthGBs)
	}
}

// A meter measures before every run; each run's share is against its own
// measurement, and a given bandwidth overrides the meter.
func TestMeasureScalingMeter(t *testing.T) {
	var calls []string
	bw := 0.0
	meter := func(threads int) (float64, error) {
		bw += 10
		calls = append(calls, fmt.Sprintf("meter:%d=%g", threads, bw))
		return bw, nil
	}
	run := func(threads int, given float64) (Speed, error) {
		calls = append(calls, fmt.Sprintf("run:%d@%g", threads, given))
		return Speed{TokS: 1, GBs: 5, BandwidthGBs: given}, nil
	}
	res, err := MeasureScaling(run, ScalingOptions{Threads: []int{1, 2}, Rounds: 3, Meter: meter})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"meter:1=10", "run:1@10", "meter:2=20", "run:2@20", "meter:2=30", "run:2@30", "meter:1=40", "run:1@40",
		"meter:1=50", "run:1@50", "meter:2=60", "run:2@60"}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
	// Count 1 ran against 40 and 50 after the warm-up, count 2 against 30
	// and 60: medians 45 and 45; shares 5/40, 5/50 and 5/30, 5/60.
	if !reflect.DeepEqual(res.BandwidthGBs, []float64{45, 45}) {
		t.Errorf("bandwidth %v, want [45 45]", res.BandwidthGBs)
	}
	// Bandwidth ratios in the same round, 30/40 and 60/50: median 0.975.
	if r := res.BandwidthRatio; r[0] != 1 || math.Abs(r[1]-0.975) > 1e-15 {
		t.Errorf("bandwidth ratios %v, want [1 0.975]", r)
	}
	if f := res.Fraction; math.Abs(f[0]-(5.0/40+5.0/50)/2) > 1e-15 || math.Abs(f[1]-(5.0/30+5.0/60)/2) > 1e-15 {
		t.Errorf("fractions %v", f)
	}
	calls = nil
	if _, err := MeasureScaling(run, ScalingOptions{Threads: []int{1, 2}, Rounds: 2, Meter: meter, Bandwidth: []float64{7, 8}}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"run:1@7", "run:2@8", "run:2@8", "run:1@7"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("with a given bandwidth: calls %v, want %v", calls, want)
	}
	failing := func(int) (float64, error) { return 0, errors.New("no memory") }
	if _, err := MeasureScaling(run, ScalingOptions{Threads: []int{1, 2}, Meter: failing}); err == nil || !strings.Contains(err.Error(), "round 0, 1 threads: no memory") {
		t.Errorf("failing meter: %v", err)
	}
}

func TestMeasureScalingRefusals(t *testing.T) {
	ok := func(threads int, bw float64) (Speed, error) { return Speed{TokS: 1, BandwidthGBs: 1}, nil }
	for _, c := range []struct {
		opts ScalingOptions
		run  RunAt
		want string
	}{
		{ScalingOptions{Threads: []int{1, 2}, Rounds: 1}, ok, "rounds 1: want at least 2"},
		{ScalingOptions{Threads: []int{2}}, ok, "want at least two counts"},
		{ScalingOptions{Threads: []int{1, 0}}, ok, "count 2 is 0, want at least 1"},
		{ScalingOptions{Threads: []int{2, 1, 2}}, ok, "2 is given twice"},
		{ScalingOptions{Threads: []int{1, 2}, Bandwidth: []float64{30}}, ok, "want one figure per thread count (2)"},
		{ScalingOptions{Threads: []int{1, 2}, Bandwidth: []float64{30, math.NaN()}}, ok, "want positive GB/s figures"},
		{ScalingOptions{Threads: []int{1, 2}, Bandwidth: []float64{30, -1}}, ok, "want positive GB/s figures"},
		{ScalingOptions{Threads: []int{1, 2}}, func(threads int, bw float64) (Speed, error) {
			if threads == 2 {
				return Speed{}, errors.New("boom")
			}
			return Speed{TokS: 1, BandwidthGBs: 1}, nil
		}, "round 0, 2 threads: boom"},
		{ScalingOptions{Threads: []int{1, 2}}, func(int, float64) (Speed, error) { return Speed{BandwidthGBs: 1}, nil }, "round 0, 1 threads: a speed of 0 tok/s"},
		{ScalingOptions{Threads: []int{1, 2}}, func(int, float64) (Speed, error) { return Speed{TokS: 1}, nil }, "against a bandwidth of 0 GB/s"},
	} {
		if _, err := MeasureScaling(c.run, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.opts, err, c.want)
		}
	}
}
