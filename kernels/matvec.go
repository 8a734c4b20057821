package kernels

import (
	"fmt"
	"runtime"
	"runtime/debug"
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
//   - chunkElems, chunksPerThread, batchChunksPerThread: a goroutine
//     claims at least chunkElems values at a time, and there are about
//     chunksPerThread chunks per thread for one vector (a decode step's
//     products) and batchChunksPerThread for several (a prompt, a batched
//     step). More chunks let a helper that starts late still find work;
//     fewer save a claim and a hand-off each. From 1 to 16 chunks per
//     thread measured the same in cache; chunks of 1024 values were up to
//     3x slower (the claim counter's cache line bounces between cores).
//     From memory, quantized matrices of a decode read faster in fewer,
//     longer chunks (BenchmarkMatVecDRAM, q4_0 768x2048, 2 threads, GB/s,
//     three runs: 1 chunk per thread 32-33, 2: 28-31, 4: 23-28, 8: 19-22;
//     q8_0 39-44, 37-41, 31-37, 27-31). Whole decodes and prefills with
//     each setting, alternated in one process (a throwaway harness around
//     bench.Decode and bench.Prefill, 8 rounds after a warm-up, 2 threads,
//     medians, 2026-12-03), with Gosched polling / spinUntil polling:
//     Q4_0 decode 505 / 508 tok/s with 2 chunks per thread, 544 / 554
//     with 1; Q8_0 decode 425 / 416 and 433 / 445; f32 decode 126-127 for
//     all four; Q4_0 prefill of 128 tokens 2452-2484 for all four; f32
//     prefill 1071 / 1091 with 2 and 986 / 992 with 1. So one vector takes
//     1 chunk per thread and a batch 2. The products of one decode token
//     alone (BenchmarkDecodeProducts' sequence) gave the same order, 2
//     threads against 1 in each of 8 rounds: Q4_0 1.41-1.58x with Gosched
//     polling and 2 chunks per thread, 1.59-1.85x with spinUntil and 1
//     (the faster in every round); Q8_0 1.36-1.75x and 1.49-1.84x.
//   - waitSpin: how long the caller, done with its own chunks, polls for
//     the helpers' last ones before parking: a chunk takes microseconds,
//     being woken from a park tens of microseconds.
//   - workerSpin: see workerPool.
var (
	serialElems          = 1 << 16
	chunkElems           = 1 << 14
	chunksPerThread      = 1 // one vector: a decode step
	batchChunksPerThread = 2 // several: a prompt, or a step of many sessions
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

// MaxThreads is the most goroutines the kernels use; SetThreads caps
// larger counts to it.
const MaxThreads = 1024

// SetThreads sets how many goroutines MatVec uses, the caller's included.
// n < 1 restores the default, runtime.GOMAXPROCS(0). Results do not depend on it.
func SetThreads(n int) {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	threads.Store(int32(min(n, MaxThreads)))
}

// Threads returns the number of goroutines MatVec uses.
func Threads() int { return int(threads.Load()) }

// MatVec sets out[r] to the dot product of row r of w with x, for every row.
// For f32, f16, bf16 (and Q8G whose groups straddle rows) the product is
// Dot(DequantRow(row r), x) exactly; for the other quantized types x is
// quantized once and the integer-dot order of intdot.go is used. Either way
// the result is one fixed function of w and x: the same bits whatever the
// thread count, the memory layout or the instruction set.
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
	MatMuls([]Product{{Out: out, W: w}}, x, n)
}

// Product is one matrix product of a MatMuls call: Out = W times each input.
type Product struct {
	Out []float32
	W   *tensor.Tensor
}

// maxProducts bounds how many products one MatMuls call takes.
const maxProducts = 4

// MatMuls runs up to four products that share their input (n vectors of
// x), such as a layer's query, key and value projections, in one parallel
// region: the input is quantized once and the threads are woken once. Each
// Out is exactly what MatMul(p.Out, p.W, x, n) would give. The W must have
// the same Cols.
func MatMuls(ps []Product, x []float32, n int) {
	if len(ps) < 1 || len(ps) > maxProducts {
		panic(fmt.Sprintf("kernels.MatMuls: %d products, want 1..%d", len(ps), maxProducts))
	}
	cols := ps[0].W.Cols
	for _, p := range ps {
		w := p.W
		if n < 1 || w.Cols != cols || len(x) != n*w.Cols || len(p.Out) != n*w.Rows {
			panic(fmt.Sprintf("kernels.MatMuls: tensor %s is %dx%d, got %d vectors, out of %d and x of %d", w.Name, w.Rows, w.Cols, n, len(p.Out), len(x)))
		}
	}
	j := newJob()
	defer j.unref()
	j.x, j.tokens, j.cols, j.np = x, n, cols, len(ps)
	quant, elems := false, 0
	for i, p := range ps {
		j.ps[i] = newProduct(p)
		quant = quant || j.ps[i].intDot
		elems += p.W.Rows * cols
	}
	if quant {
		j.xq = getActQ(n, cols)
		j.xq.quantize(x)
		defer j.release()
		j.pack()
	}
	threads := Threads()
	if threads == 1 || elems < serialElems {
		j.serial()
		return
	}
	j.parallel(threads)
}

// release returns the job's quantized and packed vectors to their pools.
func (j *job) release() {
	putActQ(j.xq)
	for _, p := range j.xp {
		if p != nil {
			gemmPackedPool.Put(p)
		}
	}
}

// product is one matrix of a job.
type product struct {
	w         *tensor.Tensor
	out       []float32
	intDot    bool
	k         rowDotter // the float path, when !intDot
	chunkRows int
	chunks    int
}

func newProduct(p Product) product {
	pr := product{w: p.W, out: p.Out, intDot: usesIntDot(p.W)}
	if !pr.intDot {
		pr.k = newRowDotter(p.W)
	}
	return pr
}

// rows computes rows [r0, r1) of p for every vector: with the GEMM kernels
// when there are enough vectors and a kernel for the type, and the vectors
// the tiles leave over (all of them without a tile) one at a time. All give
// the same bits.
func (j *job) rows(p *product, r0, r1 int, scratch *[]float32) {
	done := j.gemmRows(p, r0, r1, scratch)
	if done == j.tokens {
		return
	}
	if j.tokens-done == 1 {
		j.rowsOne(p, done, r0, r1, scratch)
		return
	}
	j.rowsBlocked(p, done, r0, r1, scratch)
}

// blockBytes is the weight bytes rowsBlocked applies to every vector in
// turn: they stay in the core's cache from the first vector to the last.
const blockBytes = 32 << 10

// rowsBlocked computes rows [r0, r1) of p for vectors t0 and after, one
// vector at a time but a block of rows at a time, so that the weights are
// read from memory once for all the vectors (a batch of 2 or 3 decode
// tokens costs about what one does) rather than once per vector. Each row
// is computed exactly as rowsOne computes it.
func (j *job) rowsBlocked(p *product, t0, r0, r1 int, scratch *[]float32) {
	rb, _ := p.w.Type.RowBytes(p.w.Cols)
	block := max(1, blockBytes/max(rb, 1))
	for b := r0; b < r1; b += block {
		e := min(b+block, r1)
		for t := t0; t < j.tokens; t++ {
			j.rowsOne(p, t, b, e, scratch)
		}
	}
}

// rowsOne computes rows [r0, r1) of p for vector t.
func (j *job) rowsOne(p *product, t, r0, r1 int, scratch *[]float32) {
	rows := p.w.Rows
	out := p.out[t*rows : (t+1)*rows]
	if p.intDot {
		if !intRowsSIMD(p.w, r0, r1, j.xq, t, out[r0:r1]) {
			intRowsGo(p.w, r0, r1, j.xq, t, out[r0:r1])
		}
		return
	}
	p.k.rows(out, j.x[t*j.cols:(t+1)*j.cols], r0, r1, scratch)
}

// needsScratch reports whether any float-path product needs a scratch row.
func (j *job) needsScratch() bool {
	for i := range j.np {
		if !j.ps[i].intDot && j.ps[i].k.needsScratch() {
			return true
		}
	}
	return false
}

func (j *job) getScratch() *[]float32 {
	if !j.needsScratch() {
		return nil
	}
	if s, ok := scratchPool.Get().(*[]float32); ok && cap(*s) >= j.cols {
		*s = (*s)[:j.cols]
		return s
	}
	s := make([]float32, j.cols)
	return &s
}

func (j *job) serial() {
	scratch := j.getScratch()
	for i := range j.np {
		j.rows(&j.ps[i], 0, j.ps[i].w.Rows, scratch)
	}
	if scratch != nil {
		scratchPool.Put(scratch)
	}
}

func (j *job) parallel(n int) {
	per := chunksPerThread
	if j.tokens > 1 {
		per = batchChunksPerThread
	}
	for i := range j.np {
		p := &j.ps[i]
		rows := p.w.Rows
		p.chunkRows = max(1, chunkElems/j.cols, rows/(per*n))
		p.chunks = (rows + p.chunkRows - 1) / p.chunkRows
		j.chunks += p.chunks
	}
	j.remaining.Store(int64(j.chunks))
	j.hand(min(n-1, j.chunks-1))
	j.work()
	j.wait()
	j.rethrow()
}

// job is one parallel MatMuls call, shared by the caller and the helpers it
// woke. Chunks of rows are claimed in any order, but each row is computed
// whole by one goroutine: that makes the result independent of scheduling.
type job struct {
	ps        [maxProducts]product
	np        int
	x         []float32      // tokens vectors of cols
	xq        *actQ          // x quantized, when a product uses integer dots
	xp        [2]*gemmPacked // xq packed for the integer GEMM, per unit size used
	tokens    int
	cols      int
	chunks    int
	task      func(worker, i int) // a Parallel call: chunk i is task(worker, i)
	workers   atomic.Int32        // goroutines that entered a Parallel job
	next      atomic.Int64        // next chunk to claim
	remaining atomic.Int64        // chunks not yet finished
	mu        sync.Mutex
	done      sync.Cond // signalled when remaining reaches 0 and someone parked; L is &mu
	parked    bool
	fault     any          // the first memory fault a helper met (see catchFault), under mu
	refs      atomic.Int32 // holders: the caller, and each helper it was handed to
}

// Jobs are pooled: a decode token makes five products and an attention
// call per layer, and a fresh job each (about 600 bytes) kept the small Go
// heap churning, its pages handed back to the system and faulted in again
// on the caller's thread while the helpers waited (about 5 % of a 2-thread
// decode's time in a profile of 2026-12-04).
var jobPool = sync.Pool{New: func() any { return new(job) }}

// newJob returns a zeroed job held by its caller.
func newJob() *job {
	j := jobPool.Get().(*job)
	j.refs.Store(1)
	return j
}

// unref drops one holder's reference, and the last returns the job to the
// pool. The caller cannot recycle a job alone when its wait returns: a
// helper may still be inside work (about to find no chunk left), and a
// handed copy may still sit in the queue for a helper to pick up.
func (j *job) unref() {
	if j.refs.Add(-1) == 0 {
		*j = job{}
		jobPool.Put(j)
	}
}

// hand offers the job to up to n helpers. A helper that takes it holds a
// reference until it leaves work; when every helper is busy the queue
// refuses and the caller does the rest itself.
func (j *job) hand(n int) {
	pool.ensure(n)
	for range n {
		j.refs.Add(1) // before the send: the helper may finish at once
		select {
		case pool.jobs <- j:
		default:
			j.refs.Add(-1)
		}
	}
}

// work claims and computes chunks until none is left.
func (j *job) work() {
	if j.task != nil {
		j.workTasks()
		return
	}
	var scratch *[]float32
	claimed := false
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.chunks {
			break
		}
		if !claimed {
			scratch, claimed = j.getScratch(), true
		}
		i := 0
		for c >= j.ps[i].chunks {
			c -= j.ps[i].chunks
			i++
		}
		p := &j.ps[i]
		r0 := c * p.chunkRows
		j.guardedRows(p, r0, min(r0+p.chunkRows, p.w.Rows), scratch)
		if j.remaining.Add(-1) == 0 {
			j.mu.Lock()
			if j.parked {
				j.done.Signal()
			}
			j.mu.Unlock()
		}
	}
	if scratch != nil {
		scratchPool.Put(scratch)
	}
}

// Parallel calls f(worker, i) for every i in [0, n), spread over at most
// min(maxWorkers, Threads()) goroutines, the caller's included, and returns
// when every call has returned. worker is in [0, maxWorkers) and no two
// concurrent calls share one, so f may use per-worker scratch space. Calls
// run in no particular order: for results independent of the thread count,
// f(_, i) must write only what belongs to item i.
func Parallel(n, maxWorkers int, f func(worker, i int)) {
	threads := min(Threads(), maxWorkers)
	if threads <= 1 || n <= 1 {
		for i := range n {
			f(0, i)
		}
		return
	}
	j := newJob()
	defer j.unref()
	j.task, j.chunks = f, n
	j.remaining.Store(int64(n))
	j.hand(min(threads-1, n-1))
	j.work()
	j.wait()
	j.rethrow()
}

// Memory faults in helpers. A weight file truncated under its mapping
// makes the next read of it fault. The goroutine that called into the
// kernels can turn that into an error (debug.SetPanicOnFault, as package
// mapped's Guard does), but a helper goroutine cannot return one: a fault
// there used to end the process. Helpers run with SetPanicOnFault on;
// a chunk that faults is caught, counted as done so that the job ends,
// and the fault is raised again on the caller's goroutine once the job
// is over, where the caller's own guard (or the runtime) handles it as a
// fault of its own. Any other panic is not caught.

// faultPanic is what the runtime panics with for a memory fault when
// SetPanicOnFault is on.
type faultPanic interface {
	error
	Addr() uintptr
}

// catchFault, deferred around one chunk, records a memory fault in j.
func (j *job) catchFault() {
	r := recover()
	if r == nil {
		return
	}
	if _, ok := r.(faultPanic); !ok {
		panic(r)
	}
	j.mu.Lock()
	if j.fault == nil {
		j.fault = r
	}
	j.mu.Unlock()
}

func (j *job) guardedRows(p *product, r0, r1 int, scratch *[]float32) {
	defer j.catchFault()
	j.rows(p, r0, r1, scratch)
}

func (j *job) guardedTask(worker, i int) {
	defer j.catchFault()
	j.task(worker, i)
}

// rethrow raises on the caller's goroutine the fault a chunk met, once
// every chunk is over.
func (j *job) rethrow() {
	j.mu.Lock()
	f := j.fault
	j.mu.Unlock()
	if f != nil {
		panic(f)
	}
}

// workTasks runs a Parallel job's items until none is left.
func (j *job) workTasks() {
	worker := int(j.workers.Add(1)) - 1
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.chunks {
			return
		}
		j.guardedTask(worker, c)
		if j.remaining.Add(-1) == 0 {
			j.mu.Lock()
			if j.parked {
				j.done.Signal()
			}
			j.mu.Unlock()
		}
	}
}

// wait returns when every chunk is finished: first by polling (the helpers'
// last chunks are short), then by parking.
func (j *job) wait() {
	deadline := time.Now().Add(time.Duration(waitSpin.Load()))
	for !spinUntil(func() bool { return j.remaining.Load() == 0 }) {
		if time.Now().After(deadline) {
			j.mu.Lock()
			j.done.L = &j.mu // set here, not allocated: a pooled job parks without allocating
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
// with polling workers, up to 2.8x. The poll checks the queue between
// PAUSEs (spinUntil) and yields (runtime.Gosched) every few microseconds,
// so other goroutines keep running, and ends after workerSpin without
// work, so an idle process burns no CPU.
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
	debug.SetPanicOnFault(true) // see catchFault
	for {
		j := p.next()
		j.work()
		j.unref()
	}
}

// next returns the next job, polling for up to workerSpin, then blocking.
func (p *workerPool) next() *job {
	deadline := time.Now().Add(time.Duration(workerSpin.Load()))
	for {
		spinUntil(func() bool { return len(p.jobs) > 0 })
		select {
		case j := <-p.jobs:
			return j
		default:
		}
		if !time.Now().Before(deadline) {
			return <-p.jobs
		}
		runtime.Gosched()
	}
}

// spinPolls and spinPauses shape spinUntil: it checks its condition up to
// spinPolls times, spinPauses PAUSE instructions apart (a PAUSE took 18 ns
// on the Zen 5 measured: polls 150 ns apart, 9.5 µs in all), before its
// caller yields to the scheduler. A runtime.Gosched takes the scheduler's
// lock and wakes idle Ps: polling through it alone, a 2-thread profile of
// decode spent 12-16 % of its CPU time there, and a job waited a scheduler
// round trip to be picked up.
const spinPolls, spinPauses = 64, 8

// spinUntil polls done without entering the scheduler and reports whether
// it became true.
func spinUntil(done func() bool) bool {
	for range spinPolls {
		if done() {
			return true
		}
		spinPause(spinPauses)
	}
	return done()
}
