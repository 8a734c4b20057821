package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/wire"
)

// errSession classifies unknown-session and ordering failures: Error
// frames carry them as CodeSession.
var errSession = wire.ErrSession

// errNotOwner is a frame naming a session that another connection owns.
// It is answered on the connection that sent it, never on the owner's.
var errNotOwner = fmt.Errorf("not this connection's session: %w", errSession)

// headConn is a head's connection, with the downstream link this stage
// opened on that head's behalf (nil at the last stage).
type headConn struct {
	*peer
	in       *inbox // frames not yet finished; its context ends with the connection
	identity string // who the head is for the per-identity quota (identityOf)
	sessions int    // sessions it opened that are open, under Server.mu
	// down and downEnc are set by the Route the worker runs and read by
	// the worker's frames, and after it stopped.
	down    *peer
	downEnc wire.Encoding
}

// session is one conversation's KV cache for this stage's layers. Frames of
// one session arrive in order from one place, but a head's Reset or Close may
// race with them, hence the lock.
type session struct {
	mu   sync.Mutex
	id   uint64
	head *headConn // the head that opened it: the only one that may drive it
	// up is the upstream connection that carries it, bound by its first
	// frame from upstream (a head routes each of its chains over a
	// connection of its own) and unbound by the head's Reset. Frames for
	// the session from any other upstream connection are refused.
	up *peer
	// epoch is cancelled when the head resets or closes the session or
	// disconnects; a frame that arrived in an earlier epoch is abandoned.
	epoch  atomic.Pointer[epoch]
	closed bool // its KV blocks went back to the pool: no frame may run, under mu
	state  *model.State
	x      []float32 // tokens x dim activations
	logits []float32 // tokens x vocab
	ids    []uint32
}

// epoch is one stretch of a session between its head's Resets.
type epoch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// newEpoch starts an epoch that also ends when the head's connection does.
func newEpoch(hc *headConn) *epoch {
	ctx, cancel := context.WithCancelCause(hc.in.ctx)
	return &epoch{ctx: ctx, cancel: cancel}
}

func (s *Server) openSession(hc *headConn, id uint64) error {
	if err := s.damage(); err != nil {
		return err
	}
	s.mu.Lock()
	old, ok := s.sessions[id]
	if ok {
		s.mu.Unlock()
		if old.head != hc {
			return fmt.Errorf("session %d belongs to another head: %w", id, errSession)
		}
		old.reset()
		return nil
	}
	defer s.mu.Unlock()
	if err := s.admitSession(hc); err != nil {
		return err
	}
	w := s.cfg.Model.W
	st, err := s.cfg.Model.NewStateIn(w.First, w.Last, s.kv)
	if err != nil {
		return err
	}
	sess := &session{id: id, head: hc, state: st}
	sess.epoch.Store(newEpoch(hc))
	s.sessions[id] = sess
	hc.sessions++
	s.identities[hc.identity]++
	s.log.Info("session opened", "session", id, "peer", hc.name, "sessions", len(s.sessions), "identity", hc.identity)
	return nil
}

// admitSession checks the session quotas for a new session of hc: the
// stage's, the connection's and the identity's. The caller holds s.mu.
func (s *Server) admitSession(hc *headConn) error {
	switch n := s.identities[hc.identity]; {
	case len(s.sessions) >= s.cfg.MaxSessions:
		s.refusals.sessions.Add(1)
		return fmt.Errorf("stage holds %d sessions, its limit (--max-sessions): %w", len(s.sessions), errSession)
	case hc.sessions >= s.cfg.MaxSessionsPerConn:
		s.refusals.sessionsPerConn.Add(1)
		return fmt.Errorf("%s holds %d sessions, its limit (--max-sessions-per-conn): %w", hc.name, hc.sessions, errSession)
	case n >= s.cfg.MaxSessionsPerIdentity:
		s.refusals.sessionsPerIdentity.Add(1)
		return fmt.Errorf("%s holds %d sessions over its connections, its limit (--max-sessions-per-identity): %w", hc.identity, n, errSession)
	}
	return nil
}

// release gives the session's KV blocks back to the pool, for good.
func (sess *session) release() {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.closed = true
	sess.state.Release()
}

// reset clears the session for its head's Reset. Frames that arrived
// before it are abandoned (the one computing within a chunk), so the
// state is cleared only after them, as the head ordered.
func (sess *session) reset() {
	sess.epoch.Load().cancel(errResetByHead)
	sess.mu.Lock()
	defer sess.mu.Unlock()
	sess.state.Reset()
	sess.up = nil
	sess.epoch.Store(newEpoch(sess.head))
}

// forget removes a session of hc and its place in the quotas; the caller
// holds s.mu.
func (s *Server) forget(hc *headConn, id uint64) {
	if sess := s.sessions[id]; sess != nil {
		// Its frames are being abandoned (its epoch ended); the blocks go
		// back once the one computing, which holds sess.mu, has stopped.
		go sess.release()
	}
	delete(s.sessions, id)
	hc.sessions--
	if s.identities[hc.identity]--; s.identities[hc.identity] <= 0 {
		delete(s.identities, hc.identity)
	}
}

// closeSession ends a session for its head's Close, abandoning its frames
// queued or computing.
func (s *Server) closeSession(hc *headConn, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.sessions[id]; ok && sess.head == hc {
		s.forget(hc, id)
		sess.epoch.Load().cancel(errClosedByHead)
		s.log.Info("session closed", "session", id, "peer", hc.name, "sessions", len(s.sessions))
	}
}

// dropHead forgets every session a departed head opened (their epochs
// ended with its connection's context).
func (s *Server) dropHead(hc *headConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sess := range s.sessions {
		if sess.head == hc {
			s.forget(hc, id)
			s.log.Info("session closed: its head disconnected", "session", id, "peer", hc.name, "sessions", len(s.sessions))
		}
	}
}

func (s *Server) lookup(id uint64) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return nil, fmt.Errorf("stage %q has no session %d (never opened, or closed): %w", s.cfg.Name, id, errSession)
	}
	return sess, nil
}

func metaOf(f *wire.Frame) wire.Meta {
	return wire.Meta{Session: f.Session, Request: f.Request, Start: f.Start}
}

// serveHead reads a head's frames until it disconnects. Pings, Resets and
// Closes are answered here at once; Routes and the frames to compute go
// to the connection's worker, in order. When the head leaves, its work is
// cancelled and the worker waited for before its sessions are dropped.
func (s *Server) serveHead(hc *headConn) {
	go hc.in.work(func(j *job) { s.runHeadJob(hc, j) }, func(req uint64) { s.answerPing(hc, req) })
	defer func() {
		hc.in.stop(errHeadGone)
		s.dropHead(hc)
		if hc.down != nil {
			hc.down.close()
		}
	}()
	for {
		f, err := s.nextFrame(hc.peer, s.idleFor(hc))
		if err != nil {
			s.readEnded(hc.peer, "head", err)
			return
		}
		s.logFrame("frame from head", hc.name, f)
		if err := s.headFrame(hc, f); err != nil {
			s.requestFailed(hc, f, err)
			if errors.Is(err, wire.ErrMalformed) {
				return
			}
		}
	}
}

// headFrame handles one frame from a head on its connection's reader.
func (s *Server) headFrame(hc *headConn, f *wire.Frame) error {
	switch f.Kind {
	case wire.KindPing:
		if hc.in.deferPing(f.Request) {
			return nil
		}
		return s.pong(hc, f.Request)
	case wire.KindReset:
		if err := s.openSession(hc, f.Session); err != nil {
			return err
		}
		m := metaOf(f)
		return hc.write(func(fr *wire.Framer) error { return fr.WriteReset(m) })
	case wire.KindClose:
		s.closeSession(hc, f.Session)
		return nil
	case wire.KindRoute:
		return s.enqueue(hc.in, hc.name, f, nil)
	case wire.KindPrefill, wire.KindDecode:
		return s.admit(hc.in, hc.name, f)
	}
	return fmt.Errorf("a head may not send %v frames: %w", f.Kind, wire.ErrMalformed)
}

// runHeadJob runs a Route or computes a frame from the head, on its
// connection's worker.
func (s *Server) runHeadJob(hc *headConn, j *job) {
	var err error
	if j.f.Kind == wire.KindRoute {
		if err = s.route(hc, j); err == nil {
			m := metaOf(&j.f)
			j.finish()
			err = hc.write(func(fr *wire.Framer) error { return fr.WriteRouteAck(m) })
		}
	} else {
		err = s.processGuarded(j, hc, nil)
	}
	if err != nil {
		s.requestFailed(hc, &j.f, err)
		if errors.Is(err, wire.ErrMalformed) {
			hc.close() // ends the reader, which cancels the rest
		}
	}
}

// answerPing answers a Ping deferred while the worker ran a job.
func (s *Server) answerPing(hc *headConn, req uint64) {
	if err := s.pong(hc, req); err != nil {
		s.log.Debug("ping answer failed", "session", 0, "peer", hc.name, "request", req, "err", err)
	}
}

// requestFailed logs a failed request of the head and tells it; the head
// knows which stage this connection is, so the error has no name prefix.
func (s *Server) requestFailed(hc *headConn, f *wire.Frame, err error) {
	s.logFailure(f, hc.name, err)
	if !connectionGone(err) {
		hc.sendError(metaOf(f), err)
	}
}

// connectionGone reports whether err is a frame abandoned because a
// connection it came over ended. Nobody is told: the head that wanted it
// is gone, or learns why from the stage whose connection ended (its
// shutdown notice, or its report that it lost this stage), and an error
// for the request here would only arrive first and hide that cause.
func connectionGone(err error) bool {
	return errors.Is(err, errHeadGone) || errors.Is(err, errUpstreamGone)
}

// logFailure logs a request that failed, or was abandoned (Info: nothing
// went wrong but someone left).
func (s *Server) logFailure(f *wire.Frame, peer string, err error) {
	attrs := []any{"session", f.Session, "peer", peer, "kind", f.Kind.String(), "request", f.Request, "err", err}
	var ab *abandonedError
	if errors.As(err, &ab) {
		s.log.Info("frame abandoned", attrs...)
		return
	}
	s.log.Warn("request failed", attrs...)
}

// serveUpstream reads activations from the previous stage until it
// disconnects, and has its worker compute them in order.
func (s *Server) serveUpstream(p *peer) {
	in := newInbox(s.cfg.MaxQueue)
	go in.work(func(j *job) { s.runUpstreamJob(p, j) }, nil)
	defer in.stop(errUpstreamGone)
	for {
		f, err := s.nextFrame(p, 0)
		if err != nil {
			s.readEnded(p, "upstream", err)
			return
		}
		s.logFrame("frame from upstream", p.name, f)
		switch f.Kind {
		case wire.KindPrefill, wire.KindDecode:
			err = s.admit(in, p.name, f)
		default:
			err = fmt.Errorf("an upstream stage may not send %v frames: %w", f.Kind, wire.ErrMalformed)
		}
		if err != nil {
			s.upstreamFailed(p, f, err)
			if errors.Is(err, wire.ErrMalformed) {
				return
			}
		}
	}
}

func (s *Server) runUpstreamJob(p *peer, j *job) {
	if err := s.processGuarded(j, nil, p); err != nil {
		s.upstreamFailed(p, &j.f, err)
		if errors.Is(err, wire.ErrMalformed) {
			p.close()
		}
	}
}

// upstreamFailed tells the head that owns the session when the frame came
// over the session's own upstream connection (the head is the one waiting,
// and knows this connection's stage), else the upstream stage that sent
// it, which relays it.
func (s *Server) upstreamFailed(p *peer, f *wire.Frame, err error) {
	s.logFailure(f, p.name, err)
	if connectionGone(err) {
		return
	}
	m := metaOf(f)
	if sess, lerr := s.lookup(f.Session); lerr == nil && !errors.Is(err, errNotOwner) {
		sess.head.sendError(m, err)
		return
	}
	p.sendError(m, fmt.Errorf("stage %q: %w", s.cfg.Name, err))
}

// process runs a Prefill or Decode frame through this stage's layers and
// passes the result on. The frame came from head (nil when from upstream)
// or from the upstream connection up; either must be the session's own.
func (s *Server) process(j *job, head *headConn, up *peer) error {
	f, sess := &j.f, j.sess
	if err := j.stopped(); err != nil {
		return s.abandon(f, 0, err)
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed {
		return s.abandon(f, 0, errClosedByHead)
	}
	if err := sess.owns(head, up); err != nil {
		return fmt.Errorf("stage %q, session %d: %w", s.cfg.Name, f.Session, err)
	}
	if err := s.damage(); err != nil {
		return err
	}
	defer s.heartbeat(sess.head)()
	cfg := s.cfg.Model.Config()
	n := int(f.Tokens)
	if n == 0 {
		return fmt.Errorf("%v frame carries no tokens: %w", f.Kind, wire.ErrMalformed)
	}
	// Bound the activations this frame makes us allocate by the context
	// before allocating them (a token-id frame is 4 bytes a token on the
	// wire but Dim floats a token here).
	if end := int(f.Start) + n; end > cfg.SeqLen || int(f.Start) > sess.state.Next() {
		return fmt.Errorf("positions [%d, %d) with [0, %d) cached do not fit the context of %d: %w",
			f.Start, end, sess.state.Next(), cfg.SeqLen, errSession)
	}
	if err := s.input(sess, f, n); err != nil {
		return err
	}
	m := metaOf(f)
	if s.cfg.Model.W.HasHead() {
		return s.result(j, sess, m, n)
	}
	if err := s.runLayers(j, sess, n, nil); err != nil {
		return err
	}
	s.stats.computed(n)
	j.finish()
	return s.sendDown(sess, f, m, n)
}

// sendDown passes a computed frame's activations to the downstream stage.
func (s *Server) sendDown(sess *session, f *wire.Frame, m wire.Meta, n int) error {
	cfg := s.cfg.Model.Config()
	hc := sess.head
	if hc.down == nil {
		return fmt.Errorf("stage %q holds layers [%d, %d) of %d but the head gave it no downstream route: %w",
			s.cfg.Name, s.cfg.Model.W.First, s.cfg.Model.W.Last, cfg.NLayers, errSession)
	}
	flags := f.Flags &^ wire.FlagTokenIDs
	if err := hc.down.write(func(fr *wire.Framer) error {
		if err := fr.WriteActivations(f.Kind, flags, m, hc.downEnc, sess.x[:n*cfg.Dim], n, cfg.Dim); err != nil {
			return err
		}
		// Counted here, under the link's lock, not after write returns:
		// the next stage may answer, and the head ask this one for its
		// stats, before this goroutine runs again. LastFrameBytes is what
		// the frame took (an entropy-coded one's size depends on the values).
		s.stats.downBytes.Add(uint64(fr.LastFrameBytes()))
		return nil
	}); err != nil {
		return fmt.Errorf("sending to %s: %w", hc.down.name, err)
	}
	return nil
}

// input fills sess.x with the frame's activations, embedding token ids first
// when the frame carries them.
func (s *Server) input(sess *session, f *wire.Frame, n int) error {
	dim := s.cfg.Model.Config().Dim
	sess.x = grow(sess.x, n*dim)
	if f.Flags&wire.FlagTokenIDs == 0 {
		if int(f.Width) != dim {
			return fmt.Errorf("activations are %d wide, this model's hidden width is %d: %w", f.Width, dim, wire.ErrMalformed)
		}
		_, err := f.Activations(sess.x)
		return err
	}
	ids, err := f.TokenIDs(sess.ids[:0])
	if err != nil {
		return err
	}
	sess.ids = ids
	for i, id := range ids {
		if err := s.cfg.Model.Embed(int(id), sess.x[i*dim:(i+1)*dim]); err != nil {
			return err
		}
	}
	return nil
}

// result computes logits (for every position, or only the last) and sends
// them to the head that owns the session.
func (s *Server) result(j *job, sess *session, m wire.Meta, n int) error {
	f := &j.f
	cfg := s.cfg.Model.Config()
	first := n - 1
	if f.Flags&wire.FlagAllLogits != 0 {
		first = 0
	}
	count := n - first
	sess.logits = grow(sess.logits, count*cfg.VocabSize)
	// The layers and the classifier, in the shared steps.
	if err := s.runLayers(j, sess, n, sess.logits[:count*cfg.VocabSize]); err != nil {
		return err
	}
	m.Start = f.Start + uint32(first)
	s.stats.computed(n)
	j.finish()
	if f.Flags&wire.FlagGreedy != 0 {
		return s.sendGreedy(sess, m, count)
	}
	s.stats.resultBytes.Add(frameBytes(wire.F32, count, cfg.VocabSize))
	return sess.head.write(func(fr *wire.Framer) error {
		return fr.WriteActivations(wire.KindResult, 0, m, wire.F32, sess.logits[:count*cfg.VocabSize], count, cfg.VocabSize)
	})
}

// sendGreedy sends the head the most likely token of each position.
func (s *Server) sendGreedy(sess *session, m wire.Meta, count int) error {
	vocab := s.cfg.Model.Config().VocabSize
	ids := sess.ids[:0]
	for i := range count {
		ids = append(ids, uint32(sample.Argmax(sess.logits[i*vocab:(i+1)*vocab])))
	}
	sess.ids = ids
	s.stats.resultBytes.Add(frameBytes(nil, count, 0))
	return sess.head.write(func(fr *wire.Framer) error { return fr.WriteTokenIDs(wire.KindResult, 0, m, ids) })
}

// owns checks that a frame from head, or from the upstream connection up,
// may drive the session, binding the session to up at its first upstream
// frame. The caller holds sess.mu.
func (sess *session) owns(head *headConn, up *peer) error {
	switch {
	case head != nil && head != sess.head:
		return fmt.Errorf("opened by another head: %w", errNotOwner)
	case up != nil && sess.up == nil:
		sess.up = up
	case up != nil && up != sess.up:
		return fmt.Errorf("carried by another upstream connection: %w", errNotOwner)
	}
	return nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

var errEOF = io.EOF

func isClosedConn(err error) bool {
	var ne net.Error
	return errors.Is(err, net.ErrClosed) || errors.Is(err, errEOF) || (errors.As(err, &ne) && !ne.Timeout())
}

// logFrame logs a received frame at Debug level.
func (s *Server) logFrame(msg, peer string, f *wire.Frame) {
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug(msg, "session", f.Session, "peer", peer, "kind", f.Kind.String(), "request", f.Request,
			"start", f.Start, "tokens", f.Tokens, "flags", uint8(f.Flags), "bytes", len(f.Payload))
	}
}
