// Package batch runs the forward passes of many sessions together, step by
// step: at each step it gathers the pending tokens of every active session
// (a decode token, or the next chunk of a prompt) and runs them through the
// layers as one batch (model.LayersMulti), so that each weight matrix is
// streamed once per step however many sessions are active. Decode on a CPU
// is bound by memory bandwidth, so a step of 16 tokens costs little more
// than a step of one. Each session's results are bit-identical to running
// it alone.
//
// A long prompt is cut into chunks of at most Config.Chunk tokens, one per
// step, so that it does not stall the other sessions' decode: a smaller
// chunk keeps their inter-token latency low while the prompt is read; a
// larger one reads the prompt in fewer steps (faster time to first token
// for it) but makes every other session wait longer at each of them.
package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/model"
)

// DefaultChunk is Config.Chunk's default: the prompt tokens one session
// runs per step.
const DefaultChunk = 64

// DefaultMaxTokens is Config.MaxTokens's default.
const DefaultMaxTokens = 512

// Config sets up a Batcher.
type Config struct {
	Model *model.Model
	// Chunk bounds the tokens of one session per step (DefaultChunk).
	Chunk int
	// MaxTokens bounds the tokens of one step, over all sessions
	// (DefaultMaxTokens); a step takes at least one session's chunk.
	MaxTokens int
	// Guard, when set, runs each step's computation (a stage passes
	// mapped.Guard, so that a fault on mapped weights fails the step's
	// requests with an error instead of crashing the process).
	Guard func(func() error) error
}

// ErrClosed: the batcher was closed.
var ErrClosed = errors.New("batch: closed")

// Batcher runs sessions' forward passes in shared steps. It is safe for
// concurrent use; each session may have one request in flight.
type Batcher struct {
	cfg Config

	mu      sync.Mutex
	pending []*job
	busy    map[*model.State]bool
	closed  bool
	wake    chan struct{}
	done    chan struct{}

	steps, tokens atomic.Uint64
	busyNs        atomic.Int64
}

// job is one request: n tokens of a session at pos, of which done have run.
type job struct {
	ctx    context.Context
	st     *model.State
	x      []float32 // n x Dim, updated in place
	pos, n int
	logits []float32 // when not nil: the logits after the last heads tokens
	heads  int
	done   int
	next   int // positions of this step, set by take
	err    error
	fin    chan struct{}
}

// New starts a batcher; Close stops it.
func New(cfg Config) (*Batcher, error) {
	if cfg.Model == nil {
		return nil, errors.New("batch: no model")
	}
	if cfg.Chunk == 0 {
		cfg.Chunk = DefaultChunk
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.Guard == nil {
		cfg.Guard = func(f func() error) error { return f() }
	}
	if cfg.Chunk < 1 || cfg.MaxTokens < cfg.Chunk {
		return nil, fmt.Errorf("batch: chunk %d and step size %d: want 1 <= chunk <= step", cfg.Chunk, cfg.MaxTokens)
	}
	b := &Batcher{cfg: cfg, busy: map[*model.State]bool{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go b.run()
	return b, nil
}

// Run runs the layers of st on the n tokens whose hidden states are x
// (n x Dim, updated in place) at positions pos .. pos+n-1, in the shared
// steps, and returns when they are done. When logits is not nil (the model
// holds the classifier), it receives the logits after each of the last
// len(logits)/Vocab tokens (1 to n). A cancelled ctx abandons the request at
// the next step; positions already run stay cached.
func (b *Batcher) Run(ctx context.Context, st *model.State, x []float32, pos, n int, logits []float32) error {
	c := b.cfg.Model.Config()
	if n < 1 || len(x) != n*c.Dim {
		return fmt.Errorf("batch: %d hidden values for %d tokens of width %d", len(x), n, c.Dim)
	}
	heads := len(logits) / c.VocabSize
	if logits != nil && (heads < 1 || heads > n || len(logits) != heads*c.VocabSize) {
		return fmt.Errorf("batch: logits buffer of %d values: want 1 to %d rows of %d", len(logits), n, c.VocabSize)
	}
	j := &job{ctx: ctx, st: st, x: x, pos: pos, n: n, logits: logits, heads: heads, fin: make(chan struct{})}
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return ErrClosed
	case b.busy[st]:
		b.mu.Unlock()
		return errors.New("batch: the session already has a request in flight")
	}
	b.busy[st] = true
	b.pending = append(b.pending, j)
	select { // under mu: Close closes wake under it
	case b.wake <- struct{}{}:
	default:
	}
	b.mu.Unlock()
	<-j.fin
	return j.err
}

// Close stops the batcher: requests in flight fail with ErrClosed.
func (b *Batcher) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.wake)
	b.mu.Unlock()
	<-b.done
	return nil
}

// Stats are a batcher's counters since it started.
type Stats struct {
	Steps, Tokens uint64
	Busy          time.Duration // time spent computing steps
}

// Stats returns the counters.
func (b *Batcher) Stats() Stats {
	return Stats{Steps: b.steps.Load(), Tokens: b.tokens.Load(), Busy: time.Duration(b.busyNs.Load())}
}

func (b *Batcher) run() {
	defer close(b.done)
	var sc model.Scratch
	var hx, hl []float32
	recent := map[*model.State]uint64{} // sessions by the last step they were in
	var step uint64
	var lastStep time.Duration // how long it took
	for range b.wake {
		for {
			b.gather(expected(recent, step), lastStep)
			active := b.take()
			if len(active) == 0 {
				break
			}
			t0 := time.Now()
			step++
			for _, j := range active {
				recent[j.st] = step
			}
			b.step(&sc, active, &hx, &hl)
			lastStep = time.Since(t0)
			b.busyNs.Add(int64(lastStep))
		}
	}
	b.mu.Lock()
	for _, j := range b.pending {
		j.err = ErrClosed
		close(j.fin)
	}
	b.pending = nil
	b.mu.Unlock()
}

// expected is how many sessions ran in the last two steps (forgetting
// older ones): those likely to send a request for the next.
func expected(recent map[*model.State]uint64, step uint64) int {
	n := 0
	for st, last := range recent {
		if last+2 < step {
			delete(recent, st)
			continue
		}
		n++
	}
	return n
}

// gather waits briefly for the sessions of the last steps to send their
// next request, so that steps do not settle into running one session after
// another (A alone, then B, who arrived during A, then A again): until as
// many requests are pending, for at most a tenth of the last step's time
// (and 2 ms). A session's next request comes within microseconds of its
// result, so the wait costs little, and a session that does not come back
// costs at most that, for two steps.
func (b *Batcher) gather(returning int, last time.Duration) {
	if returning < 2 {
		return
	}
	deadline := time.Now().Add(min(last/10, 2*time.Millisecond))
	for {
		b.mu.Lock()
		n := len(b.pending)
		b.mu.Unlock()
		if n >= returning || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// take returns the jobs of this step, oldest first, within MaxTokens;
// cancelled ones are finished here.
//
// Prompt chunks share what is left of the step after the decode tokens,
// and while sessions decode their chunks together take no more positions
// than half the step's decode tokens (and at least minPrefill): a step's
// cost grows with its positions (and a long prompt's attention with its
// length), so a long prompt arriving under load raises the others'
// inter-token time by well under 2x, and is read at the pace of their
// decode; alone, it goes Chunk positions a step.
func (b *Batcher) take() []*job {
	b.mu.Lock()
	defer b.mu.Unlock()
	var active, keep []*job
	budget := b.cfg.MaxTokens
	decodes := 0
	for _, j := range b.pending {
		if err := j.ctx.Err(); err != nil {
			b.finish(j, err)
			continue
		}
		keep = append(keep, j)
		if j.n-j.done == 1 && budget > 0 && !b.closed {
			j.next = 1
			active = append(active, j)
			budget--
			decodes++
		}
	}
	b.pending = keep
	prefill := budget
	if decodes > 0 {
		prefill = min(budget, max(decodes/2, minPrefill))
	}
	for _, j := range keep {
		if j.n-j.done == 1 || b.closed {
			continue
		}
		n := min(j.n-j.done, b.cfg.Chunk, prefill)
		if n < 1 {
			break
		}
		j.next = n
		active = append(active, j)
		prefill -= n
	}
	return active
}

// minPrefill is the least positions of prompts a step takes beside the
// decode tokens: a prompt is read however many sessions decode.
const minPrefill = 8

// finish completes j; the caller holds mu.
func (b *Batcher) finish(j *job, err error) {
	j.err = err
	delete(b.busy, j.st)
	close(j.fin)
}

// step runs one chunk of every active job, and the classifier for those
// that end in this step.
func (b *Batcher) step(sc *model.Scratch, active []*job, hx, hl *[]float32) {
	m := b.cfg.Model
	d := m.Config().Dim
	items := make([]model.Item, 0, len(active))
	var run []*job
	for _, j := range active {
		n := j.next
		// Blocks are taken per session, so a session past the budget
		// fails alone and the others run.
		if err := j.st.Reserve(j.pos + j.done + n); err != nil {
			b.end(j, err)
			continue
		}
		items = append(items, model.Item{State: j.st, X: j.x[j.done*d : (j.done+n)*d], Pos: j.pos + j.done, N: n})
		run = append(run, j)
	}
	if len(items) == 0 {
		return
	}
	err := b.cfg.Guard(func() error { return m.LayersMulti(sc, items) })
	b.steps.Add(1)
	var ending []*job
	for i, j := range run {
		if err != nil {
			b.end(j, err)
			continue
		}
		b.tokens.Add(uint64(items[i].N))
		j.done += items[i].N
		if j.done == j.n {
			ending = append(ending, j)
		}
	}
	b.heads(ending, hx, hl)
}

// heads computes the logits of the jobs that end in this step, as one
// batch, and finishes them.
func (b *Batcher) heads(ending []*job, hx, hl *[]float32) {
	m := b.cfg.Model
	c := m.Config()
	var want []*job
	for _, j := range ending {
		if j.logits == nil {
			b.end(j, nil)
			continue
		}
		want = append(want, j)
	}
	if len(want) == 0 {
		return
	}
	n := 0
	for _, j := range want {
		n += j.heads
	}
	*hx, *hl = grow(*hx, n*c.Dim), grow(*hl, n*c.VocabSize)
	off := 0
	for _, j := range want {
		off += copy((*hx)[off:], j.x[(j.n-j.heads)*c.Dim:j.n*c.Dim])
	}
	err := b.cfg.Guard(func() error { return m.HeadBatch((*hx)[:n*c.Dim], (*hl)[:n*c.VocabSize], n) })
	off = 0
	for _, j := range want {
		if err == nil {
			copy(j.logits, (*hl)[off:off+j.heads*c.VocabSize])
		}
		off += j.heads * c.VocabSize
		b.end(j, err)
	}
}

// end removes j from the pending jobs and finishes it.
func (b *Batcher) end(j *job, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, p := range b.pending {
		if p == j {
			b.pending = append(b.pending[:i], b.pending[i+1:]...)
			break
		}
	}
	b.finish(j, err)
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}
