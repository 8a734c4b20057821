//go:build amd64 && !purego

package kernels

import (
	"unsafe"

	"github.com/seamlm/seam/tensor"
)

// gemmF32AVX2 sets out[t] = the canonical dot product (Dot's order) of the
// row w (n values, n a multiple of 32) with vector t of x, for the 8
// vectors x, x+xStride, ... (xStride in bytes). AVX-512 has the small tile
// instead (gemmF32R2AVX512).
//
//go:noescape
func gemmF32AVX2(w *float32, n int, x *float32, xStride int, out *[gemmGroup]float32)

// gemmF32R2AVX512 sets out[4r+t] = the canonical dot product of row r (w
// + r*wStride bytes, n values, n a multiple of 32) with vector t (x +
// t*xStride bytes), for 2 rows and 4 vectors.
//
// Unless pf is 0, it prefetches as many bytes of the two rows at pf and
// pf+wStride.
//
//go:noescape
func gemmF32R2AVX512(w *float32, wStride, n int, x *float32, xStride int, out *[gemmGroup]float32, pf uintptr)

// gemmI8U32VNNI and gemmI8U16VNNI compute steps 1-3 of the integer-dot
// order (minus mins[16t+k], zeros unless Q4_K) of row k of an interleaved
// block of 16 rows (w) against vector t of a packed group of 4 (xp), for
// units of 32 or 16 values, nunits a multiple of 4, and store it at out +
// t*stride bytes + 4k for the rows k whose bit is set in mask. See
// gemm_avx512_amd64.s for the layouts.
//
//go:noescape
func gemmI8U32VNNI(w *byte, nunits int, xp *byte, out *float32, stride, mask int, mins *float32)

//go:noescape
func gemmI8U16VNNI(w *byte, nunits int, xp *byte, out *float32, stride, mask int, mins *float32)

// q4kMins16VNNI sets out[k] to the folded Q4_K minimums of row k of 16
// (m: per block, the rows' 16 factors) against one vector's block scales d
// and sums bs.
//
//go:noescape
func q4kMins16VNNI(m *float32, nb int, d, bs *float32, out *[gemmIntRows]float32)

func gemmF32OK() bool { return simdLevel >= simdAVX2 }
func gemmIntOK() bool { return intLevel() >= simdAVX512 }

// gemmF32 needs len(row) == cols and 8 vectors of cols in x.
func gemmF32(row, x []float32, cols int, out *[gemmGroup]float32) {
	_ = x[gemmGroup*cols-1]
	_ = row[cols-1]
	gemmF32AVX2(&row[0], cols, &x[0], 4*cols, out)
}

// gemmF32SmallOK reports whether the small float tile (2 rows, 4 vectors)
// runs: it needs AVX-512's 32 registers.
func gemmF32SmallOK() bool { return simdLevel >= simdAVX512 }

// gemmF32R2 runs the small tile over rows[0:cols] and rows[next:next+cols]
// (next = 0 repeats the first row), against 4 vectors of cols in x:
// out[4r+t] is row r against vector t. Unless pf is nil, it prefetches
// pf[0:cols] and pf[next:next+cols].
func gemmF32R2(rows []float32, next int, x []float32, cols int, out *[gemmGroup]float32, pf []float32) {
	_ = x[gemmSmallGroup*cols-1]
	_ = rows[next+cols-1]
	var pfAddr uintptr
	if pf != nil {
		_ = pf[next+cols-1]
		pfAddr = uintptr(unsafe.Pointer(&pf[0]))
	}
	gemmF32R2AVX512(&rows[0], 4*next, cols, &x[0], 4*cols, out, pfAddr)
}

// gemmInt runs the integer tile over nunits units of unitVals values,
// storing vector t's first n rows at out[t*rows:].
func gemmInt(w []byte, unitVals, nunits int, xp []byte, out []float32, rows, n int, mins *[gemmIntTile]float32) {
	_ = w[nunits*unitStride(unitVals)-1]
	_ = xp[nunits*gemmIntVecs*gemmPackEntry-1]
	_ = out[(gemmIntVecs-1)*rows+n-1]
	mask := 1<<n - 1
	if unitVals == 16 {
		gemmI8U16VNNI(&w[0], nunits, &xp[0], &out[0], 4*rows, mask, &mins[0])
		return
	}
	gemmI8U32VNNI(&w[0], nunits, &xp[0], &out[0], 4*rows, mask, &mins[0])
}

// q4kMins: the minimums of 16 interleaved rows (m: nb blocks x 16) against
// vector t of a.
func q4kMins(m []float32, a *actQ, t int, out []float32) {
	_ = m[a.nb*gemmIntRows-1]
	_ = out[gemmIntRows-1]
	_, d, bs := a.vec(t)
	q4kMins16VNNI(&m[0], a.nb, &d[0], &bs[0], (*[gemmIntRows]float32)(out))
}

//go:noescape
func unpackQ80AVX2(row unsafe.Pointer, nb int, u *byte, wf *float32)

//go:noescape
func unpackQ40AVX2(row unsafe.Pointer, nb int, u *byte, wf *float32)

// unpackRowSIMD is unpackRow for Q8_0 and Q4_0 in AVX2, reporting false for
// other types or without AVX2.
func unpackRowSIMD(w *tensor.Tensor, r int, u []byte, wf []float32) bool {
	if simdLevel < simdAVX2 || (w.Type != tensor.Q8_0 && w.Type != tensor.Q4_0) {
		return false
	}
	nb := w.Cols / 32
	row := w.Row(r)
	_, _ = u[32*nb-1], wf[8*nb-1]
	if w.Type == tensor.Q8_0 {
		unpackQ80AVX2(unsafe.Pointer(&row[0]), nb, &u[0], &wf[0])
	} else {
		unpackQ40AVX2(unsafe.Pointer(&row[0]), nb, &u[0], &wf[0])
	}
	return true
}

// interleaveQ80VNNI builds the integer tile's weight form (see
// unpacked.interleave) straight from 16 whole Q8_0 rows at w, stride bytes
// apart, nb blocks each, and prefetches the 16 x stride bytes at pf.
//
//go:noescape
func interleaveQ80VNNI(w unsafe.Pointer, stride, nb int, dst *byte, pf unsafe.Pointer)

// interleaveQ40VNNI is interleaveQ80VNNI for Q4_0 rows.
//
//go:noescape
func interleaveQ40VNNI(w unsafe.Pointer, stride, nb int, dst *byte, pf unsafe.Pointer)

// fusedInterleaveOK reports whether interleaveFused runs for type t.
func fusedInterleaveOK(t tensor.DType) bool {
	return simdLevel >= simdAVX512 && (t == tensor.Q8_0 || t == tensor.Q4_0)
}

// interleaveFused is interleaveQ80VNNI or interleaveQ40VNNI for rows [r0,
// r0+16) of w, reporting false without AVX-512 or for another type. It
// prefetches the next 16 rows (the same rows again for the last block:
// they are in cache).
func interleaveFused(w *tensor.Tensor, r0 int, dst []byte) bool {
	if !fusedInterleaveOK(w.Type) || r0+gemmIntRows > w.Rows {
		return false
	}
	rb, _ := w.Type.RowBytes(w.Cols)
	nb := w.Cols / 32
	_ = dst[nb*unitStride(32)-1]
	_ = w.Data[(r0+gemmIntRows)*rb-1]
	next := r0 + gemmIntRows
	if next+gemmIntRows > w.Rows {
		next = r0
	}
	src, pf := unsafe.Pointer(&w.Data[r0*rb]), unsafe.Pointer(&w.Data[next*rb])
	if w.Type == tensor.Q8_0 {
		interleaveQ80VNNI(src, rb, nb, &dst[0], pf)
	} else {
		interleaveQ40VNNI(src, rb, nb, &dst[0], pf)
	}
	return true
}

//go:noescape
func interleave16VNNI(u *byte, wf *float32, cols, nunits, groups int, dst *byte)

// interleaveSIMD builds the integer tile's weight form from 16 unpacked
// rows (see unpacked.interleave), reporting false without AVX-512.
func interleaveSIMD(u []byte, wf []float32, cols, unitVals int, dst []byte) bool {
	if simdLevel < simdAVX512 {
		return false
	}
	nu := cols / unitVals
	_, _, _ = u[gemmIntRows*cols-1], wf[gemmIntRows*cols/4-1], dst[nu*unitStride(unitVals)-1]
	interleave16VNNI(&u[0], &wf[0], cols, nu, unitVals/4, &dst[0])
	return true
}
