package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/wire"
)

// Why a frame was abandoned: the cause of its connection's context or of
// its session's epoch.
var (
	errHeadGone     = errors.New("its head disconnected")
	errUpstreamGone = errors.New("the upstream connection that carried it closed")
	errClosedByHead = errors.New("its head closed the session")
	errResetByHead  = errors.New("its head reset the session")
)

// inbox is what one handshaken connection has sent and the stage has not
// finished: a bounded queue of frames, computed in order by one worker,
// while the connection's reader goes on reading. The reader therefore
// notices at once when the peer hangs up, or closes or resets a session,
// and cancels the work that is no longer wanted.
//
// A Ping that arrives while frames are queued or computing is answered
// when the job running ends, as a stage computing inline always answered:
// a head that hears nothing from a stage computing a long frame without
// heartbeats (Config.Heartbeat < 0) still takes it for hung, which is what
// turning heartbeats off means.
type inbox struct {
	ctx    context.Context // cancelled, with a cause, when the connection ends
	cancel context.CancelCauseFunc
	jobs   chan *job
	frames atomic.Int64 // queued or computing
	tokens atomic.Int64 // their tokens
	done   chan struct{}

	mu    sync.Mutex
	pings []uint64 // request ids of the Pings deferred to the end of the job running
}

// maxDeferredPings bounds the Pings held for the end of a job; more are
// answered at once (a head has one outstanding; this only bounds a flood).
const maxDeferredPings = 16

// job is one frame to compute (or a Route to dial), with what decides
// whether it is still wanted.
type job struct {
	f        wire.Frame // a copy: the Framer reuses its own
	sess     *session   // nil for a Route
	ep       *epoch     // the session's epoch when the frame arrived
	in       *inbox     // the connection's: its context ends with the connection
	finished bool
}

// finish takes the job out of its connection's counts, once: just before
// its answer goes out, so that the next frame, which its peer may send as
// soon as that answer arrives (through the whole chain, when the answer
// goes downstream), is never refused for a job that is in effect done.
func (j *job) finish() {
	if !j.finished {
		j.finished = true
		j.in.tokens.Add(-int64(j.f.Tokens))
		j.in.frames.Add(-1)
	}
}

func newInbox(size int) *inbox {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &inbox{ctx: ctx, cancel: cancel, jobs: make(chan *job, size), done: make(chan struct{})}
}

// work runs the jobs until the inbox is stopped: each session's frames in
// order, on a lane of their own, and different sessions' frames at once, so
// that the stage's batcher runs them in shared steps; a Route (no session)
// runs here, before the jobs that follow it. After each job it answers the
// Pings deferred while it ran (with answer; nil for a connection that may
// not ping). It returns once every lane has ended.
func (in *inbox) work(run func(*job), answer func(req uint64)) {
	defer close(in.done)
	var (
		mu    sync.Mutex // lanes, and a lane's emptiness when it ends
		lanes = map[*session]chan *job{}
		wg    sync.WaitGroup
	)
	done := func(j *job) {
		j.finish()
		for _, req := range in.takePings() {
			if answer != nil {
				answer(req)
			}
		}
	}
	lane := func(sess *session, jobs chan *job) {
		defer wg.Done()
		for {
			mu.Lock()
			select {
			case j := <-jobs:
				mu.Unlock()
				run(j)
				done(j)
			default: // drained: the lane ends, and the next frame starts another
				delete(lanes, sess)
				mu.Unlock()
				return
			}
		}
	}
	for j := range in.jobs {
		if j.sess == nil {
			run(j)
			done(j)
			continue
		}
		mu.Lock()
		jobs, ok := lanes[j.sess]
		if !ok {
			jobs = make(chan *job, cap(in.jobs)+1)
			lanes[j.sess] = jobs
			wg.Add(1)
			go lane(j.sess, jobs)
		}
		jobs <- j // never blocks: a lane holds at most the connection's queue
		mu.Unlock()
	}
	wg.Wait()
}

// takePings returns the Pings deferred until now.
func (in *inbox) takePings() []uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	pings := in.pings
	in.pings = nil
	return pings
}

// deferPing holds a Ping's answer until the job running ends; false when
// no frame is queued or computing (or too many Pings wait), and the caller
// answers it now. A Ping deferred while frames > 0 is taken by the worker
// after the job that decrements frames, so none is left unanswered.
func (in *inbox) deferPing(req uint64) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.frames.Load() == 0 || len(in.pings) >= maxDeferredPings {
		return false
	}
	in.pings = append(in.pings, req)
	return true
}

// stop cancels the connection's work with cause and waits until the
// worker has abandoned or finished what it was computing: once it returns
// no frame of the connection is computing, so the handler may return.
func (in *inbox) stop(cause error) {
	in.cancel(cause)
	close(in.jobs)
	<-in.done
}

// stopped returns why the job is no longer wanted, nil while it is.
func (j *job) stopped() error {
	if err := context.Cause(j.in.ctx); err != nil {
		return err
	}
	if j.ep != nil {
		return context.Cause(j.ep.ctx)
	}
	return nil
}

// admit checks a Prefill or Decode frame against the per-frame limits and
// queues it for the session it names. from names the sender in refusals.
func (s *Server) admit(in *inbox, from string, f *wire.Frame) error {
	if err := s.checkPrefill(f); err != nil {
		s.refusals.prefill.Add(1)
		return err
	}
	sess, err := s.lookup(f.Session)
	if err != nil {
		return err
	}
	return s.enqueue(in, from, f, sess)
}

// checkPrefill refuses a Prefill of more than MaxPrefill tokens, and, at
// the last stage, one asking for the logits of more positions than a
// Result frame may carry: they would be computed (and held, vocab floats a
// position) only to fail when sent.
func (s *Server) checkPrefill(f *wire.Frame) error {
	if f.Kind != wire.KindPrefill {
		return nil
	}
	if int(f.Tokens) > s.cfg.MaxPrefill {
		return fmt.Errorf("a prefill of %d tokens is over this stage's limit of %d tokens a frame (--max-prefill); send it as several Prefill frames: %w",
			f.Tokens, s.cfg.MaxPrefill, wire.ErrLimit)
	}
	if f.Flags&wire.FlagAllLogits == 0 || !s.cfg.Model.W.HasHead() {
		return nil
	}
	vocab, limit := int64(s.cfg.Model.Config().VocabSize), int64(wire.DefaultLimits().MaxPayload)
	if size := int64(f.Tokens) * vocab * 4; size > limit {
		return fmt.Errorf("the logits of all %d positions of this prefill would be a %d-byte Result, over the wire's %d-byte limit: ask for at most %d positions a frame: %w",
			f.Tokens, size, limit, limit/(vocab*4), wire.ErrLimit)
	}
	return nil
}

// enqueue queues a copy of f, or refuses it when the connection already has
// MaxQueue frames or MaxInFlight tokens not finished. Only the connection's
// reader calls it, so the checks and the additions cannot race each other.
func (s *Server) enqueue(in *inbox, from string, f *wire.Frame, sess *session) error {
	n := int64(f.Tokens)
	if q := in.frames.Load(); q >= int64(s.cfg.MaxQueue) {
		s.refusals.queueFull.Add(1)
		return fmt.Errorf("%s has %d frames this stage has not finished, its limit (--max-queue): %w", from, q, wire.ErrLimit)
	}
	if t := in.tokens.Load(); t+n > int64(s.cfg.MaxInFlight) {
		s.refusals.inFlight.Add(1)
		return fmt.Errorf("%s has %d tokens in flight and this frame brings %d, over its limit of %d (--max-inflight-tokens): %w",
			from, t, n, s.cfg.MaxInFlight, wire.ErrLimit)
	}
	j := &job{f: *f, sess: sess, in: in}
	j.f.Payload = bytes.Clone(f.Payload)
	if sess != nil {
		j.ep = sess.epoch.Load()
	}
	in.frames.Add(1)
	in.tokens.Add(n)
	in.jobs <- j // never blocks: the channel holds MaxQueue and frames <= MaxQueue
	return nil
}

// idleError is a connection closed for sending nothing for the idle timeout.
type idleError struct{ after time.Duration }

func (e *idleError) Error() string {
	return fmt.Sprintf("closing the connection: nothing received for %v while it holds no session, this stage's limit (--idle-timeout)", e.after)
}
func (e *idleError) Unwrap() error { return wire.ErrLimit }

// nextFrame reads p's next frame, waiting at most idle for it to begin
// (forever when idle is 0). Once its first byte is in, the Framer bounds
// the rest by the timeout.
func (s *Server) nextFrame(p *peer, idle time.Duration) (*wire.Frame, error) {
	mark := p.rx.n
	if idle > 0 {
		p.conn.SetReadDeadline(time.Now().Add(idle))
	}
	f, err := p.fr.ReadFrame()
	if err != nil && idle > 0 && isTimeout(err) && p.rx.n == mark {
		return nil, &idleError{after: idle}
	}
	if err != nil && isTimeout(err) {
		err = &trickledError{err: err, bytes: p.rx.n - mark, limit: s.cfg.Timeout}
	}
	return f, err
}

// trickledError is a frame that began and did not end within the timeout.
type trickledError struct {
	err   error
	bytes int64
	limit time.Duration
}

func (e *trickledError) Error() string {
	return fmt.Sprintf("a frame took longer than this stage's limit of %v to arrive (--timeout; %d bytes came): %v", e.limit, e.bytes, e.err)
}
func (e *trickledError) Unwrap() error { return wire.ErrLimit }

// idleFor is how long the head's connection may stay silent: the idle
// timeout while it holds no session, unbounded while it holds one.
func (s *Server) idleFor(hc *headConn) time.Duration {
	if s.cfg.IdleTimeout <= 0 {
		return 0
	}
	s.mu.Lock()
	n := hc.sessions
	s.mu.Unlock()
	if n > 0 {
		return 0
	}
	return s.cfg.IdleTimeout
}

// readEnded reports why a connection's reader stopped: to the peer when it
// can still be told (an idle connection, a trickled or broken frame), and
// in the log; the idle and trickled ends are counted.
func (s *Server) readEnded(p *peer, what string, err error) {
	var idle *idleError
	var trickled *trickledError
	switch {
	case errors.As(err, &idle):
		if n := s.refusals.idle.Add(1); sparse(n) {
			s.log.Info("idle connection closed", "session", 0, "peer", p.name, "idle_timeout", idle.after.String(), "closed_so_far", n)
		}
	case errors.As(err, &trickled):
		if n := s.refusals.trickled.Add(1); sparse(n) {
			s.log.Warn("trickling frame cut off", "session", 0, "peer", p.name, "timeout", s.cfg.Timeout.String(), "bytes", trickled.bytes, "cut_so_far", n)
		}
	case isClosedConn(err):
		s.log.Info(what+" disconnected", "session", 0, "peer", p.name)
		return
	default:
		s.log.Warn(what+" connection failed", "session", 0, "peer", p.name, "err", err)
	}
	p.sendError(wire.Meta{}, err)
}
