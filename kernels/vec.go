package kernels

import (
	"fmt"
	"math"
	"unsafe"
)

// Per-token vector helpers. Like the dot products they use only IEEE
// operations whose rounding Go fixes (products are converted explicitly so no
// compiler may fuse them into an FMA), so their results are the same bits on
// every machine. math.Exp is avoided for the same reason: on amd64 it takes a
// different code path with and without FMA hardware.

// RMSNorm sets out[i] = weight[i] * (x[i] / sqrt(mean(x²) + eps)), the
// llama RMSNorm. out may alias x. It panics when the lengths differ.
func RMSNorm(out, x, weight []float32, eps float32) {
	if len(out) != len(x) || len(weight) != len(x) || len(x) == 0 {
		panic(fmt.Sprintf("kernels.RMSNorm: lengths out %d, x %d, weight %d", len(out), len(x), len(weight)))
	}
	ss := Dot(x, x)/float32(len(x)) + eps
	inv := float32(1 / math.Sqrt(float64(ss)))
	for i, v := range x {
		out[i] = weight[i] * float32(inv*v)
	}
}

// Softmax replaces x by exp(x - max x) / sum, summing in index order. A
// NaN makes every value NaN.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	// Not the builtin max: its care for NaN and for -0 < +0 made Softmax of
	// 256 values take 1.37 µs against 0.87 (Zen 5, 2026-12-04). The
	// results are the same bits: a comparison finds the same maximum
	// otherwise, a NaN anywhere makes the sum NaN and so every value, and a
	// maximum of -0 rather than +0 changes no x - m that Exp sees (both
	// give ±0, and Exp(±0) = 1).
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	for i, v := range x {
		x[i] = v - m
	}
	for i := expSIMD(x, x, false); i < len(x); i++ {
		x[i] = Exp(x[i])
	}
	var sum float32
	for _, e := range x {
		sum += e
	}
	inv := 1 / sum
	for i := range x {
		x[i] *= inv
	}
}

// Axpy sets y[i] += a*x[i], the product rounded before the sum. It panics
// when the lengths differ.
func Axpy(y []float32, a float32, x []float32) {
	if len(y) != len(x) {
		panic(fmt.Sprintf("kernels.Axpy: lengths %d and %d differ", len(y), len(x)))
	}
	for i := axpySIMD(y, a, x); i < len(x); i++ {
		y[i] += float32(a * x[i])
	}
}

// SwiGLU sets gate[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)),
// the llama feed-forward activation. It panics when the lengths differ.
func SwiGLU(gate, up []float32) {
	if len(gate) != len(up) {
		panic(fmt.Sprintf("kernels.SwiGLU: lengths %d and %d differ", len(gate), len(up)))
	}
	done := swigluSIMD(gate, up)
	var e [256]float32 // Exp(-g) for a chunk of gate
	for lo := done; lo < len(gate); lo += len(e) {
		g := gate[lo:min(lo+len(e), len(gate))]
		for i := expSIMD(e[:len(g)], g, true); i < len(g); i++ {
			e[i] = Exp(-g[i])
		}
		u := up[lo : lo+len(g)]
		for i, v := range g {
			g[i] = v / (1 + e[i]) * u[i]
		}
	}
}

// Exp returns e^x rounded to float32, computed the same way on every
// platform: in float64, x = k*ln2 + r with |r| <= ln2/2, then a degree-13
// Taylor polynomial for e^r (truncation error below 2^-57 relative, more
// than float32 needs), then scaling by 2^k. The float64 result is within a
// few ulps (of 2^-52) of e^x, so the float32 rounding is correct except
// within about 2^-50 of a midpoint.
func Exp(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 89: // e^89 > MaxFloat32
		return float32(math.Inf(1))
	case x < -104: // e^-104 is below half the smallest float32 subnormal
		return 0
	}
	const (
		log2e = 1.4426950408889634
		// ln 2 split so that k*ln2Hi is exact for |k| < 2^20.
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
	)
	xd := float64(x)
	k := math.Round(xd * log2e)
	r := (xd - float64(k*ln2Hi)) - float64(k*ln2Lo)
	// Horner on 1 + r + r²/2! + ... + r^13/13!, every product rounded.
	p := 1.0 / 6227020800
	for _, c := range expCoeffs {
		p = float64(p*r) + c
	}
	// k is within [-151, 129], so 2^k is a normal float64 and p*2^k is
	// exact, as math.Ldexp would give it, without its general-case cost.
	return float32(p * math.Float64frombits(uint64(int64(k)+1023)<<52))
}

// expCoeffs are 1/12!, 1/11!, ..., 1/1!, 1/0!.
var expCoeffs = [...]float64{
	1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
	1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1, 1,
}

// DotRows sets out[r] = Dot(x, m[r*stride : r*stride+len(x)]) for every r <
// len(out): the dot products of x with rows of a matrix whose rows start
// stride values apart (attention scores against a KV cache), the same bits
// as that many calls of Dot. It panics when m is too short.
func DotRows(out, x, m []float32, stride int) {
	if len(out) > 0 && (stride < len(x) || len(m) < (len(out)-1)*stride+len(x)) {
		panic(fmt.Sprintf("kernels.DotRows: %d rows of %d at stride %d do not fit in %d values", len(out), len(x), stride, len(m)))
	}
	if dotRowsSIMD(out, x, m, stride) {
		return
	}
	for r := range out {
		out[r] = Dot(x, m[r*stride:r*stride+len(x)])
	}
}

// AxpyRows does Axpy(y, a[r], m[r*stride : r*stride+len(y)]) for r = 0, 1,
// ... len(a)-1 in that order (attention's weighted sum of values): the same
// bits as those calls. It panics when m is too short.
func AxpyRows(y, a, m []float32, stride int) {
	if len(a) > 0 && (stride < len(y) || len(m) < (len(a)-1)*stride+len(y)) {
		panic(fmt.Sprintf("kernels.AxpyRows: %d rows of %d at stride %d do not fit in %d values", len(a), len(y), stride, len(m)))
	}
	if axpyRowsSIMD(y, a, m, stride) {
		return
	}
	for r, v := range a {
		Axpy(y, v, m[r*stride:r*stride+len(y)])
	}
}

// WidenF16 sets dst[i] to the f16 value src[i] for i < len(dst), exactly
// (every finite value and infinity; a NaN stays a NaN), with SIMD where the
// CPU has it: an f16 KV cache is widened this way on every attention step.
func WidenF16(dst []float32, src []uint16) {
	if len(dst) == 0 {
		return
	}
	src = src[:len(dst)]
	i := widenHalves(dst, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), 2*len(src)), false)
	for ; i < len(dst); i++ {
		dst[i] = f16ToF32(src[i])
	}
}

// Prefetch asks for v's memory to be brought into the caches ahead of its
// use, without waiting for it: for short runs that the hardware
// prefetchers do not see coming, such as a KV cache's blocks of one head.
// It changes no value.
func Prefetch[T float32 | uint16](v []T) {
	if len(v) > 0 {
		prefetch(unsafe.Pointer(&v[0]), len(v)*int(unsafe.Sizeof(v[0])))
	}
}
