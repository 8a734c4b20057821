package kernels

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/tensor"
)

// Scheduling parameters, from BenchmarkDispatch on a 2-vCPU virtual machine
// (f32, 2 threads against 1):
//   - serialElems: smaller matrices run on the caller alone. Splitting
//     128x128 did not pay; 256x256 (65536 values) was 16% faster, 512x512
//     35%, 768x768 2.8x (each core's cache then holds its half).
//   - chunkElems, chunksPerThread: a goroutine claims at least chunkElems
//     values at a time, and there are about chunksPerThread chunks per
//     thread, so a helper that starts late still finds work. From 1 to 16
//     chunks per thread measured the same; chunks of 1024 values were up to
//     3x slower (the claim counter's cache line bounces between cores).
//   - waitSpin: how long the caller, done with its own chunks, polls for
//     the helpers' last ones before parking: a chunk takes microseconds,
//     being woken from a park tens of microseconds.
//   - workerSpin: see workerPool.
var (
	serialElems     = 1 << 16
	chunkElems      = 1 << 14
	chunksPerThread = 4
)

// The polling durations are atomic so that tests may change them while
// workers run.
var waitSpin, workerSpin = atomicDuration(50 * time.Microsecond), atomicDuration(500 * time.Microsecond)

func atomicDuration(d time.Duration) *atomic.Int64 {
	var a atomic.Int64
	a.Store(int64(d))
	return &a
}

var threads atomic.Int32

func init() { threads.Store(int32(runtime.GOMAXPROCS(0))) }

// SetThreads sets how many goroutines MatVec uses, the caller's included.
// n < 1 restores the default, runtime.GOMAXPROCS(0). Results do not depend on it.
func SetThreads(n int) {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	threads.Store(int32(min(n, 1024)))
}

// Threads returns the number of goroutines MatVec uses.
func Threads() int { return int(threads.Load()) }

// MatVec sets out[r] to the dot product of row r of w with x, for every row,
// in the canonical order of Dot (out[r] == Dot(DequantRow(row r), x) exactly).
//
// w must have passed tensor.Check. MatVec panics when len(x) != w.Cols or
// len(out) != w.Rows: shapes are validated when a model is loaded, so a
// mismatch is a programming error. out must not overlap x. MatVec is safe for
// concurrent use.
func MatVec(out []float32, w *tensor.Tensor, x []float32) {
	if len(x) != w.Cols || len(out) != w.Rows {
		panic(fmt.Sprintf("kernels.MatVec: tensor %s is %dx%d, got out of %d and x of %d", w.Name, w.Rows, w.Cols, len(out), len(x)))
	}
	MatMul(out, w, x, 1)
}

// MatMul is MatVec for n vectors at once: x holds n rows of w.Cols values
// and out n rows of w.Rows values, out[t*Rows+r] = MatVec(w, x[t])[r]
// exactly, bit for bit. Each chunk of w's rows is applied to all n vectors
// while it is in cache, so a prompt streams the weights once, not n times.
func MatMul(out []float32, w *tensor.Tensor, x []float32, n int) {
	if n < 1 || len(x) != n*w.Cols || len(out) != n*w.Rows {
		panic(fmt.Sprintf("kernels.MatMul: tensor %s is %dx%d, got %d vectors, out of %d and x of %d", w.Name, w.Rows, w.Cols, n, len(out), len(x)))
	}
	k := newRowDotter(w)
	threads := Threads()
	if threads == 1 || w.Rows == 1 || w.Rows*w.Cols < serialElems {
		scratch := k.scratch(w.Cols)
		for t := range n {
			k.rows(out[t*w.Rows:(t+1)*w.Rows], x[t*w.Cols:(t+1)*w.Cols], 0, w.Rows, scratch)
		}
		k.release(scratch)
		return
	}
	parallel(out, k, x, n, w.Rows, w.Cols, threads)
}

func parallel(out []float32, k rowDotter, x []float32, tokens, rows, cols, n int) {
	j := &job{k: k, out: out, x: x, tokens: tokens, rows: rows, cols: cols}
	j.chunkRows = max(1, chunkElems/cols, rows/(chunksPerThread*n))
	j.chunks = (rows + j.chunkRows - 1) / j.chunkRows
	j.remaining.Store(int64(j.chunks))
	helpers := min(n-1, j.chunks-1)
	pool.ensure(helpers)
	for range helpers {
		select {
		case pool.jobs <- j:
		default: // every worker is busy: the caller does the rest itself
		}
	}
	j.work()
	j.wait()
}

// job is one parallel MatVec call, shared by the caller and the helpers it
// woke. Chunks of rows are claimed in any order, but each row is computed
// whole by one goroutine: that makes the result independent of scheduling.
type job struct {
	k          rowDotter
	out, x     []float32 // tokens vectors each
	tokens     int
	rows, cols int
	chunkRows  int
	chunks     int
	next       atomic.Int64 // next chunk to claim
	remaining  atomic.Int64 // chunks not yet finished
	mu         sync.Mutex
	done       *sync.Cond // signalled when remaining reaches 0 and someone parked
	parked     bool
}

// work claims and computes chunks until none is left.
func (j *job) work() {
	var scratch *[]float32
	claimed := false
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.chunks {
			break
		}
		if !claimed {
			scratch, claimed = j.k.scratch(j.cols), true
		}
		r0 := c * j.chunkRows
		r1 := min(r0+j.chunkRows, j.rows)
		for t := range j.tokens {
			j.k.rows(j.out[t*j.rows:(t+1)*j.rows], j.x[t*j.cols:(t+1)*j.cols], r0, r1, scratch)
		}
		if j.remaining.Add(-1) == 0 {
			j.mu.Lock()
			if j.parked {
				j.done.Signal()
			}
			j.mu.Unlock()
		}
	}
	j.k.release(scratch)
}

// wait returns when every chunk is finished: first by polling (the helpers'
// last chunks are short), then by parking.
func (j *job) wait() {
	deadline := time.Now().Add(time.Duration(waitSpin.Load()))
	for j.remaining.Load() > 0 {
		if time.Now().After(deadline) {
			j.mu.Lock()
			j.done = sync.NewCond(&j.mu)
			j.parked = true
			for j.remaining.Load() > 0 {
				j.done.Wait()
			}
			j.mu.Unlock()
			return
		}
		runtime.Gosched()
	}
}

// workerPool is the set of persistent helper goroutines. It only grows, to
// the largest helper count asked for.
//
// A worker that finishes a job polls for the next one for workerSpin before
// parking on the channel. The matrix products of a forward pass come back to
// back, and waking a parked goroutine on the other CPU took 70 µs or more on
// the 2-vCPU virtual machine this was measured on, longer than a whole
// 768x768 product, while a polling worker picks a job up within a
// microsecond: with parked workers (or a goroutine started per call) the
// parallel products of BenchmarkDispatch were no faster than serial ones;
// with polling workers, up to 2.8x. The poll yields (runtime.Gosched) so
// other goroutines keep running, and ends after workerSpin without work, so
// an idle process burns no CPU.
type workerPool struct {
	mu      sync.Mutex
	started atomic.Int32
	jobs    chan *job
}

var pool = workerPool{jobs: make(chan *job, 1024)}

func (p *workerPool) ensure(n int) {
	if int(p.started.Load()) >= n {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for int(p.started.Load()) < n {
		go p.worker()
		p.started.Add(1)
	}
}

func (p *workerPool) worker() {
	for {
		p.next().work()
	}
}

// next returns the next job, polling for up to workerSpin, then blocking.
func (p *workerPool) next() *job {
	deadline := time.Now().Add(time.Duration(workerSpin.Load()))
	for i := 0; ; i++ {
		select {
		case j := <-p.jobs:
			return j
		default:
		}
		if i%16 == 0 && !time.Now().Before(deadline) {
			return <-p.jobs
		}
		runtime.Gosched()
	}
}
