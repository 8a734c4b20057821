package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/seamlm/seam/tensor"
)

// TestGEMMIsMatVec: a batch of n vectors gives every vector the bits MatVec
// gives it, for every type, at every SIMD level, with odd block counts (a
// padded last pair), and with rows split across threads in the finest
// chunks. The counts cover every path: below the tiles' thresholds the
// rows go a block at a time for every vector (2, 3, and the integer types
// other than Q8_0 and Q4_0 to 8); the small float tile and, with AVX-512,
// Q8_0's and Q4_0's integer tiles from 4 (4, 6 and 23: remainders; an odd row count or chunk
// repeats its last row); the other integer tiles from gemmIntMin vectors
// (12, 13: a remainder), AVX2's 8-vector float tile from gemmF32Min (24,
// 25, 40).
func TestGEMMIsMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 31))
	defer SetThreads(0)
	saved := [3]int{serialElems, chunkElems, batchChunksPerThread}
	defer func() { serialElems, chunkElems, batchChunksPerThread = saved[0], saved[1], saved[2] }()
	levelsCovered(t, func(level int) {
		for _, typ := range allTypes {
			for _, cols := range []int{32, 96, 160, 256, 768, 172} {
				if !shapeOK(typ, cols) {
					continue
				}
				w := randTensor(rng, typ, 1+rng.IntN(48), cols, 32)
				for _, n := range []int{2, 3, gemmSmallMin, 6, 8, gemmIntMin, gemmIntMin + 1, gemmF32Min - 1, gemmF32Min, gemmF32Min + 1, 40} {
					x := randVec(rng, n*cols)
					want := make([]float32, n*w.Rows)
					for tok := range n {
						MatVec(want[tok*w.Rows:(tok+1)*w.Rows], w, x[tok*cols:(tok+1)*cols])
					}
					// Threads 1 and 3 in the finest chunks, then 1 thread
					// in the default chunks, where whole blocks of 16 rows
					// reach the fused Q8_0 interleave.
					for _, th := range []int{1, 3, -1} {
						SetThreads(max(th, 1))
						if th > 0 {
							serialElems, chunkElems, batchChunksPerThread = 0, 1, 1<<20
						}
						got := make([]float32, n*w.Rows)
						MatMul(got, w, x, n)
						serialElems, chunkElems, batchChunksPerThread = saved[0], saved[1], saved[2]
						for i := range got {
							if !sameBits(got[i], want[i]) {
								t.Fatalf("level %s %s %dx%d, %d vectors, %d threads: vector %d row %d: batch %v, one by one %v",
									levelNames[level], typ, w.Rows, cols, n, th, i/w.Rows, i%w.Rows, got[i], want[i])
							}
						}
					}
				}
			}
		}
	})
}

// TestMatMulsIsMatMul: products sharing an input in one call give what
// separate calls give, for mixed types (the input is quantized once for the
// integer ones).
func TestMatMulsIsMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 32))
	defer SetThreads(0)
	for _, th := range []int{1, 2} {
		SetThreads(th)
		for _, n := range []int{1, 3, 8, 11} {
			ws := []*tensor.Tensor{
				randTensor(rng, tensor.Q4_K, 300, 512, 0),
				randTensor(rng, tensor.F32, 64, 512, 0),
				randTensor(rng, tensor.Q6_K, 90, 512, 0),
				randTensor(rng, tensor.Q8_0, 700, 512, 0),
			}
			x := randVec(rng, n*512)
			ps := make([]Product, len(ws))
			for i, w := range ws {
				ps[i] = Product{Out: make([]float32, n*w.Rows), W: w}
			}
			MatMuls(ps, x, n)
			for i, w := range ws {
				want := make([]float32, n*w.Rows)
				MatMul(want, w, x, n)
				for k := range want {
					if !sameBits(ps[i].Out[k], want[k]) {
						t.Fatalf("threads %d, %d vectors, product %d (%s) value %d: %v, alone %v", th, n, i, w.Type, k, ps[i].Out[k], want[k])
					}
				}
			}
		}
	}
	mustPanic(t, "MatMuls with different widths", func() {
		MatMuls([]Product{{make([]float32, 2), randTensor(rng, tensor.F32, 2, 32, 0)}, {make([]float32, 2), randTensor(rng, tensor.F32, 2, 64, 0)}}, make([]float32, 32), 1)
	})
	mustPanic(t, "MatMuls with five products", func() { MatMuls(make([]Product, 5), nil, 1) })
}

// The assembly unpacking of Q8_0 and Q4_0 rows gives unpackRow's Go bytes
// and factors.
func TestUnpackRowSIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 33))
	for _, typ := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		w := randTensor(rng, typ, 3, 160, 0)
		for r := range w.Rows {
			u1, u2 := make([]byte, w.Cols), make([]byte, w.Cols)
			f1, f2 := make([]float32, w.Cols/4), make([]float32, w.Cols/4)
			unpackRow(w, r, u1, f1, nil)
			withSIMD(simdNone, func() { unpackRow(w, r, u2, f2, nil) })
			for i := range u1 {
				if u1[i] != u2[i] {
					t.Fatalf("%s row %d byte %d: %d, Go %d", typ, r, i, u1[i], u2[i])
				}
			}
			for i := range f1 {
				if !sameBits(f1[i], f2[i]) {
					t.Fatalf("%s row %d factor %d: %v, Go %v", typ, r, i, f1[i], f2[i])
				}
			}
		}
	}
}

// TestInterleaveFused: the fused Q8_0 and Q4_0 interleaves (a register
// transpose of 16 rows) write the bytes the unpacking path writes, for every
// whole block of 16 rows, the last one included (it prefetches itself), and
// are declined where they do not apply. Without AVX-512 they report false,
// and the test says so.
func TestInterleaveFused(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 35))
	fusedTypes := []tensor.DType{tensor.Q8_0, tensor.Q4_0}
	if simdLevel < simdAVX512 {
		for _, typ := range fusedTypes {
			if interleaveFused(randTensor(rng, typ, 16, 32, 0), 0, make([]byte, unitStride(32))) {
				t.Fatalf("the fused %s interleave ran without AVX-512", typ)
			}
		}
		t.Skip("no AVX-512 here: the fused interleaves are not exercised (their path is declined, checked)")
	}
	for _, typ := range fusedTypes {
		for _, cols := range []int{32, 96, 768, 2048} {
			w := randTensor(rng, typ, 48, cols, 0)
			for r0 := 0; r0+gemmIntRows <= w.Rows; r0 += gemmIntRows {
				var fused, ref unpacked
				fused.il = make([]byte, cols/32*unitStride(32))
				if !interleaveFused(w, r0, fused.il) {
					t.Fatalf("%s cols %d rows [%d, %d): the fused interleave declined", typ, cols, r0, r0+gemmIntRows)
				}
				ref.interleaveUnpacked(w, r0, r0+gemmIntRows, 32)
				for i := range fused.il {
					if fused.il[i] != ref.il[i] {
						t.Fatalf("%s cols %d rows [%d, %d): byte %d of the tile form is %#x, the unpacking path's %#x", typ, cols, r0, r0+gemmIntRows, i, fused.il[i], ref.il[i])
					}
				}
			}
			if interleaveFused(w, 40, make([]byte, cols/32*unitStride(32))) {
				t.Errorf("%s cols %d: the fused interleave took a block of 8 rows", typ, cols)
			}
		}
	}
	if interleaveFused(randTensor(rng, tensor.Q4_K, 16, 256, 0), 0, make([]byte, 8*unitStride(32))) {
		t.Error("the fused interleave took a Q4_K tensor")
	}
}
