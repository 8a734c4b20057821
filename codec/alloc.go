package codec

import (
	"container/heap"
	"math"
)

// AllocateBits distributes budget bits over components with the given
// variances by reverse water-filling, and returns the bits of each (0..8).
//
// The distortion model is the high-rate one with c = 1: D_i(0) = var_i and
// D_i(b) = var_i * 4^-b. Every extra bit then removes three quarters of the
// component's remaining distortion, a gain of 0.75 * var_i * 4^-b for the
// bit that takes it from b to b+1. The gains of one component decrease with
// b, so the model is convex and the greedy rule (give the next bit to the
// component with the largest gain) is optimal. (c only changes the first bit's
// gain; the model stays convex only for c <= 16/7, and c = 1 keeps the gains
// exact binary multiples of the variance, so ties are exact.) Equal gains go
// to the lower index. Components whose variance is not positive and finite
// get no bits, and allocation stops early when every component with variance
// is full, so fewer than budget bits may be used.
func AllocateBits(variances []float64, budget int) []uint8 {
	bits := make([]uint8, len(variances))
	h := gainHeap{}
	for i, v := range variances {
		if v > 0 && !math.IsInf(v, 0) {
			h = append(h, gainItem{gain: 0.75 * v, index: i})
		}
	}
	heap.Init(&h)
	for used := 0; used < budget && len(h) > 0; used++ {
		top := &h[0]
		bits[top.index]++
		if bits[top.index] == MaxBits {
			heap.Pop(&h)
			continue
		}
		top.gain = math.Ldexp(top.gain, -2) // next bit removes a quarter as much
		heap.Fix(&h, 0)
	}
	return bits
}

type gainItem struct {
	gain  float64
	index int
}

// gainHeap is a max-heap on gain, lower index first among equal gains.
type gainHeap []gainItem

func (h gainHeap) Len() int { return len(h) }
func (h gainHeap) Less(a, b int) bool {
	if h[a].gain != h[b].gain {
		return h[a].gain > h[b].gain
	}
	return h[a].index < h[b].index
}
func (h gainHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *gainHeap) Push(x any)   { *h = append(*h, x.(gainItem)) }
func (h *gainHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
