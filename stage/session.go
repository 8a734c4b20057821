package stage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

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
	up     *peer
	state  *model.State
	x      []float32 // tokens x dim activations
	logits []float32 // tokens x vocab
	ids    []uint32
}

func (s *Server) openSession(hc *headConn, id uint64) error {
	if err := s.damage(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.sessions[id]; ok {
		if old.head != hc {
			return fmt.Errorf("session %d belongs to another head: %w", id, errSession)
		}
		old.mu.Lock()
		old.state.Reset()
		old.up = nil
		old.mu.Unlock()
		return nil
	}
	if len(s.sessions) >= s.cfg.MaxSessions {
		return fmt.Errorf("stage holds %d sessions, its limit (--max-sessions): %w", len(s.sessions), errSession)
	}
	w := s.cfg.Model.W
	st, err := s.cfg.Model.NewState(w.First, w.Last)
	if err != nil {
		return err
	}
	s.sessions[id] = &session{id: id, head: hc, state: st}
	s.log.Info("session opened", "session", id, "peer", hc.name, "sessions", len(s.sessions))
	return nil
}

func (s *Server) closeSession(hc *headConn, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.sessions[id]; ok && sess.head == hc {
		delete(s.sessions, id)
		s.log.Info("session closed", "session", id, "peer", hc.name, "sessions", len(s.sessions))
	}
}

// dropHead forgets every session a departed head opened.
func (s *Server) dropHead(hc *headConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sess := range s.sessions {
		if sess.head == hc {
			delete(s.sessions, id)
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

// serveHead reads a head's frames until it disconnects.
func (s *Server) serveHead(hc *headConn) {
	defer func() {
		s.dropHead(hc)
		if hc.down != nil {
			hc.down.close()
		}
	}()
	for {
		f, err := hc.fr.ReadFrame()
		if err != nil {
			if !isClosedConn(err) {
				s.log.Warn("head connection failed", "session", 0, "peer", hc.name, "err", err)
				hc.sendError(wire.Meta{}, err)
			} else {
				s.log.Info("head disconnected", "session", 0, "peer", hc.name)
			}
			return
		}
		s.logFrame("frame from head", hc.name, f)
		m := wire.Meta{Session: f.Session, Request: f.Request, Start: f.Start}
		switch f.Kind {
		case wire.KindRoute:
			err = s.route(hc, f)
			if err == nil {
				err = hc.write(func(fr *wire.Framer) error { return fr.WriteRouteAck(m) })
			}
		case wire.KindReset:
			if err = s.openSession(hc, f.Session); err == nil {
				err = hc.write(func(fr *wire.Framer) error { return fr.WriteReset(m) })
			}
		case wire.KindClose:
			s.closeSession(hc, f.Session)
		case wire.KindPrefill, wire.KindDecode:
			err = s.processGuarded(f, hc, nil)
		case wire.KindPing:
			err = s.pong(hc, f.Request)
		default:
			err = fmt.Errorf("a head may not send %v frames: %w", f.Kind, wire.ErrMalformed)
		}
		if err != nil {
			// The head knows which stage this connection is: no name prefix.
			s.log.Warn("request failed", "session", f.Session, "peer", hc.name, "kind", f.Kind.String(), "request", f.Request, "err", err)
			hc.sendError(m, err)
			if errors.Is(err, wire.ErrMalformed) {
				return
			}
		}
	}
}

// serveUpstream reads activations from the previous stage until it disconnects.
func (s *Server) serveUpstream(p *peer) {
	for {
		f, err := p.fr.ReadFrame()
		if err != nil {
			if !isClosedConn(err) {
				s.log.Warn("upstream connection failed", "session", 0, "peer", p.name, "err", err)
				p.sendError(wire.Meta{}, err)
			} else {
				s.log.Info("upstream disconnected", "session", 0, "peer", p.name)
			}
			return
		}
		s.logFrame("frame from upstream", p.name, f)
		m := wire.Meta{Session: f.Session, Request: f.Request, Start: f.Start}
		switch f.Kind {
		case wire.KindPrefill, wire.KindDecode:
			err = s.processGuarded(f, nil, p)
		default:
			err = fmt.Errorf("an upstream stage may not send %v frames: %w", f.Kind, wire.ErrMalformed)
		}
		if err != nil {
			// Tell the head that owns the session when the frame came over
			// the session's own upstream connection (the head is the one
			// waiting, and knows this connection's stage), else the
			// upstream stage that sent it, which relays it.
			s.log.Warn("request failed", "session", f.Session, "peer", p.name, "kind", f.Kind.String(), "request", f.Request, "err", err)
			if sess, lerr := s.lookup(f.Session); lerr == nil && !errors.Is(err, errNotOwner) {
				sess.head.sendError(m, err)
			} else {
				p.sendError(m, fmt.Errorf("stage %q: %w", s.cfg.Name, err))
			}
			if errors.Is(err, wire.ErrMalformed) {
				return
			}
		}
	}
}

// process runs a Prefill or Decode frame through this stage's layers and
// passes the result on. The frame came from head (nil when from upstream)
// or from the upstream connection up; either must be the session's own.
func (s *Server) process(f *wire.Frame, head *headConn, up *peer) error {
	sess, err := s.lookup(f.Session)
	if err != nil {
		return err
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
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
	start := time.Now()
	if err := s.input(sess, f, n); err != nil {
		return err
	}
	if err := s.cfg.Model.LayersBatch(sess.state, sess.x[:n*cfg.Dim], int(f.Start), n); err != nil {
		return fmt.Errorf("layers [%d, %d) at positions [%d, %d): %w", sess.state.First, sess.state.Last, f.Start, int(f.Start)+n, err)
	}
	m := wire.Meta{Session: f.Session, Request: f.Request, Start: f.Start}
	if s.cfg.Model.W.HasHead() {
		return s.result(sess, f, m, n, start)
	}
	s.stats.computed(n, start)
	hc := sess.head
	if hc.down == nil {
		return fmt.Errorf("stage %q holds layers [%d, %d) of %d but the head gave it no downstream route: %w",
			s.cfg.Name, s.cfg.Model.W.First, s.cfg.Model.W.Last, cfg.NLayers, errSession)
	}
	flags := f.Flags &^ wire.FlagTokenIDs
	if err := hc.down.write(func(fr *wire.Framer) error {
		return fr.WriteActivations(f.Kind, flags, m, hc.downEnc, sess.x[:n*cfg.Dim], n, cfg.Dim)
	}); err != nil {
		return fmt.Errorf("sending to %s: %w", hc.down.name, err)
	}
	s.stats.downBytes.Add(frameBytes(hc.downEnc, n, cfg.Dim))
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
func (s *Server) result(sess *session, f *wire.Frame, m wire.Meta, n int, start time.Time) error {
	cfg := s.cfg.Model.Config()
	first := n - 1
	if f.Flags&wire.FlagAllLogits != 0 {
		first = 0
	}
	count := n - first
	sess.logits = grow(sess.logits, count*cfg.VocabSize)
	for i := first; i < n; i++ {
		out := sess.logits[(i-first)*cfg.VocabSize : (i-first+1)*cfg.VocabSize]
		if err := s.cfg.Model.Head(sess.x[i*cfg.Dim:(i+1)*cfg.Dim], out); err != nil {
			return err
		}
	}
	m.Start = f.Start + uint32(first)
	s.stats.computed(n, start) // the logits are computed; sending is not computing
	if f.Flags&wire.FlagGreedy != 0 {
		ids := sess.ids[:0]
		for i := range count {
			ids = append(ids, uint32(sample.Argmax(sess.logits[i*cfg.VocabSize:(i+1)*cfg.VocabSize])))
		}
		sess.ids = ids
		s.stats.resultBytes.Add(frameBytes(nil, count, 0))
		return sess.head.write(func(fr *wire.Framer) error { return fr.WriteTokenIDs(wire.KindResult, 0, m, ids) })
	}
	s.stats.resultBytes.Add(frameBytes(wire.F32, count, cfg.VocabSize))
	return sess.head.write(func(fr *wire.Framer) error {
		return fr.WriteActivations(wire.KindResult, 0, m, wire.F32, sess.logits[:count*cfg.VocabSize], count, cfg.VocabSize)
	})
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

// route dials the downstream stage the head names and runs the boundary
// handshake as its upstream.
func (s *Server) route(hc *headConn, f *wire.Frame) error {
	r, err := f.Route()
	if err != nil {
		return err
	}
	if hc.down != nil {
		return fmt.Errorf("a downstream route is already set (%s): %w", hc.down.name, wire.ErrMalformed)
	}
	if allow := s.cfg.AllowDownstream; len(allow) > 0 && !slices.Contains(allow, r.Addr) {
		return fmt.Errorf("may not dial %s: it is not in this stage's --allow-downstream list %v", r.Addr, allow)
	}
	conn, err := net.DialTimeout("tcp", r.Addr, s.cfg.Timeout)
	if err != nil {
		return fmt.Errorf("dialing downstream stage %s: %w", r.Addr, err)
	}
	if conn, err = authClient(s.cfg.Auth, conn, r.Addr); err != nil {
		return fmt.Errorf("downstream stage %s: %w", r.Addr, err)
	}
	dp, err := newPeer(conn, "downstream stage "+r.Addr, s.cfg.Link, s.reg, s.cfg.Timeout)
	if err != nil {
		conn.Close()
		return err
	}
	enc, err := s.handshakeDown(dp, r)
	if err != nil {
		dp.close()
		return err
	}
	hc.down, hc.downEnc = dp, enc
	s.log.Info("routed downstream", "session", 0, "peer", hc.name, "downstream", r.Addr, "downstream_layers", r.Peer, "encoding", enc.ID().String())
	go s.watchDownstream(hc, dp)
	return nil
}

func (s *Server) handshakeDown(dp *peer, r wire.Route) (wire.Encoding, error) {
	h := s.hello()
	h.PeerLayers, h.Encoding, h.Codec = r.Peer, r.Encoding, r.Codec
	if err := dp.write(func(fr *wire.Framer) error { return fr.WriteHello(wire.KindHello, &h) }); err != nil {
		return nil, fmt.Errorf("%s: %w", dp.name, err)
	}
	dp.conn.SetReadDeadline(time.Now().Add(s.cfg.Timeout))
	defer dp.conn.SetReadDeadline(time.Time{})
	f, err := dp.fr.ReadFrame()
	if err != nil {
		return nil, fmt.Errorf("%s: handshake: %w", dp.name, err)
	}
	if f.Kind == wire.KindError {
		re, err := f.RemoteError()
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s refused the connection: %w", dp.name, re)
	}
	if f.Kind != wire.KindHelloAck {
		return nil, fmt.Errorf("%s answered the Hello with %v: %w", dp.name, f.Kind, wire.ErrMalformed)
	}
	ack, err := f.Hello()
	if err != nil {
		return nil, err
	}
	agreed, err := wire.CheckHelloAck(&h, &ack)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dp.name, err)
	}
	dp.fr.Pin(agreed)
	return s.reg.Lookup(agreed.Encoding, agreed.Codec)
}

// watchDownstream reads the downstream link, which carries nothing but
// errors upstream. Whatever ends it is reported to the head: a downstream
// stage that vanishes must fail the head's request, never stall it.
func (s *Server) watchDownstream(hc *headConn, dp *peer) {
	for {
		f, err := dp.fr.ReadFrame()
		if errors.Is(err, net.ErrClosed) {
			return // closed here: the head left, or this stage is shutting down
		}
		if err != nil {
			s.log.Warn("downstream connection lost", "session", 0, "peer", hc.name, "downstream", dp.name, "err", err)
			hc.sendError(wire.Meta{}, fmt.Errorf("lost its connection to %s: %w", dp.name, err))
			hc.close()
			return
		}
		if f.Kind == wire.KindError {
			re, err := f.RemoteError()
			if err != nil {
				hc.sendError(wire.Meta{}, fmt.Errorf("%s sent a bad Error frame: %w", dp.name, err))
				continue
			}
			s.log.Warn("relaying an error from downstream", "session", f.Session, "peer", hc.name, "downstream", dp.name, "code", re.Code.String(), "message", re.Message)
			hc.sendError(wire.Meta{Session: f.Session, Request: f.Request}, &relayed{from: dp.name, re: re})
		}
	}
}

// relayed is an error a downstream stage sent, passed on to the head with
// its code kept and the stage it came from named.
type relayed struct {
	from string
	re   *wire.RemoteError
}

func (r *relayed) Error() string { return r.from + " reports: " + r.re.Message }
func (r *relayed) Unwrap() error { return r.re }
