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
	j.splitChunks(n)
	for range min(n-1, j.chunks-1) {
		go j.work()
	}
	j.work()
	j.wait()
}

// BenchmarkDecodeProducts runs the matrix products of one decode token of
// the stories110M shape (12 layers of the query, key and value projections
// in one MatMuls, an empty Parallel region where attention would be, the
// output projection, gate and up in one MatMuls and the down projection;
// then a Q8_0 classifier of 32000 rows), at 1 and 2 threads, with 74 MB
// (Q4_0) or 116 MB (Q8_0) of weights, beyond the last-level cache: what
// the kernels' dispatch and the memory system give a decode step. On a
// shared machine compare 1 and 2 threads within one run (-count repeats
// each one in turn, it does not alternate them).
func BenchmarkDecodeProducts(b *testing.B) {
	eachDecodeToken(b, []tensor.DType{tensor.Q4_0, tensor.Q8_0}, func(b *testing.B, token func()) {
		for b.Loop() {
			token()
		}
	})
}

// eachDecodeToken runs f as a sub-benchmark for each weight type and for
// 1 and 2 threads, with decodeProducts' token over that type's weights,
// warmed by three tokens.
func eachDecodeToken(b *testing.B, types []tensor.DType, f func(b *testing.B, token func())) {
	defer SetThreads(0)
	for _, typ := range types {
		token := decodeProducts(typ)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", typ, th), func(b *testing.B) {
				SetThreads(th)
				for range 3 {
					token()
				}
				f(b, token)
			})
		}
	}
}

// BenchmarkRowPrefetch compares BenchmarkDecodeProducts' token with and
// without the row kernels' prefetches (rowPrefetch and startPrefetch, both
// on or both off), token by token (pairedTokens).
func BenchmarkRowPrefetch(b *testing.B) {
	defer func(r, s int64) { rowPrefetch, startPrefetch = r, s }(rowPrefetch, startPrefetch)
	row, start := rowPrefetch, startPrefetch
	eachDecodeToken(b, []tensor.DType{tensor.Q4_0, tensor.Q8_0, tensor.Q4_K}, func(b *testing.B, token func()) {
		pairedTokens(b, token, func(on bool) {
			rowPrefetch, startPrefetch = 0, 0
			if on {
				rowPrefetch, startPrefetch = row, start
			}
		})
	})
}

// BenchmarkSplitByRanges compares BenchmarkDecodeProducts' token with its
// products split by ranges (splitByRanges) and cut into one chunk per
// thread and product, token by token (pairedTokens).
func BenchmarkSplitByRanges(b *testing.B) {
	defer func(v bool) { splitByRanges = v }(splitByRanges)
	eachDecodeToken(b, []tensor.DType{tensor.Q4_0, tensor.Q8_0, tensor.Q4_K, tensor.F32}, func(b *testing.B, token func()) {
		pairedTokens(b, token, func(on bool) { splitByRanges = on })
	})
}

// pairedTokens runs token with a setting off and on in turn (set), the
// first of each pair alternating, so that a shared machine's drift moves
// both sides alike. The speed-up metric is the time off over the time on;
// ns/op is one pair of tokens.
func pairedTokens(b *testing.B, token func(), set func(on bool)) {
	defer set(true)
	var with, without time.Duration
	i := int64(0)
	for b.Loop() {
		for k := range int64(2) {
			on := (i+k)%2 == 1
			set(on)
			t0 := time.Now()
			token()
			if on {
				with += time.Since(t0)
			} else {
				without += time.Since(t0)
			}
		}
		i++
	}
	b.ReportMetric(float64(without)/float64(with), "speed-up")
}

// decodeProducts builds the weights of BenchmarkDecodeProducts and returns
// one token's products over them.
func decodeProducts(typ tensor.DType) func() {
	const dim, hidden, layers, vocab = 768, 2048, 12, 32000
	type layer struct{ q, k, v, o, w1, w3, w2 *tensor.Tensor }
	ls := make([]layer, layers)
	for i := range ls {
		ls[i] = layer{benchTensor(typ, dim, dim), benchTensor(typ, dim, dim), benchTensor(typ, dim, dim), benchTensor(typ, dim, dim),
			benchTensor(typ, hidden, dim), benchTensor(typ, hidden, dim), benchTensor(typ, dim, hidden)}
	}
	cls := benchTensor(tensor.Q8_0, vocab, dim)
	x, h := make([]float32, dim), make([]float32, hidden)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	for i := range h {
		h[i] = float32(i%5) - 2
	}
	q, k, v, o, d := make([]float32, dim), make([]float32, dim), make([]float32, dim), make([]float32, dim), make([]float32, dim)
	g, u, logits := make([]float32, hidden), make([]float32, hidden), make([]float32, vocab)
	return func() {
		for _, l := range ls {
			MatMuls([]Product{{Out: q, W: l.q}, {Out: k, W: l.k}, {Out: v, W: l.v}}, x, 1)
			Parallel(12, Threads(), func(int, int) {})
			MatVec(o, l.o, x)
			MatMuls([]Product{{Out: g, W: l.w1}, {Out: u, W: l.w3}}, x, 1)
			MatVec(d, l.w2, h)
		}
		MatVec(logits, cls, x)
	}
}
