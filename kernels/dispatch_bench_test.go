package kernels

import (
	"fmt"
	"testing"
	"time"

	"github.com/seamlm/seam/tensor"
)

// BenchmarkDispatch measures how MatVec's parallel dispatch compares with
// running serially on small and medium f32 matrices, with 2 threads:
//   - serial: one goroutine (what MatVec does below serialElems);
//   - spin: the persistent pool, workers polling between jobs (MatVec's way);
//   - park: the persistent pool with workers that park at once;
//   - spawn: a new goroutine per helper per call.
//
// It sets the threshold serialElems and justifies workerSpin.
func BenchmarkDispatch(b *testing.B) {
	defer SetThreads(0)
	for _, sh := range [][2]int{{64, 64}, {128, 128}, {256, 256}, {288, 288}, {512, 512}, {768, 768}, {2048, 768}} {
		w := benchTensor(tensor.F32, sh[0], sh[1])
		x := make([]float32, sh[1])
		out := make([]float32, sh[0])
		for _, mode := range []string{"serial", "spin", "park", "spawn"} {
			b.Run(fmt.Sprintf("%dx%d/%s", sh[0], sh[1], mode), func(b *testing.B) {
				SetThreads(2)
				oldSerial, oldSpin := serialElems, workerSpin.Load()
				defer func() { serialElems = oldSerial; workerSpin.Store(oldSpin) }()
				serialElems = 0
				call := func() { MatVec(out, w, x) }
				switch mode {
				case "serial":
					SetThreads(1)
				case "park":
					workerSpin.Store(0)
					time.Sleep(2 * time.Duration(oldSpin)) // let polling workers park
				case "spawn":
					call = func() { spawnMatVec(out, w, x, 2) }
				}
				b.SetBytes(int64(len(w.Data)))
				for b.Loop() {
					call()
				}
			})
		}
	}
}

// spawnMatVec is MatVec's parallel path with a goroutine started per helper.
func spawnMatVec(out []float32, w *tensor.Tensor, x []float32, n int) {
	j := &job{x: x, tokens: 1, cols: len(x), np: 1}
	j.ps[0] = newProduct(Product{Out: out, W: w})
	p := &j.ps[0]
	p.chunkRows = max(1, chunkElems/len(x), len(out)/(chunksPerThread*n))
	p.chunks = (len(out) + p.chunkRows - 1) / p.chunkRows
	j.chunks = p.chunks
	j.remaining.Store(int64(j.chunks))
	for range min(n-1, j.chunks-1) {
		go j.work()
	}
	j.work()
	j.wait()
}
