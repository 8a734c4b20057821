package kernels

import (
	"math/rand/v2"
	"testing"
)

// MatMul over n vectors is bit-identical to n MatVec calls, for every dtype,
// serial and parallel (a batched prefill must give the same bits as feeding
// tokens one by one).
func TestMatMulIsMatVecPerVector(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	defer SetThreads(0)
	for _, threads := range []int{1, 2, 3} {
		SetThreads(threads)
		for _, typ := range allTypes {
			for _, shape := range [][2]int{{9, 256}, {700, 256}, {300, 1280}} {
				if !shapeOK(typ, shape[1]) {
					continue
				}
				w := randTensor(rng, typ, shape[0], shape[1], 64)
				for _, n := range []int{1, 2, 7} {
					x := randVec(rng, n*w.Cols)
					out := make([]float32, n*w.Rows)
					MatMul(out, w, x, n)
					one := make([]float32, w.Rows)
					for tok := range n {
						MatVec(one, w, x[tok*w.Cols:(tok+1)*w.Cols])
						for r := range one {
							if !sameBits(out[tok*w.Rows+r], one[r]) {
								t.Fatalf("%s %dx%d threads %d, %d vectors: vector %d row %d: MatMul %v, MatVec %v",
									typ, w.Rows, w.Cols, threads, n, tok, r, out[tok*w.Rows+r], one[r])
							}
						}
					}
				}
			}
		}
	}
	mustPanic(t, "MatMul with a short x", func() { MatMul(make([]float32, 18), randTensor(rng, allTypes[0], 9, 256, 64), make([]float32, 256), 2) })
}
