package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/tensor"
)

// A Crew keeps helper goroutines in one parallel region across a sequence
// of calls, such as the products and attention of a forward pass: each
// call publishes its job to members already polling for it, instead of
// handing a new job through their mailboxes. Its MatMuls, MatMul and
// Parallel give exactly the results of the package functions, with the
// same split into pieces; only the hand-off differs.
//
// Why: a decode token of the stories110M shape makes 60 parallel calls in
// its layers. Through the mailboxes each call's job is handed and picked up
// anew, and a helper done with one call polls its mailbox, parks after
// workerSpin, and is woken again. In a crew, whole decodes on 2 threads
// (positions 0-127 alternated token by token in one process) ran 1.5-5.3 %
// faster than through the mailboxes, and 0.9-2.3 % faster (once 0.7 %
// slower) with attention split finer as well (docs/performance.md, § A
// crew per forward pass).
//
// The caller never waits for a member: a step waits only for the pieces
// members have claimed, so a helper busy elsewhere (another caller's job
// or crew) or slow to start leaves its share to the threads present, as
// with the mailboxes. Members join when they take the crew from their
// mailbox, and leave when it ends or after workerSpin without a step.
//
// A Crew is used by one goroutine, from BeginCrew to End. A nil *Crew is
// valid: its methods are the package functions. While a crew lives, its
// members do not look at their mailboxes: a call made without the crew
// (the package functions) finds them busy and runs on its caller alone.
// That is why a crew's products also quantize and pack their input in the
// crew: through the package Parallel, a 128-token Q4_0 prefill's packing
// ran on one thread and the prefill 6-10 % slower.
type Crew struct {
	seq   atomic.Int64        // steps published so far
	cur   atomic.Pointer[job] // the latest step
	ended atomic.Bool
	_     [112]byte // members poll the words above: keep the caller's below off their line

	carrier *job         // handed to helpers; its references keep the crew alive
	joined  atomic.Int32 // helpers handed the crew and not yet gone
	want    int32        // helpers asked for: Threads()-1 at BeginCrew

	// steps holds this use's step jobs, step k in steps[k]. A job is not
	// reused until the crew is recycled, when no member can still hold
	// it: a member that lags may take an old step, whose pieces are all
	// claimed, and find nothing to do.
	steps []*job
	used  int
}

var crewPool = sync.Pool{New: func() any { return new(Crew) }}

// BeginCrew starts a crew of the kernels' helpers for the calls to come,
// or returns nil when the kernels run on one thread. End must be called.
func BeginCrew() *Crew {
	want := Threads() - 1
	if want < 1 {
		return nil
	}
	c := crewPool.Get().(*Crew)
	c.want = int32(want)
	c.carrier = newJob()
	c.carrier.crew = c
	c.invite(want)
	return c
}

// End ends the crew: members leave once the step they are in is done.
// The crew must not be used after.
func (c *Crew) End() {
	if c == nil {
		return
	}
	c.ended.Store(true)
	c.carrier.unref()
}

// MatMuls is the package MatMuls, in the crew's region.
func (c *Crew) MatMuls(ps []Product, x []float32, n int) { matMuls(c, ps, x, n) }

// MatMul is the package MatMul, in the crew's region.
func (c *Crew) MatMul(out []float32, w *tensor.Tensor, x []float32, n int) {
	matMuls(c, []Product{{Out: out, W: w}}, x, n)
}

// Parallel is the package Parallel, in the crew's region.
func (c *Crew) Parallel(n, maxWorkers int, f func(worker, i int)) { parallel(c, n, maxWorkers, f) }

// newJob returns a zeroed job for one call: from the pool without a crew,
// else the crew's next step job.
func (c *Crew) newJob() *job {
	if c == nil {
		return newJob()
	}
	if c.used == len(c.steps) {
		c.steps = append(c.steps, new(job))
	}
	j := c.steps[c.used]
	c.used++
	return j
}

// dropJob ends the caller's use of a call's job: the crew keeps its jobs
// until it is recycled.
func (c *Crew) dropJob(j *job) {
	if c == nil {
		j.unref()
	}
}

// offer makes j available to up to n helpers: through their mailboxes
// without a crew, else by publishing it to the members, inviting helpers
// again when fewer than asked for are members.
func (c *Crew) offer(j *job, n int) {
	if c == nil {
		j.hand(n)
		return
	}
	if n < 1 {
		return
	}
	c.cur.Store(j)
	c.seq.Add(1)
	if short := min(int32(n), c.want) - c.joined.Load(); short > 0 {
		c.invite(int(short))
	}
}

// invite hands the crew's carrier to up to n helpers whose mailboxes are
// empty, as job.hand does.
func (c *Crew) invite(n int) {
	for _, h := range pool.ensure(int(c.want)) {
		if n == 0 {
			return
		}
		c.carrier.refs.Add(1)
		c.joined.Add(1)
		if !h.slot.CompareAndSwap(nil, c.carrier) {
			c.carrier.refs.Add(-1)
			c.joined.Add(-1)
			continue
		}
		n--
		if h.parked.Load() {
			select {
			case h.wake <- struct{}{}:
			default:
			}
		}
	}
}

// serve is a member's loop, on a helper that took the carrier: work on
// each step published, from the latest at joining, until the crew ends
// or no step comes for workerSpin.
func (c *Crew) serve() {
	defer c.joined.Add(-1)
	seen := int64(0)
	idle := time.Now()
	for polls := 0; ; polls++ {
		if c.ended.Load() {
			return
		}
		if s := c.seq.Load(); s != seen {
			seen = s
			c.cur.Load().work()
			idle, polls = time.Now(), 0
			continue
		}
		spinPause(1)
		if polls%crewPolls == crewPolls-1 {
			// Look at the steps once more before leaving: the clock may
			// have run on while this goroutine was off its CPU.
			if time.Since(idle) > time.Duration(workerSpin.Load()) && c.seq.Load() == seen {
				return
			}
			runtime.Gosched()
		}
	}
}

// crewPolls is how often a member looks at the clock and yields: polls
// about 20 ns apart (one PAUSE, 18 ns on the Zen 5 measured), so every
// 10 µs or so.
const crewPolls = 512

// recycle returns the crew to the pool once its carrier's last holder is
// gone, when no member can reach it.
func (c *Crew) recycle() {
	for _, j := range c.steps[:c.used] {
		*j = job{}
	}
	c.used = 0
	c.seq.Store(0)
	c.cur.Store(nil)
	c.ended.Store(false)
	c.carrier = nil
	crewPool.Put(c)
}
