package sample

import (
	"math"
	"testing"
)

func TestGreedyTakesFirstMaximum(t *testing.T) {
	s, err := New(0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Sample([]float32{1, 5, 3, 5}); got != 1 {
		t.Fatalf("greedy picked %d, want 1", got)
	}
}

func TestBadParameters(t *testing.T) {
	for _, c := range [][2]float64{{-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {1, 0}, {1, 1.5}, {1, math.NaN()}} {
		if _, err := New(c[0], c[1], 1); err == nil {
			t.Errorf("New(%v, %v) accepted", c[0], c[1])
		}
	}
}

// With logits log(0.5), log(0.3), log(0.2) at temperature 1 the draw
// frequencies must approach 0.5/0.3/0.2; top-p 0.6 keeps only the first two,
// renormalised to 0.625/0.375.
func TestDistribution(t *testing.T) {
	logits := []float32{float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.2))}
	for _, tc := range []struct {
		topP float64
		want []float64
	}{{1, []float64{0.5, 0.3, 0.2}}, {0.6, []float64{0.625, 0.375, 0}}} {
		s, _ := New(1, tc.topP, 42)
		const n = 200000
		var counts [3]int
		for range n {
			counts[s.Sample(logits)]++
		}
		for i, w := range tc.want {
			got := float64(counts[i]) / n
			// Binomial standard deviation at n=200000 is at most 0.0012; allow 5 sigma.
			if math.Abs(got-w) > 0.006 {
				t.Errorf("top-p %v: token %d frequency %.4f, want %.4f", tc.topP, i, got, w)
			}
		}
	}
}

func TestSeedRepeats(t *testing.T) {
	logits := []float32{0.1, 0.2, 0.3, 0.4, 0.5}
	a, _ := New(0.8, 0.9, 7)
	b, _ := New(0.8, 0.9, 7)
	for i := range 100 {
		if x, y := a.Sample(logits), b.Sample(logits); x != y {
			t.Fatalf("draw %d differs: %d vs %d", i, x, y)
		}
	}
}
