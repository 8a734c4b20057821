package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
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

// refNucleus is the nucleus draw as it was before candidates: every token
// sorted (sort.SliceStable).
func refNucleus(p []float64, topP, u01 float64) int {
	order := make([]int, len(p))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]] > p[order[b]] })
	var mass float64
	n := 0
	for n < len(order) {
		mass += p[order[n]]
		n++
		if mass >= topP {
			break
		}
	}
	u := u01 * mass
	var cdf float64
	for _, id := range order[:n] {
		cdf += p[id]
		if u < cdf {
			return id
		}
	}
	return order[n-1]
}

// The nucleus draw over candidates only picks exactly the token a sort of
// every token picks, for vocabularies from 1 to 32000 tokens, flat and
// peaked logits, ties, and top-p from 0.01 (below 1/n as well) to 0.999.
func TestNucleusMatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{1, 2, 3, 7, 100, 1000, 32000} {
		for _, topP := range []float64{0.01, 0.1, 0.5, 0.9, 0.95, 0.999} {
			for _, spread := range []float64{0.01, 1, 8} {
				logits := make([]float32, n)
				for i := range logits {
					logits[i] = float32(rng.NormFloat64() * spread)
					if i%5 == 3 { // ties
						logits[i] = logits[i-1]
					}
				}
				s, _ := New(0.8, topP, uint64(n))
				ref := rand.New(rand.NewPCG(uint64(n), 0x5ea35ea3))
				for draw := range 20 {
					p := slices.Clone(s.softmax(logits))
					want := refNucleus(p, topP, ref.Float64())
					if got := s.nucleus(p); got != want {
						t.Fatalf("n %d, top-p %v, spread %v, draw %d: %d, the full sort's %d", n, topP, spread, draw, got, want)
					}
				}
			}
		}
	}
}

func BenchmarkSampleTopP(b *testing.B) {
	for _, spread := range []float64{0.3, 3} {
		logits := make([]float32, 32000)
		rng := rand.New(rand.NewPCG(1, 1))
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * spread)
		}
		b.Run(fmt.Sprintf("spread=%v", spread), func(b *testing.B) {
			s, _ := New(1, 0.9, 1)
			for b.Loop() {
				s.Sample(logits)
			}
		})
	}
}
