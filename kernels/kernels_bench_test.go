package kernels

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/seamlm/seam/tensor"
)

// benchTensor returns a rows x cols tensor of type typ with random but finite
// contents (scales tamed so no value overflows).
func benchTensor(typ tensor.DType, rows, cols int) *tensor.Tensor {
	rng := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	rb, err := typ.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	w := &tensor.Tensor{Name: "bench", Type: typ, Rows: rows, Cols: cols, Data: make([]byte, rb*rows)}
	for i := 0; i+8 <= len(w.Data); i += 8 {
		binary.LittleEndian.PutUint64(w.Data[i:], rng.Uint64())
	}
	if typ == tensor.Q8G {
		w.GroupSize = 64
		w.Scales = make([]byte, rows*cols/64*4)
	}
	tameScales(w)
	return w
}

// BenchmarkMatVec: the MB/s column is weight bytes streamed per second. One
// matrix is reused, so it may be served from cache; BenchmarkMatVecDRAM
// measures the same from main memory.
func BenchmarkMatVec(b *testing.B) {
	type shape struct {
		typ        tensor.DType
		rows, cols int
	}
	shapes := []shape{
		{tensor.F32, 768, 768}, {tensor.F32, 2048, 768}, {tensor.F32, 768, 2048}, {tensor.F32, 32000, 768},
	}
	for _, typ := range []tensor.DType{tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K, tensor.Q8G} {
		shapes = append(shapes, shape{typ, 4096, 4096})
	}
	defer SetThreads(0)
	for _, s := range shapes {
		w := benchTensor(s.typ, s.rows, s.cols)
		x := make([]float32, s.cols)
		for i := range x {
			x[i] = float32(i%17) * 0.01
		}
		out := make([]float32, s.rows)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/%dx%d/threads=%d", s.typ, s.rows, s.cols, th), func(b *testing.B) {
				SetThreads(th)
				b.SetBytes(int64(len(w.Data) + len(w.Scales)))
				for b.Loop() {
					MatVec(out, w, x)
				}
			})
		}
	}
}

// loopCPU runs f in the benchmark loop on one locked OS thread and reports
// that thread's CPU time per call as cpu-ns/op.
func loopCPU(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	if used := threadCPU() - start; used > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(n), "cpu-ns/op")
	}
}

// BenchmarkMatVecDRAM streams f32 matrices from main memory: it cycles
// through copies totalling 1.5 GB, more than the last-level cache, so every
// call reads its weights from DRAM as a large model's forward pass does.
// (BenchmarkMatVec reuses one matrix, which may stay in cache.)
// The quantized types run 768x2048 (the shape of a stories110M layer's
// w2) and, for Q4_0, 4096x4096, with 512 MB of copies: at 2 threads the
// small matrix reads far below the machine's bandwidth where the large
// one comes near it, a cost per call and per chunk rather than per byte.
func BenchmarkMatVecDRAM(b *testing.B) {
	defer SetThreads(0)
	type shape struct {
		typ        tensor.DType
		rows, cols int
		total      int
	}
	for _, sh := range []shape{
		{tensor.F32, 768, 2048, 1536 << 20}, {tensor.F32, 32000, 768, 1536 << 20},
		{tensor.Q8_0, 768, 2048, 512 << 20}, {tensor.Q4_0, 768, 2048, 512 << 20},
		{tensor.Q4_K, 768, 2048, 512 << 20}, {tensor.Q4_0, 4096, 4096, 512 << 20},
	} {
		rb, err := sh.typ.RowBytes(sh.cols)
		if err != nil {
			b.Fatal(err)
		}
		var ws []*tensor.Tensor
		for range sh.total / (sh.rows * rb) {
			ws = append(ws, benchTensor(sh.typ, sh.rows, sh.cols))
		}
		x := make([]float32, sh.cols)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		out := make([]float32, sh.rows)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%v/%dx%d/threads=%d", sh.typ, sh.rows, sh.cols, th), func(b *testing.B) {
				SetThreads(th)
				b.SetBytes(int64(len(ws[0].Data)))
				i := 0
				for b.Loop() {
					MatVec(out, ws[i%len(ws)], x)
					i++
				}
			})
		}
	}
}

// BenchmarkDot compares the pure-Go dot product (level=0) with the SIMD ones
// (1 = AVX2, 2 = AVX-512) on data in L1.
func BenchmarkDot(b *testing.B) {
	for _, n := range []int{8, 64, 768, 4096} {
		x := make([]float32, n)
		y := make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(i)*0.001, 1-float32(i)*0.0001
		}
		for level := simdNone; level <= simdLevel; level++ {
			b.Run(fmt.Sprintf("n=%d/level=%d", n, level), func(b *testing.B) {
				saved := simdLevel
				simdLevel = level
				defer func() { simdLevel = saved }()
				b.SetBytes(int64(8 * n))
				var s float32
				loopCPU(b, func() { s += Dot(x, y) })
				sink = s
			})
		}
	}
}

var sink float32

// BenchmarkMatVecLevels compares the instruction-set levels (and pure Go) on
// one thread, where the kernels rather than memory set the pace.
func BenchmarkMatVecLevels(b *testing.B) {
	defer SetThreads(0)
	SetThreads(1)
	for _, typ := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K, tensor.Q8G} {
		rows, cols := 1024, 4096
		if typ == tensor.F32 {
			rows = 256 // 4 MiB: stays in cache, shows compute speed
		}
		w := benchTensor(typ, rows, cols)
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(i%17) * 0.01
		}
		out := make([]float32, rows)
		for level := simdNone; level <= simdLevel; level++ {
			b.Run(fmt.Sprintf("%s/%dx%d/level=%d", typ, rows, cols, level), func(b *testing.B) {
				saved := simdLevel
				simdLevel = level
				defer func() { simdLevel = saved }()
				b.SetBytes(int64(len(w.Data) + len(w.Scales)))
				loopCPU(b, func() { MatVec(out, w, x) })
			})
		}
	}
}

// BenchmarkFusedVsDequant compares the fused kernels (MatVec, one thread)
// with dequantizing each row into a buffer and calling Dot. For Q8G the
// dequantization itself is SIMD (scaleI8); for the GGML types it is Go.
func BenchmarkFusedVsDequant(b *testing.B) {
	defer SetThreads(0)
	SetThreads(1)
	for _, typ := range []tensor.DType{tensor.Q8_0, tensor.Q4_K, tensor.Q6_K, tensor.Q8G} {
		w := benchTensor(typ, 1024, 4096)
		x := make([]float32, w.Cols)
		for i := range x {
			x[i] = float32(i%17) * 0.01
		}
		out := make([]float32, w.Rows)
		b.Run(fmt.Sprintf("%s/fused", typ), func(b *testing.B) {
			loopCPU(b, func() { MatVec(out, w, x) })
		})
		b.Run(fmt.Sprintf("%s/dequant+dot", typ), func(b *testing.B) {
			row := make([]float32, w.Cols)
			loopCPU(b, func() {
				for r := range out {
					DequantRow(row, w, r)
					out[r] = Dot(row, x)
				}
			})
		})
	}
}

// BenchmarkIntKernels times the integer-dot row kernels on one thread with
// the weights in L2 (128 rows of 4096), so the kernels' arithmetic, not
// memory, sets the pace; cpu-ns/block is the calling thread's CPU time per
// 32-value block. The activations are quantized once, outside the loop.
func BenchmarkIntKernels(b *testing.B) {
	for _, typ := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K, tensor.Q8G} {
		w := benchTensor(typ, 128, 4096)
		x := make([]float32, w.Cols)
		for i := range x {
			x[i] = float32(i%17)*0.01 - 0.08
		}
		a := getActQ(1, w.Cols)
		a.quantize(x)
		out := make([]float32, w.Rows)
		for level := simdNone; level <= maxLevel; level++ {
			b.Run(fmt.Sprintf("%s/level=%s", typ, levelNames[level]), func(b *testing.B) {
				withSIMD(level, func() {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					start, n := threadCPU(), 0
					for b.Loop() {
						if !intRowsSIMD(w, 0, w.Rows, a, 0, out) {
							intRowsGo(w, 0, w.Rows, a, 0, out)
						}
						n++
					}
					blocks := float64(n * w.Rows * w.Cols / 32)
					b.ReportMetric(float64((threadCPU()-start).Nanoseconds())/blocks, "cpu-ns/block")
				})
			})
		}
	}
}

// BenchmarkMatMulBatch compares the GEMM with the per-vector kernels for a
// 128-token batch on one thread (cpu-ns/token: the calling thread's CPU time
// per vector).
func BenchmarkMatMulBatch(b *testing.B) {
	defer SetThreads(0)
	SetThreads(1)
	const n = 128
	for _, typ := range []tensor.DType{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K} {
		w := benchTensor(typ, 768, 768)
		x := make([]float32, n*w.Cols)
		for i := range x {
			x[i] = float32(i%17)*0.01 - 0.08
		}
		out := make([]float32, n*w.Rows)
		for _, gemm := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/%dx%d/gemm=%v", typ, w.Rows, w.Cols, gemm), func(b *testing.B) {
				noGEMM = !gemm
				defer func() { noGEMM = false }()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				start, k := threadCPU(), 0
				for b.Loop() {
					MatMul(out, w, x, n)
					k++
				}
				b.ReportMetric(float64((threadCPU()-start).Nanoseconds())/float64(k*n), "cpu-ns/token")
			})
		}
	}
}

// BenchmarkSmallBatchDRAM: a decode step of a few sessions, the weights
// from main memory: MatMul of n vectors (rows a block at a time for the
// vectors no tile takes, so the weights are read once) against n MatVecs
// (what small batches did before: the weights read n times). ns/token is
// per vector.
func BenchmarkSmallBatchDRAM(b *testing.B) {
	defer SetThreads(0)
	for _, typ := range []tensor.DType{tensor.F32, tensor.Q8_0, tensor.Q4_0} {
		rb, _ := typ.RowBytes(768)
		var ws []*tensor.Tensor
		for range (1024 << 20) / (2048 * rb) {
			ws = append(ws, benchTensor(typ, 2048, 768))
		}
		for _, n := range benchSmallN {
			x := make([]float32, n*768)
			for i := range x {
				x[i] = float32(i%17)*0.01 - 0.08
			}
			out := make([]float32, n*2048)
			for _, mode := range benchSmallModes {
				batched := mode != "matvecs"
				b.Run(fmt.Sprintf("%s/n=%d/%s", typ, n, mode), func(b *testing.B) {
					noGEMM = mode == "blocked"
					defer func() { noGEMM = false }()
					i := 0
					for b.Loop() {
						w := ws[i%len(ws)]
						if batched {
							MatMul(out, w, x, n)
						} else {
							for t := range n {
								MatVec(out[t*2048:(t+1)*2048], w, x[t*768:(t+1)*768])
							}
						}
						i++
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
				})
			}
		}
	}
}

var (
	benchSmallN     = []int{2, 3, 4, 5, 8, 16, 32, 64}
	benchSmallModes = []string{"gemm", "blocked", "matvecs", "blocked", "gemm"} // each twice around matvecs, in both orders
)

// BenchmarkActivations times SwiGLU over a stories110M hidden vector (2048
// values) and Softmax over 256 attention scores at each instruction-set
// level: both are mostly Exp, a chain of dependent float64 roundings.
func BenchmarkActivations(b *testing.B) {
	g0, up, s0 := make([]float32, 2048), make([]float32, 2048), make([]float32, 256)
	for i := range g0 {
		g0[i], up[i] = float32(i%29)*0.25-3.5, float32(i%7)-3
	}
	for i := range s0 {
		s0[i] = float32(i%31) * 0.3
	}
	gate, scores := make([]float32, len(g0)), make([]float32, len(s0))
	for level := simdNone; level <= simdLevel; level++ {
		saved := simdLevel
		simdLevel = level
		b.Run(fmt.Sprintf("swiglu/2048/level=%d", level), func(b *testing.B) {
			for b.Loop() {
				copy(gate, g0) // SwiGLU works in place
				SwiGLU(gate, up)
			}
		})
		b.Run(fmt.Sprintf("softmax/256/level=%d", level), func(b *testing.B) {
			for b.Loop() {
				copy(scores, s0)
				Softmax(scores)
			}
		})
		simdLevel = saved
	}
}
