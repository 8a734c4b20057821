//go:build amd64 && !purego

package kernels

import (
	"os"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/seamlm/seam/tensor"
)

// Every kernel widens f16 scales with VCVTPH2PS, hence F16C. The AVX-512
// integer-dot kernels also need VNNI (VPDPBUSD); without it they use the
// AVX2 ones (see intLevel).
var (
	hasAVX2   = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasF16C
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL
	hasVNNI   = hasAVX512 && cpu.X86.HasAVX512VNNI
)

// maxLevel is the best level this process may run: the CPU's, capped by
// SEAM_SIMD. Tests cover every level up to it, so SEAM_SIMD=avx2 makes an
// AVX-512 machine behave, tests included, as one without AVX-512.
var maxLevel = capLevel(func() int {
	switch {
	case hasAVX512:
		return simdAVX512
	case hasAVX2:
		return simdAVX2
	}
	return simdNone
}(), os.Getenv(SIMDEnv))

// simdLevel is the level in use; tests lower it to compare the paths.
var simdLevel = maxLevel

// Each kernel returns steps 1-4 of the canonical dot product (see dot.go):
// the f32/f16/bf16 ones over n values, n a multiple of 8; the quantized ones
// over nblocks whole blocks of 32 (Q8_0, Q4_0) or 256 (Q4_K, Q6_K) values.
// Pointers may have any alignment.

//go:noescape
func dotF32AVX2(a unsafe.Pointer, b *float32, n int) float32

//go:noescape
func dotF16AVX2(a unsafe.Pointer, b *float32, n int) float32

//go:noescape
func dotBF16AVX2(a unsafe.Pointer, b *float32, n int) float32

//go:noescape
func dotQ80AVX2(row unsafe.Pointer, x *float32, nblocks int) float32

//go:noescape
func dotQ40AVX2(row unsafe.Pointer, x *float32, nblocks int) float32

//go:noescape
func dotQ4KAVX2(row unsafe.Pointer, x *float32, nblocks int) float32

//go:noescape
func dotQ6KAVX2(row unsafe.Pointer, x *float32, nblocks int) float32

//go:noescape
func dotF32AVX512(a unsafe.Pointer, b *float32, n int) float32

//go:noescape
func dotF16AVX512(a unsafe.Pointer, b *float32, n int) float32

//go:noescape
func dotBF16AVX512(a unsafe.Pointer, b *float32, n int) float32

//go:noescape
func dotQ80AVX512(row unsafe.Pointer, x *float32, nblocks int) float32

//go:noescape
func dotQ40AVX512(row unsafe.Pointer, x *float32, nblocks int) float32

//go:noescape
func dotQ4KAVX512(row unsafe.Pointer, x *float32, nblocks int) float32

//go:noescape
func dotQ6KAVX512(row unsafe.Pointer, x *float32, nblocks int) float32

//go:noescape
func dotQ8GAVX2(row, scales unsafe.Pointer, x *float32, ngroups, steps int) float32

//go:noescape
func dotQ8GAVX512(row, scales unsafe.Pointer, x *float32, ngroups, steps int) float32

// q8gFusedOK reports whether rows of w can use the fused Q8G kernel: groups
// of a whole number of 32-value steps that never straddle two rows.
func q8gFusedOK(w *tensor.Tensor) bool {
	return simdLevel != simdNone && w.GroupSize%32 == 0 && w.Cols%w.GroupSize == 0
}

// dotQ8GFused is steps 1-4 over row r of a tensor accepted by q8gFusedOK.
func dotQ8GFused(w *tensor.Tensor, row []byte, r int, x []float32) float32 {
	gs := w.GroupSize
	g0 := r * (w.Cols / gs)
	ng := w.Cols / gs
	scales := w.Scales[4*g0 : 4*(g0+ng)]
	f := dotQ8GAVX2
	if simdLevel >= simdAVX512 {
		f = dotQ8GAVX512
	}
	return f(unsafe.Pointer(&row[0]), unsafe.Pointer(&scales[0]), &x[0], ng, gs/32)
}

//go:noescape
func scaleI8AVX2(dst *float32, src unsafe.Pointer, n int, s float32)

//go:noescape
func axpyAVX2(y *float32, a float32, x *float32, n int)

// axpySIMD does y[i] += round(a*x[i]) for the first len(y)&^7 values and
// returns how many (0 without SIMD): the same operations as Axpy's loop.
func axpySIMD(y []float32, a float32, x []float32) int {
	n8 := len(y) &^ 7
	if n8 == 0 || simdLevel < simdAVX2 {
		return 0
	}
	_ = x[n8-1]
	axpyAVX2(&y[0], a, &x[0], n8)
	return n8
}

//go:noescape
func cvtF16AVX2(dst *float32, src unsafe.Pointer, n int)

//go:noescape
func cvtBF16AVX2(dst *float32, src unsafe.Pointer, n int)

// widenHalves converts the first len(dst)&^7 f16 (or bf16) values of src
// to dst with SIMD and returns how many it did (0 without SIMD). VCVTPH2PS
// widens every finite value and infinity exactly, as f16ToF32 does; a NaN
// stays a NaN.
func widenHalves(dst []float32, src []byte, bf16 bool) int {
	n8 := len(dst) &^ 7
	if n8 == 0 || simdLevel < simdAVX2 {
		return 0
	}
	_ = src[2*n8-1]
	if bf16 {
		cvtBF16AVX2(&dst[0], unsafe.Pointer(&src[0]), n8)
	} else {
		cvtF16AVX2(&dst[0], unsafe.Pointer(&src[0]), n8)
	}
	return n8
}

// scaleI8 sets dst[i] = float32(int8(src[i])) * s.
func scaleI8(dst []float32, src []byte, s float32) {
	src = src[:len(dst)]
	n8 := len(dst) &^ 7
	if n8 > 0 && simdLevel >= simdAVX2 {
		scaleI8AVX2(&dst[0], unsafe.Pointer(&src[0]), n8, s)
		dst, src = dst[n8:], src[n8:]
	}
	scaleI8Go(dst, src, s)
}

type asmKernel func(p unsafe.Pointer, x *float32, n int) float32

// simdRow is a SIMD row kernel: steps 1-4 over the first len(x)&^7 values of
// an encoded row (all of them for the block types). perValue says whether fn
// counts values or blocks of block values.
type simdRow struct {
	fn       asmKernel
	perValue bool
	block    int
}

// kernelSet holds one level's row kernels, indexed by dtype (Q8G has its own
// entry point, dotQ8GFused).
type kernelSet [tensor.Q8G + 1]simdRow

func newKernelSet(f32, f16, bf16, q80, q40, q4k, q6k asmKernel) *kernelSet {
	return &kernelSet{
		tensor.F32:  {fn: f32, perValue: true},
		tensor.F16:  {fn: f16, perValue: true},
		tensor.BF16: {fn: bf16, perValue: true},
		tensor.Q8_0: {fn: q80, block: 32},
		tensor.Q4_0: {fn: q40, block: 32},
		tensor.Q4_K: {fn: q4k, block: kBlockN},
		tensor.Q6_K: {fn: q6k, block: kBlockN},
	}
}

var kernelSets = [...]*kernelSet{
	simdAVX2:   newKernelSet(dotF32AVX2, dotF16AVX2, dotBF16AVX2, dotQ80AVX2, dotQ40AVX2, dotQ4KAVX2, dotQ6KAVX2),
	simdAVX512: newKernelSet(dotF32AVX512, dotF16AVX512, dotBF16AVX512, dotQ80AVX512, dotQ40AVX512, dotQ4KAVX512, dotQ6KAVX512),
}

// dotF32Body runs steps 1-4 of the canonical order for len(a) == len(b), a
// multiple of 8.
func dotF32Body(a, b []float32) float32 {
	if len(a) == 0 || simdLevel == simdNone {
		return dotGo(a, b)
	}
	_ = b[len(a)-1]
	return kernelSets[simdLevel][tensor.F32].fn(unsafe.Pointer(&a[0]), &b[0], len(a))
}

func (k simdRow) ok() bool { return k.fn != nil }

func (k simdRow) dot(row []byte, x []float32) float32 {
	n := len(x) &^ 7
	if !k.perValue {
		n = len(x) / k.block
	}
	if n == 0 {
		return 0
	}
	return k.fn(unsafe.Pointer(&row[0]), &x[0], n)
}

// simdRowKernel returns the current level's kernel for t; its fn is nil when
// there is none.
func simdRowKernel(t tensor.DType) simdRow {
	if simdLevel == simdNone || int(t) >= len(kernelSet{}) {
		return simdRow{}
	}
	return kernelSets[simdLevel][t]
}

//go:noescape
func expAVX2(dst, src *float32, n int, negate bool)

//go:noescape
func expAVX512(dst, src *float32, n int, negate bool)

// expSIMD sets dst[i] = Exp(src[i]) (of -src[i] with negate) for the first
// len(dst)&^3 values and returns how many (0 without SIMD).
func expSIMD(dst, src []float32, negate bool) int {
	if simdLevel >= simdAVX512 && len(dst) >= 8 {
		n8 := len(dst) &^ 7
		_ = src[n8-1]
		expAVX512(&dst[0], &src[0], n8, negate)
		return n8 + expSIMDAVX2(dst[n8:], src[n8:len(dst)], negate)
	}
	return expSIMDAVX2(dst, src, negate)
}

//go:noescape
func swigluAVX512(gate, up *float32, n int)

//go:noescape
func swigluAVX2(gate, up *float32, n int)

// swigluSIMD does SwiGLU's arithmetic on the first values of gate, a
// multiple of 8 of them with AVX-512 or of 4 with AVX2, and returns how
// many (0 without SIMD): the same operations as SwiGLU's loop, so the same
// bits.
func swigluSIMD(gate, up []float32) int {
	_ = up[:len(gate)]
	switch {
	case simdLevel >= simdAVX512 && len(gate) >= 8:
		n8 := len(gate) &^ 7
		swigluAVX512(&gate[0], &up[0], n8)
		return n8 + swigluSIMD(gate[n8:], up[n8:len(gate)])
	case simdLevel >= simdAVX2 && len(gate) >= 4:
		n4 := len(gate) &^ 3
		swigluAVX2(&gate[0], &up[0], n4)
		return n4
	}
	return 0
}

func expSIMDAVX2(dst, src []float32, negate bool) int {
	n4 := len(dst) &^ 3
	if n4 == 0 || simdLevel < simdAVX2 {
		return 0
	}
	_ = src[n4-1]
	expAVX2(&dst[0], &src[0], n4, negate)
	return n4
}

//go:noescape
func f32RowsAVX512(w unsafe.Pointer, stride, rows int, x *float32, n int, out *float32)

//go:noescape
func f32RowsAVX2(w unsafe.Pointer, stride, rows int, x *float32, n int, out *float32)

// f32RowsSIMD sets out[r-r0] to the dot product of row r of the f32 tensor
// w with x for r in [r0, r1), reporting false (and doing nothing) when
// there is no SIMD or len(x) is not a multiple of 8 (the tail would need
// step 5 of the canonical order).
func f32RowsSIMD(w *tensor.Tensor, r0, r1 int, x, out []float32) bool {
	if simdLevel == simdNone || len(x)%8 != 0 || r0 >= r1 {
		return false
	}
	rb := w.RowBytes()
	_ = w.Data[r1*rb-1]
	_ = out[r1-r0-1]
	p := unsafe.Pointer(&w.Data[r0*rb])
	if simdLevel >= simdAVX512 {
		f32RowsAVX512(p, rb, r1-r0, &x[0], len(x), &out[0])
	} else {
		f32RowsAVX2(p, rb, r1-r0, &x[0], len(x), &out[0])
	}
	return true
}

//go:noescape
func axpyRowsAVX2(y *float32, n int, a *float32, x *float32, stride, rows int)

//go:noescape
func axpyRowsAVX512(y *float32, n int, a *float32, x *float32, stride, rows int)

// dotRowsSIMD is DotRows with the f32 row kernels, reporting false when
// there are none or len(x) is not a multiple of 8.
func dotRowsSIMD(out, x, m []float32, stride int) bool {
	if simdLevel == simdNone || len(x)%8 != 0 || len(x) == 0 || len(out) == 0 {
		return false
	}
	_ = m[(len(out)-1)*stride+len(x)-1]
	p := unsafe.Pointer(&m[0])
	if simdLevel >= simdAVX512 {
		f32RowsAVX512(p, 4*stride, len(out), &x[0], len(x), &out[0])
	} else {
		f32RowsAVX2(p, 4*stride, len(out), &x[0], len(x), &out[0])
	}
	return true
}

// axpyRowsSIMD is AxpyRows in AVX2 or AVX-512, reporting false when
// len(y) is not a multiple of 8.
func axpyRowsSIMD(y, a, m []float32, stride int) bool {
	if simdLevel == simdNone || len(y)%8 != 0 || len(y) == 0 || len(a) == 0 {
		return false
	}
	_ = m[(len(a)-1)*stride+len(y)-1]
	if simdLevel >= simdAVX512 {
		axpyRowsAVX512(&y[0], len(y), &a[0], &m[0], 4*stride, len(a))
	} else {
		axpyRowsAVX2(&y[0], len(y), &a[0], &m[0], 4*stride, len(a))
	}
	return true
}

//go:noescape
func rotatePairsAVX2(v, cos, sin *float32, n int)

//go:noescape
func rotateHalvesAVX2(a, b, cos, sin *float32, n int)

// rotatePairsSIMD turns the first pairs of RotatePairs, a multiple of 8 of
// them, and returns how many (0 without SIMD).
func rotatePairsSIMD(v, cos, sin []float32) int {
	n := len(cos) &^ 7
	if simdLevel < simdAVX2 || n == 0 {
		return 0
	}
	_, _ = v[2*n-1], sin[n-1]
	rotatePairsAVX2(&v[0], &cos[0], &sin[0], n)
	return n
}

// rotateHalvesSIMD is rotatePairsSIMD for RotateHalves.
func rotateHalvesSIMD(a, b, cos, sin []float32) int {
	n := len(cos) &^ 7
	if simdLevel < simdAVX2 || n == 0 {
		return 0
	}
	_, _, _ = a[n-1], b[n-1], sin[n-1]
	rotateHalvesAVX2(&a[0], &b[0], &cos[0], &sin[0], n)
	return n
}
