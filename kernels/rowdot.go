package kernels

import (
	"encoding/binary"
	"math"
	"sync"
	"unsafe"

	"github.com/seamlm/seam/internal/half"
	"github.com/seamlm/seam/tensor"
)

// rowDotter computes canonical dot products of the rows of one tensor with x.
// With a SIMD kernel for the type it works on the encoded bytes directly;
// otherwise it dequantizes the row into a scratch buffer and calls Dot, which
// gives the same bits (every dequantized value is computed identically).
type rowDotter struct {
	w        *tensor.Tensor
	rowBytes int
	simd     simdRow
	// direct is set for f32 rows that can be viewed as []float32 in place.
	direct bool
	// q8g is set for Q8G tensors the fused SIMD kernel accepts.
	q8g bool
}

func newRowDotter(w *tensor.Tensor) rowDotter {
	k := rowDotter{w: w, rowBytes: w.RowBytes(), simd: simdRowKernel(w.Type)}
	k.q8g = w.Type == tensor.Q8G && q8gFusedOK(w)
	if !k.simd.ok() && w.Type == tensor.F32 && len(w.Data) > 0 {
		// AsF32 views aligned bytes in place (and copies unaligned ones);
		// rows are 4*Cols bytes apart, so all share the alignment of Data.
		k.direct = uintptr(unsafe.Pointer(unsafe.SliceData(w.Data)))%4 == 0
	}
	return k
}

// needsScratch reports whether dot needs a Cols-long scratch buffer.
func (k *rowDotter) needsScratch() bool { return !k.simd.ok() && !k.direct && !k.q8g }

var scratchPool sync.Pool // of *[]float32

// rows sets out[r] for r in [r0, r1).
func (k *rowDotter) rows(out, x []float32, r0, r1 int, scratch *[]float32) {
	if k.w.Type == tensor.F32 && f32RowsSIMD(k.w, r0, r1, x, out[r0:r1]) {
		return
	}
	var s []float32
	if scratch != nil {
		s = *scratch
	}
	for r := r0; r < r1; r++ {
		out[r] = k.dot(r, x, s)
	}
}

// dot returns the canonical dot product of row r with x.
func (k *rowDotter) dot(r int, x []float32, scratch []float32) float32 {
	row := k.w.Data[r*k.rowBytes : (r+1)*k.rowBytes]
	switch {
	case k.simd.ok():
		s := k.simd.dot(row, x)
		if n8 := len(x) &^ 7; n8 < len(x) {
			s = addTailEncoded(s, k.w.Type, row, n8, x)
		}
		return s
	case k.direct:
		return Dot(tensor.AsF32(row), x)
	case k.q8g:
		return dotQ8GFused(k.w, row, r, x)
	}
	DequantRow(scratch, k.w, r)
	return Dot(scratch, x)
}

// addTailEncoded is step 5 of the canonical order for the values j >= n8 of
// an f32, f16 or bf16 row (the only types whose rows need not be a whole
// number of 32-value blocks).
func addTailEncoded(s float32, t tensor.DType, row []byte, n8 int, x []float32) float32 {
	for j := n8; j < len(x); j++ {
		var v float32
		switch t {
		case tensor.F32:
			v = math.Float32frombits(binary.LittleEndian.Uint32(row[4*j:]))
		case tensor.F16:
			v = f16ToF32(binary.LittleEndian.Uint16(row[2*j:]))
		case tensor.BF16:
			v = half.BF16ToF32(binary.LittleEndian.Uint16(row[2*j:]))
		}
		s += float32(v * x[j])
	}
	return s
}
