package codec

import (
	"math"
	"slices"
	"testing"
)

// Expected allocations are worked out by hand from the rule: each bit goes to
// the component whose next bit removes the most distortion, 0.75*var*4^-b
// (ordering by var*4^-b is the same), lower index first on ties.
func TestAllocateBitsHand(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name   string
		vars   []float64
		budget int
		want   []uint8
	}{
		// Gains: c0 16,4,1,1/4..; c1 4,1,1/4; c2 1,1/4; c3 1/4.
		// 16->c0; 4 vs 4 tie->c0; 4->c1; 1,1,1 tie->c0.
		{"ties to lower index", []float64{16, 4, 1, 0.25}, 4, []uint8{3, 1, 0, 0}},
		// then 1 (c1), 1 (c2).
		{"water level 1", []float64{16, 4, 1, 0.25}, 6, []uint8{3, 2, 1, 0}},
		// then 1/4 four ways -> c0.
		{"water level 1/4", []float64{16, 4, 1, 0.25}, 7, []uint8{4, 2, 1, 0}},
		// c0 gains 100, 25, 6.25, 1.5625 all beat c1's 1, then 0.39 < 1.
		{"dominant component", []float64{100, 1}, 4, []uint8{4, 0}},
		{"dominant component +1", []float64{100, 1}, 5, []uint8{4, 1}},
		{"equal variances", []float64{1, 1, 1}, 4, []uint8{2, 1, 1}},
		{"cap at 8 bits", []float64{1}, 20, []uint8{8}},
		{"cap then spill", []float64{1e12, 1}, 10, []uint8{8, 2}},
		{"no budget", []float64{3, 2}, 0, []uint8{0, 0}},
		{"invalid variances get nothing", []float64{0, 1, -1, nan, inf}, 3, []uint8{0, 3, 0, 0, 0}},
		{"unsorted input", []float64{1, 64}, 4, []uint8{1, 3}},
	}
	for _, tc := range cases {
		if got := AllocateBits(tc.vars, tc.budget); !slices.Equal(got, tc.want) {
			t.Errorf("%s: AllocateBits(%v, %d) = %v, want %v", tc.name, tc.vars, tc.budget, got, tc.want)
		}
	}
}

// TestAllocateBitsWaterFilling checks the closed form of reverse
// water-filling under the c=1 model on a geometric spectrum: with variances
// 4^-i, every bit of component i is worth exactly as much as bit b-1 of
// component i-1, so a budget of 1+2+...+m bits gives bits m, m-1, ..., 1.
func TestAllocateBitsWaterFilling(t *testing.T) {
	vars := make([]float64, 10)
	for i := range vars {
		vars[i] = math.Ldexp(1, -2*i)
	}
	// Budget 15 = 5+4+3+2+1: the gain thresholds fall on exact ties, which
	// go to lower indices, so the staircase is filled level by level.
	got := AllocateBits(vars, 15)
	want := []uint8{5, 4, 3, 2, 1, 0, 0, 0, 0, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("AllocateBits(4^-i, 15) = %v, want %v", got, want)
	}
}
