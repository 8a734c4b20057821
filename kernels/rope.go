package kernels

import "fmt"

// Rotary position embedding: pairs of values turned by angles whose
// cosines and sines a caller has tabulated. Each new value is a difference
// or sum of two float32 products, each product rounded before the sum (no
// fused multiply-add), so that every platform and level computes the same
// bits.

// RotatePairs turns the len(cos) pairs (v[2k], v[2k+1]) of v, side by side,
// by the angles whose cosines and sines are cos[k] and sin[k]:
//
//	v[2k], v[2k+1] = x*cos[k] - y*sin[k], x*sin[k] + y*cos[k]
//
// for x, y = v[2k], v[2k+1]. It panics when len(sin) != len(cos) or v holds
// fewer than 2*len(cos) values.
func RotatePairs(v, cos, sin []float32) {
	if len(sin) != len(cos) || len(v) < 2*len(cos) {
		panic(fmt.Sprintf("kernels.RotatePairs: %d values for %d cosines and %d sines", len(v), len(cos), len(sin)))
	}
	for k := rotatePairsSIMD(v, cos, sin); k < len(cos); k++ {
		v[2*k], v[2*k+1] = turn(v[2*k], v[2*k+1], cos[k], sin[k])
	}
}

// RotateHalves turns the len(cos) pairs (a[k], b[k]) as RotatePairs turns
// (v[2k], v[2k+1]); a and b must not overlap. It panics when len(sin) !=
// len(cos) or a or b is shorter than cos.
func RotateHalves(a, b, cos, sin []float32) {
	if len(sin) != len(cos) || len(a) < len(cos) || len(b) < len(cos) {
		panic(fmt.Sprintf("kernels.RotateHalves: %d and %d values for %d cosines and %d sines", len(a), len(b), len(cos), len(sin)))
	}
	for k := rotateHalvesSIMD(a, b, cos, sin); k < len(cos); k++ {
		a[k], b[k] = turn(a[k], b[k], cos[k], sin[k])
	}
}

// turn is one pair's rotation. The conversions round each product, which
// keeps the compiler from fusing them into FMAs on architectures that have
// them.
func turn(x, y, c, s float32) (float32, float32) {
	return float32(x*c) - float32(y*s), float32(x*s) + float32(y*c)
}
