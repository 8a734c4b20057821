//go:build amd64 && !purego

package kernels

import (
	"unsafe"

	"github.com/seamlm/seam/tensor"
)

// gemmF32AVX512 sets out[t] = the canonical dot product (Dot's order) of
// the row w (n values, n a multiple of 32) with vector t of x, for the 8
// vectors x, x+xStride, ... (xStride in bytes).
//
//go:noescape
func gemmF32AVX512(w *float32, n int, x *float32, xStride int, out *[gemmGroup]float32)

// gemmF32AVX2 is gemmF32AVX512 for AVX2.
//
//go:noescape
func gemmF32AVX2(w *float32, n int, x *float32, xStride int, out *[gemmGroup]float32)

// gemmI8VNNI sets out[t] to steps 1-3 of the integer-dot order for one
// unpacked row (u, wf) against vector t of a packed group (see gemmPacked).
//
//go:noescape
func gemmI8VNNI(u *byte, wf *float32, npairs int, xp *byte, out *[gemmGroup]float32)

// q4kMinsAVX2 sets out[t] to the folded Q4_K minimums of one row (m: one
// factor per block, nsb super-blocks) against vector t, whose block scales
// and sums are at d and bs plus t*stride bytes.
//
//go:noescape
func q4kMinsAVX2(m *float32, nsb int, d, bs *float32, stride int, out *[gemmGroup]float32)

func gemmF32OK() bool { return simdLevel >= simdAVX2 }
func gemmIntOK() bool { return intLevel() >= simdAVX512 }

// gemmF32 needs len(row) == cols and 8 vectors of cols in x.
func gemmF32(row, x []float32, cols int, out *[gemmGroup]float32) {
	_ = x[gemmGroup*cols-1]
	_ = row[cols-1]
	if simdLevel >= simdAVX512 {
		gemmF32AVX512(&row[0], cols, &x[0], 4*cols, out)
		return
	}
	gemmF32AVX2(&row[0], cols, &x[0], 4*cols, out)
}

// gemmInt needs npairs*64 bytes of u, npairs*16 factors and a whole packed
// group at xp.
func gemmInt(u []byte, wf []float32, npairs int, xp []byte, out *[gemmGroup]float32) {
	_ = u[64*npairs-1]
	_ = wf[16*npairs-1]
	_ = xp[npairs*gemmGroup*gemmPackStride-1]
	gemmI8VNNI(unsafe.SliceData(u), unsafe.SliceData(wf), npairs, unsafe.SliceData(xp), out)
}

// q4kMins: vectors t0 .. t0+7 of a against the minimum factors m of a row.
func q4kMins(m []float32, a *actQ, t0 int, out *[gemmGroup]float32) {
	_ = a.d[(t0+gemmGroup)*a.nb-1]
	q4kMinsAVX2(&m[0], len(m)/8, &a.d[t0*a.nb], &a.bs[t0*a.nb], 4*a.nb, out)
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
