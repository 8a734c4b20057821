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
//   - pieceElems, maxRanges: one vector (a decode step) is split by
//     ranges (splitRanges). The products' rows, in product order, are cut
//     into pieces of about pieceElems values, each product into a multiple
//     of the thread count so that equal runs hold equal rows (pieces of
//     pieceElems alone cut 768 rows 341+341+86, and two threads' runs got
//     341 and 427). Each thread owns one contiguous run of pieces and
//     computes it from the front; a thread done with its own takes pieces
//     from the back of another's. Each thread so reads one long stretch of
//     memory (a layer's query, key and value matrices lie one after the
//     other), and a thread the machine slows does less of the work instead
//     of holding the other back. Whole decodes of the stories110M shape on
//     2 threads, every token with each split in turn, were 0-10 % faster
//     than with one chunk per thread and product claimed in any order, and
//     more when a token found its helper parked (the caller takes the
//     helper's run instead of waiting). Pieces of 1<<17 to 3<<17 values
//     measured within a few percent of each other, 1<<14 was slower than
//     the chunks (a row kernel call per few kilobytes); docs/performance.md,
//     § Decode products split by ranges. Threads past maxRanges own no run
//     and only take pieces from others'.
//   - chunkElems, batchChunksPerThread: several vectors (a prompt, a
//     batched step) are split into chunks claimed in any order from one
//     counter, at least chunkElems values and about batchChunksPerThread
//     chunks per thread. More chunks let a helper that starts late still
//     find work; fewer save a claim and a hand-off each. Chunks of 1024
//     values were up to 3x slower (the claim counter's cache line bounces
//     between cores). Whole prefills alternated in one process
//     (2026-12-03): f32 1071-1091 tok/s with 2 chunks per thread and
//     986-992 with 1, Q4_0 the same with both.
//   - waitSpin: how long the caller, done with its own chunks, polls for
//     the helpers' last ones before parking: a chunk takes microseconds,
//     being woken from a park tens of microseconds.
//   - workerSpin: see workerPool.
var (
	serialElems          = 1 << 16
	pieceElems           = 1 << 18
	chunkElems           = 1 << 14
	batchChunksPerThread = 2
)

// maxRanges bounds the runs one vector's products are split into.
const maxRanges = 32

// splitByRanges turns the split by ranges on; off, one vector is cut into
// one chunk per thread and product, claimed in any order, as before the
// ranges (2026-12-04), for BenchmarkSplitByRanges to compare.
var splitByRanges = true

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
	w      *tensor.Tensor
	out    []float32
	intDot bool
	k      rowDotter // the float path, when !intDot
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
	if j.tokens == 1 && splitByRanges {
		j.splitRanges(n)
		j.hand(j.nranges - 1)
	} else {
		j.splitChunks(n)
		j.hand(min(n-1, j.chunks-1))
	}
	j.work()
	j.wait()
	j.rethrow()
}

// splitRanges cuts the products' rows into pieces of about pieceElems
// values (a multiple of n pieces per product), numbered in product order,
// and gives each of up to n threads a contiguous run of them (see
// pieceElems).
func (j *job) splitRanges(n int) {
	total := j.numberPieces(func(p *product) int {
		// As many pieces as pieceElems asks for, rounded up to a multiple
		// of n, so that runs of equal counts hold about equal rows.
		k := (p.w.Rows*j.cols + pieceElems - 1) / pieceElems
		k = min(p.w.Rows, (k+n-1)/n*n)
		return (p.w.Rows + k - 1) / k
	})
	j.nranges = min(n, total, maxRanges)
	for r := range j.nranges {
		j.ranges[r].Store(packRange(total*r/j.nranges, total*(r+1)/j.nranges))
	}
	j.remaining.Store(int64(total))
}

// splitChunks cuts each product into pieces of rows (chunks), about
// batchChunksPerThread per thread (one for one vector, when not split by
// ranges), claimed in any order from one counter.
func (j *job) splitChunks(n int) {
	per := batchChunksPerThread
	if j.tokens == 1 {
		per = 1
	}
	j.chunks = j.numberPieces(func(p *product) int { return max(1, chunkElems/j.cols, p.w.Rows/(per*n)) })
	j.remaining.Store(int64(j.chunks))
}

// numberPieces cuts product i into pieces of rowsOf(product i) rows,
// numbered in product order from pieceStart[i], and returns their count.
func (j *job) numberPieces(rowsOf func(p *product) int) int {
	total := 0
	for i := range j.np {
		p := &j.ps[i]
		j.pieceRows[i] = rowsOf(p)
		j.pieceStart[i] = total
		total += (p.w.Rows + j.pieceRows[i] - 1) / j.pieceRows[i]
	}
	j.pieceStart[j.np] = total
	return total
}

// A range of pieces not yet claimed, [lo, hi), is one word, so that its
// owner taking lo and a thief taking hi-1 never take the same piece.
func packRange(lo, hi int) uint64 { return uint64(lo)<<32 | uint64(hi) }

func unpackRange(v uint64) (lo, hi int) { return int(v >> 32), int(v & 0xffffffff) }

// claim takes the first piece of range r (the owner's end) or, with back,
// its last (a thief's), or reports that none is left.
func (j *job) claim(r int, back bool) (int, bool) {
	for {
		v := j.ranges[r].Load()
		lo, hi := unpackRange(v)
		if lo >= hi {
			return 0, false
		}
		k, rest := lo, packRange(lo+1, hi)
		if back {
			k, rest = hi-1, packRange(lo, hi-1)
		}
		if j.ranges[r].CompareAndSwap(v, rest) {
			return k, true
		}
	}
}

// workRanges computes the pieces of a split by ranges: the next run not
// yet owned, from its front, then what is left of the others, from their
// backs. A helper that never arrives leaves its run to the others.
func (j *job) workRanges() {
	me := int(j.arrivals.Add(1) - 1)
	var scratch *[]float32
	done := 0
	piece := func(k int) {
		if scratch == nil {
			scratch = j.getScratch()
		}
		j.piece(k, scratch)
		done++
	}
	if me < j.nranges {
		for k, ok := j.claim(me, false); ok; k, ok = j.claim(me, false) {
			piece(k)
		}
	}
	for d := 1; d <= j.nranges; d++ {
		r := (me + d) % j.nranges
		for k, ok := j.claim(r, true); ok; k, ok = j.claim(r, true) {
			piece(k)
		}
	}
	if scratch != nil {
		scratchPool.Put(scratch)
	}
	// One count per thread, not per piece: the counter's cache line is
	// shared by every thread.
	j.finished(done)
}

// piece computes piece k (numberPieces).
func (j *job) piece(k int, scratch *[]float32) {
	i := 0
	for k >= j.pieceStart[i+1] {
		i++
	}
	p := &j.ps[i]
	r0 := (k - j.pieceStart[i]) * j.pieceRows[i]
	j.guardedRows(p, r0, min(r0+j.pieceRows[i], p.w.Rows), scratch)
}

// finished counts n chunks, pieces or items as done, and wakes a parked
// caller when they were the last.
func (j *job) finished(n int) {
	if n > 0 && j.remaining.Add(int64(-n)) == 0 {
		j.mu.Lock()
		if j.parked {
			j.done.Signal()
		}
		j.mu.Unlock()
	}
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

	// Product i's pieces (chunks, or a split by ranges' pieces) are
	// numbered from pieceStart[i], pieceRows[i] rows each (numberPieces).
	// In a split by ranges, ranges[r] holds the pieces of run r not yet
	// claimed (packRange), and arrivals numbers the threads as they
	// enter, each owning the run of its number.
	pieceRows  [maxProducts]int
	pieceStart [maxProducts + 1]int
	nranges    int
	arrivals   atomic.Int32
	ranges     [maxRanges]atomic.Uint64
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
// handed job may still sit in a helper's mailbox for it to pick up.
func (j *job) unref() {
	if j.refs.Add(-1) == 0 {
		*j = job{}
		jobPool.Put(j)
	}
}

// hand offers the job to up to n helpers, each through its mailbox. A
// helper that takes it holds a reference until it leaves work. A helper
// whose mailbox is still full (it has not taken an earlier job yet, this
// caller's or another's) is passed over; the threads that do come take
// the pieces of those that do not.
func (j *job) hand(n int) {
	if n < 1 {
		return
	}
	for _, h := range pool.ensure(n) {
		if n == 0 {
			return
		}
		j.refs.Add(1) // before the hand-off: the helper may finish at once
		if !h.slot.CompareAndSwap(nil, j) {
			j.refs.Add(-1)
			continue
		}
		n--
		// After the slot is set: a helper that parks from now on finds
		// the job when it looks at its slot, and one parked before is woken.
		if h.parked.Load() {
			select {
			case h.wake <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	}
}

// work claims and computes chunks until none is left.
func (j *job) work() {
	if j.task != nil {
		j.workTasks()
		return
	}
	if j.nranges > 0 {
		j.workRanges()
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
		j.piece(c, scratch)
		j.finished(1)
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
		j.finished(1)
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
// A worker that finishes a job polls its mailbox for the next one for
// workerSpin before parking. The matrix products of a forward pass come
// back to back, and waking a parked goroutine on the other CPU took 70 µs
// or more on the 2-vCPU virtual machine this was measured on, longer than
// a whole 768x768 product, while a polling worker picks a job up within a
// microsecond: with parked workers (or a goroutine started per call) the
// parallel products of BenchmarkDispatch were no faster than serial ones;
// with polling workers, up to 2.8x. The poll checks the mailbox between
// PAUSEs (spinUntil) and yields (runtime.Gosched) every few microseconds,
// so other goroutines keep running, and ends after workerSpin without
// work, so an idle process burns no CPU.
//
// Each worker has a mailbox of its own, a cache line that only its caller
// writes and it reads, rather than one channel for all: a buffered send
// took the caller about 0.5 µs of a 768x2048 product's 23, the lock and
// count of the channel bouncing between the caller's core and the polling
// worker's; the mailbox's compare-and-swap about 0.25 µs. Whole decodes
// on 2 threads ran 0.6-2.1 % faster (docs/performance.md, § Activations,
// and three more ways to split a step).
type workerPool struct {
	mu      sync.Mutex                // held while workers are started
	helpers atomic.Pointer[[]*helper] // the workers' mailboxes, in start order
}

// helper is one worker's mailbox.
type helper struct {
	slot   atomic.Pointer[job] // the job handed to it and not yet taken
	parked atomic.Bool         // it is waiting on wake
	wake   chan struct{}       // capacity 1: a parked worker's wake-up
	_      [104]byte           // a cache line of its own (128 bytes in all)
}

var pool workerPool

// ensure starts workers until there are at least n, and returns their
// mailboxes.
func (p *workerPool) ensure(n int) []*helper {
	if hs := p.helpers.Load(); hs != nil && len(*hs) >= n {
		return *hs
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var hs []*helper
	if old := p.helpers.Load(); old != nil {
		hs = append(hs, *old...)
	}
	for len(hs) < n {
		h := &helper{wake: make(chan struct{}, 1)}
		hs = append(hs, h)
		go h.run()
	}
	p.helpers.Store(&hs)
	return hs
}

func (h *helper) run() {
	debug.SetPanicOnFault(true) // see catchFault
	for {
		j := h.next()
		j.work()
		j.unref()
	}
}

// next returns the next job handed to h, polling for up to workerSpin,
// then parking.
func (h *helper) next() *job {
	deadline := time.Now().Add(time.Duration(workerSpin.Load()))
	for {
		if spinUntil(func() bool { return h.slot.Load() != nil }) {
			return h.slot.Swap(nil)
		}
		if !time.Now().Before(deadline) {
			return h.park()
		}
		runtime.Gosched()
	}
}

// park waits for a job. parked is set before the slot is looked at, and
// hand sets the slot before it looks at parked, so that either this finds
// the job or hand sends the wake-up (a stale one only costs a look).
func (h *helper) park() *job {
	h.parked.Store(true)
	defer h.parked.Store(false)
	for {
		if j := h.slot.Swap(nil); j != nil {
			return j
		}
		<-h.wake
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
