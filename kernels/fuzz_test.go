package kernels

import (
	"math"
	"testing"

	"github.com/seamlm/seam/tensor"
)

// FuzzRows decodes arbitrary bytes as rows of every weight type (block
// scales included, so NaN, infinities and subnormals occur) and checks that
// DequantRow matches the reference decoder, that the SIMD and pure-Go paths
// agree bit for bit, that the thread count does not matter, and that finite
// results lie within the rounding bound of the float64 reference.
func FuzzRows(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(7), []byte("0123456789abcdefghijklmnopqrstuvwxyz"))
	for i := range allTypes {
		seed := make([]byte, 3*210*2+64)
		for j := range seed {
			seed[j] = byte(j*31 + i)
		}
		f.Add(uint8(i), uint8(i), uint8(32), seed)
	}
	f.Fuzz(func(t *testing.T, typSel, colSel, gsSel uint8, data []byte) {
		typ := allTypes[int(typSel)%len(allTypes)]
		cols := []int{8, 13, 32, 64, 172, 256, 512}[int(colSel)%7]
		rb, err := typ.RowBytes(cols)
		if err != nil || rb > len(data) {
			return
		}
		rows := min(len(data)/rb, 6)
		w := &tensor.Tensor{Name: "fuzz", Type: typ, Rows: rows, Cols: cols, Data: data[:rows*rb]}
		if typ == tensor.Q8G {
			w.GroupSize = int(gsSel)%64 + 1
			rest := data[rows*rb:]
			need := rows * cols / w.GroupSize * 4
			if (rows*cols)%w.GroupSize != 0 || len(rest) < need {
				return
			}
			w.Scales = rest[:need]
		}
		if w.Check() != nil {
			return
		}
		for r := 0; r < rows; r++ {
			got := dequant(w, r)
			for e, v := range refRow(w, r) {
				if !sameBits(got[e], float32(v)) {
					t.Fatalf("%s cols %d row %d element %d: %v, reference %v", typ, cols, r, e, got[e], v)
				}
			}
		}
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(int(data[i%len(data)])-128) / 37
		}
		fast, slow, threaded := make([]float32, rows), make([]float32, rows), make([]float32, rows)
		MatVec(fast, w, x)
		withSIMD(simdNone, func() { MatVec(slow, w, x) })
		defer SetThreads(0)
		SetThreads(3)
		MatVec(threaded, w, x)
		for r := range fast {
			if !sameBits(fast[r], slow[r]) || !sameBits(fast[r], threaded[r]) {
				t.Fatalf("%s cols %d row %d: simd %v, go %v, 3 threads %v", typ, cols, r, fast[r], slow[r], threaded[r])
			}
			ref := refRow(w, r)
			want, tol := refDot(ref, x), dotBound(ref, x)
			if !fitsFloat32(ref) || !(absDot(ref, x) <= math.MaxFloat32/2) {
				continue // weights beyond float32, or partial sums that may overflow
			}
			if usesIntDot(w) {
				q, d, bs := refQuantize(x)
				if !sameBits(fast[r], refIntDot(w, r, q, d, bs)) {
					t.Fatalf("%s cols %d row %d: %v, integer-dot order %v", typ, cols, r, fast[r], refIntDot(w, r, q, d, bs))
				}
				tol = intBound(w, r, x, q, d, bs)
				if !(tol <= math.MaxFloat32/2) {
					continue
				}
			}
			if d := math.Abs(float64(fast[r]) - want); !(d <= tol) {
				t.Fatalf("%s cols %d row %d: %v, reference %v, |diff| %g > bound %g", typ, cols, r, fast[r], want, d, tol)
			}
		}
	})
}

// fitsFloat32 reports whether every value is finite and within float32 range
// (a Q8G scale times q can exceed it while the float64 reference stays finite).
func fitsFloat32(v []float64) bool {
	for _, x := range v {
		if !(math.Abs(x) <= math.MaxFloat32) {
			return false
		}
	}
	return true
}
