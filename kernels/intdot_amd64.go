//go:build amd64 && !purego

package kernels

import (
	"unsafe"

	"github.com/seamlm/seam/tensor"
)

// Integer-dot row kernels (see intdot.go for the order they all compute).
// Each sets out[r] for rows r = 0 .. rows-1 starting at w, stride bytes
// apart, against the activation vector x describes.

//go:noescape
func q80RowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

//go:noescape
func q40RowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

//go:noescape
func q4kRowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

//go:noescape
func q6kRowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

//go:noescape
func q8gRowsAVX2(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

//go:noescape
func q80RowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

//go:noescape
func q40RowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

//go:noescape
func q4kRowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

//go:noescape
func q6kRowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

//go:noescape
func q8gRowsVNNI(w unsafe.Pointer, stride, rows int, x *actView, out *float32)

// intLevel is the SIMD level the integer kernels run at: the AVX-512 ones
// need VNNI (VPDPBUSD); without it they use the AVX2 ones.
func intLevel() int {
	if simdLevel >= simdAVX512 && !hasVNNI {
		return simdAVX2
	}
	return simdLevel
}

// intRowsSIMD sets out[r-r0] for rows [r0, r1) of w against vector t of a
// with the current level's kernel. It reports false when there is none.
func intRowsSIMD(w *tensor.Tensor, r0, r1 int, a *actQ, t int, out []float32) bool {
	lvl := intLevel()
	if lvl == simdNone || r0 >= r1 {
		return false
	}
	q, d, bs := a.vec(t)
	v := actView{q: &q[0], d: &d[0], bs: &bs[0], nb: a.nb, ls: &a.lanes(t)[0]}
	rb := w.RowBytes()
	if w.Type == tensor.Q8G {
		ng := w.Cols / w.GroupSize
		v.sc, v.scRow, v.spg = &w.Scales[4*r0*ng], 4*ng, w.GroupSize/qBlock
		v.gidx = &groupIndex(a.nb, v.spg)[0]
	}
	p, n, o := unsafe.Pointer(&w.Data[r0*rb]), r1-r0, &out[0]
	_ = out[n-1]
	avx512 := lvl == simdAVX512
	switch w.Type {
	case tensor.Q8_0:
		if avx512 {
			q80RowsVNNI(p, rb, n, &v, o)
		} else {
			q80RowsAVX2(p, rb, n, &v, o)
		}
	case tensor.Q4_0:
		if avx512 {
			q40RowsVNNI(p, rb, n, &v, o)
		} else {
			q40RowsAVX2(p, rb, n, &v, o)
		}
	case tensor.Q4_K:
		if avx512 {
			q4kRowsVNNI(p, rb, n, &v, o)
		} else {
			q4kRowsAVX2(p, rb, n, &v, o)
		}
	case tensor.Q6_K:
		if avx512 {
			q6kRowsVNNI(p, rb, n, &v, o)
		} else {
			q6kRowsAVX2(p, rb, n, &v, o)
		}
	case tensor.Q8G:
		if avx512 {
			q8gRowsVNNI(p, rb, n, &v, o)
		} else {
			q8gRowsAVX2(p, rb, n, &v, o)
		}
	default:
		return false
	}
	return true
}

// quantAVX512 quantizes nb blocks of x per actq.go, except blocks the rule
// treats specially (zero, non-finite, or 1/d overflowing), whose d it sets
// to -1 for quantizeRest. Needs AVX-512 VNNI (for the 4-code sums).
//
//go:noescape
func quantAVX512(x *float32, nb int, q *int8, d, bs *float32, ls *int32)

// quantizeSIMD quantizes x (whole blocks) into the given slices, reporting
// false when there is no kernel at this level.
func quantizeSIMD(x []float32, q []int8, d, bs []float32, ls []int32) bool {
	if intLevel() < simdAVX512 || len(d) == 0 {
		return false
	}
	nb := len(d)
	_, _, _, _ = x[32*nb-1], q[32*nb-1], bs[nb-1], ls[8*nb-1]
	quantAVX512(&x[0], nb, &q[0], &d[0], &bs[0], &ls[0])
	return true
}
