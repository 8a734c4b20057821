package kernels

import "fmt"

// The summation order of every dot product in this package, whichever code
// runs it (pure Go, AVX2 or AVX-512), so that results are bit-identical across
// machines and instruction sets, not only across thread counts:
//
//  1. 32 lanes; lane i accumulates, in increasing j, round(a[j]*b[j]) for the
//     j < n&^31 with j%32 == i. Products are rounded before they are added,
//     never fused: Go has no float32 fused multiply-add (math.FMA rounds to
//     float64 first, and rounding twice differs), so the pure-Go code could
//     not match one. It costs the SIMD kernels nothing on f32, which is bound
//     by loads, and 7-16% on the quantized kernels when they run from cache.
//  2. Fold to 8 lanes: v[i] = (lane[i] + lane[i+8]) + (lane[i+16] + lane[i+24]).
//  3. Each remaining whole group of 8 (j < n&^7) adds its products to v.
//  4. s = ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)).
//  5. The last n%8 products are added to s one by one.
//
// Every accumulator starts at +0.

// Dot returns the dot product of a and b in the canonical order above.
// It panics when the lengths differ (a programming error).
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("kernels.Dot: lengths %d and %d differ", len(a), len(b)))
	}
	n8 := len(a) &^ 7
	s := dotF32Body(a[:n8], b[:n8])
	return addTail(s, a[n8:], b[n8:])
}

// addTail is step 5.
func addTail(s float32, a, b []float32) float32 {
	b = b[:len(a)]
	for i, v := range a {
		s += float32(v * b[i]) // the conversion forbids fusing into an FMA
	}
	return s
}

// dotGo runs steps 1-4 in pure Go for len(a) a multiple of 8.
func dotGo(a, b []float32) float32 {
	n32 := len(a) &^ 31
	b = b[:len(a)]
	var lane [32]float32
	// Lanes are independent, so each group of eight is accumulated in
	// registers over the whole row, then stored.
	for g := 0; g < 32; g += 8 {
		var s0, s1, s2, s3, s4, s5, s6, s7 float32
		for j := g; j < n32; j += 32 {
			x, y := a[j:j+8:j+8], b[j:j+8:j+8]
			s0 += float32(x[0] * y[0])
			s1 += float32(x[1] * y[1])
			s2 += float32(x[2] * y[2])
			s3 += float32(x[3] * y[3])
			s4 += float32(x[4] * y[4])
			s5 += float32(x[5] * y[5])
			s6 += float32(x[6] * y[6])
			s7 += float32(x[7] * y[7])
		}
		lane[g], lane[g+1], lane[g+2], lane[g+3] = s0, s1, s2, s3
		lane[g+4], lane[g+5], lane[g+6], lane[g+7] = s4, s5, s6, s7
	}
	var v [8]float32
	for i := range v {
		v[i] = (lane[i] + lane[i+8]) + (lane[i+16] + lane[i+24])
	}
	for j := n32; j < len(a); j += 8 {
		x, y := a[j:j+8:j+8], b[j:j+8:j+8]
		for i := range v {
			v[i] += float32(x[i] * y[i])
		}
	}
	return foldLanes8(&v)
}

// foldLanes8 is step 4.
func foldLanes8(v *[8]float32) float32 {
	return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]))
}

// foldLanes32 is steps 2 and 4 of the order on 32 lanes (no 8-wide phase).
func foldLanes32(acc *[32]float32) float32 {
	var v [8]float32
	for i := range v {
		v[i] = (acc[i] + acc[i+8]) + (acc[i+16] + acc[i+24])
	}
	return foldLanes8(&v)
}
