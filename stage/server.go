// Package stage serves a contiguous range of a model's layers to a head over
// the stage wire. A stage holds per-session KV caches for its layers, runs
// the frames it receives (token ids if it holds the embedding, activations
// from its upstream stage otherwise), and passes the result on: activations
// to its downstream stage, or, if it holds the head, logits straight back to
// the head that opened the session. Every failure is reported to that head
// as an Error frame; nothing is ever passed on in place of a result.
package stage

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/batch"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
)

// Config describes what a stage serves.
type Config struct {
	Model    *model.Model // holds layers [W.First, W.Last)
	Identity wire.Digest  // the whole model's identity digest
	Name     string       // for the peer's messages and logs
	Registry *wire.Registry
	Codecs   []wire.CodecDigest
	Link     link.Config   // emulation applied to everything this stage sends
	Timeout  time.Duration // bound on each write and on a downstream's handshake
	Logger   *slog.Logger
	// MaxSessions bounds the KV caches held at once (each is
	// layers x context x kv width x 8 bytes).
	MaxSessions int
	// MaxConns bounds the connections held at once, handshaken or not
	// (DefaultMaxConns when zero). A connection past it is closed as soon
	// as it is accepted, and counted (Server.RefusedConns).
	MaxConns int
	// Auth authenticates and encrypts every connection, accepted and
	// dialed (package auth); nil leaves them plaintext.
	Auth *auth.Config
	// AllowDownstream, when not empty, lists the only addresses (host:port,
	// as the head names them) this stage will dial when a head routes it to
	// its successor. Without it a stage dials whatever address a head names,
	// so anyone who can reach the stage can make it open connections.
	AllowDownstream []string
	// Heartbeat is how often a stage tells the head that owns a session it
	// is still working while it computes one of that session's frames
	// (DefaultHeartbeat when zero, never when negative), so that the head
	// can tell a long prefill from a hang (docs/wire.md, "Heartbeats").
	Heartbeat time.Duration
	// MaxSessionsPerConn bounds the sessions one head connection holds,
	// and MaxSessionsPerIdentity those of one identity over all its
	// connections: the key the peer authenticated with, or its IP address
	// when the stage runs without authentication. Both are MaxSessions
	// when zero, which leaves MaxSessions the only bound.
	MaxSessionsPerConn     int
	MaxSessionsPerIdentity int
	// MaxPrefill bounds the tokens of one Prefill frame (DefaultMaxPrefill
	// when zero; at most the wire's 8192).
	MaxPrefill int
	// MaxQueue bounds the frames a connection has sent that the stage has
	// not finished (queued or computing); MaxInFlight bounds their tokens.
	// A head waits for each session's reply before sending its next frame,
	// so it has at most one frame in flight per session, and no more than
	// one prefill's tokens: the defaults, 2 x MaxSessionsPerConn (room for
	// a head that gave up on a request and sent the session's next frame
	// before the stage finished the first) and MaxSessionsPerConn x
	// MaxPrefill, never refuse one.
	MaxQueue    int
	MaxInFlight int
	// IdleTimeout closes a head connection that holds no session and has
	// sent nothing for this long (DefaultIdleTimeout when zero, never when
	// negative). A head with a session may be quiet for as long as its
	// user thinks; a chain's stage-to-stage links carry nothing between
	// requests and live as long as the head's connection to the upstream
	// stage, which that stage's own idle deadline covers.
	IdleTimeout time.Duration
	// KVBudget bounds the bytes of KV cache all sessions hold (0:
	// unbounded). Caches grow in blocks as positions fill; a frame whose
	// positions find no room is refused (code limit), and the session may
	// go on once others free theirs. KVF16 stores keys and values as f16.
	KVBudget int64
	KVF16    bool
	// Watch, when set, is called every WatchEvery (default 1 s) to ask
	// whether the files of the weights changed under their mappings
	// (seam serve passes mapped.Changed: a write in place that keeps the
	// length faults nothing). Its first error marks the weights damaged:
	// every later request and session is refused, naming the file.
	Watch      func() error
	WatchEvery time.Duration
	// Chunk is the most positions of one session in one batched step
	// (batch.DefaultChunk when zero): every active session's frames run
	// together, each weight matrix streamed once per step, and a long
	// prefill goes a chunk per step so that it does not stall the others.
	Chunk int
}

// DefaultHeartbeat is the default Config.Heartbeat: a few times shorter
// than a head's default hang threshold (pipeline.DefaultHang).
const DefaultHeartbeat = time.Second

// DefaultMaxPrefill is the default Config.MaxPrefill, half the wire's
// 8192-token cap. A frame of token ids costs 4 bytes a token on the wire
// but width x 4 bytes a token of activations here: 4096 tokens at width
// 4096 (the 7B class) are 64 MiB, the most an activation frame may carry
// (wire.DefaultLimits), so a 16 KiB frame of ids makes such a stage hold no
// more than the largest frame an upstream stage can send; 2048 would hold
// width 8192 to the same, but would refuse the prompts of 2049 to 4096
// tokens that heads send in one frame today. The compute is bounded
// otherwise: the stage abandons a frame within about a chunk's time once
// nobody wants it (compute.go).
const DefaultMaxPrefill = 4096

// DefaultIdleTimeout is the default Config.IdleTimeout: long enough for
// any head that means to open a session (a supervising head pings every
// stage twice a second), short enough that a forgotten or hostile
// connection gives its slot back within minutes instead of never.
const DefaultIdleTimeout = 10 * time.Minute

// Server is a running stage.
type Server struct {
	cfg Config
	reg *wire.Registry
	log *slog.Logger

	mu         sync.Mutex
	sessions   map[uint64]*session
	identities map[string]int // sessions held by each identity (headConn.identity)
	conns      map[net.Conn]struct{}
	peers      map[*peer]bool // handshaken connections: true for a head's
	listeners  []net.Listener
	closed     bool
	wg         sync.WaitGroup  // connection handlers: each may be computing
	stats      counters        // reported to heads that ping (stats.go)
	refusals   refusalCounters // one per limit (refusals.go)
	damaged    error           // the first fault on the mapped weights (weights.go), under mu
	kv         *model.KVPool   // every session's KV cache blocks
	unwatch    chan struct{}   // closed by stop: ends the watch of the weights' files
	batcher    *batch.Batcher  // runs every session's frames in shared steps
}

// New returns a stage for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Model == nil {
		return nil, errors.New("stage: no model")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 64
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if err := cfg.limitDefaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, reg: cfg.Registry, log: cfg.Logger, sessions: map[uint64]*session{}, conns: map[net.Conn]struct{}{},
		peers: map[*peer]bool{}, identities: map[string]int{}}
	if s.reg == nil {
		s.reg = wire.Default
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("stage", cfg.Name)
	newPool := model.NewKVPool
	if cfg.KVF16 {
		newPool = model.NewKVPoolF16
	}
	var err error
	if s.kv, err = newPool(cfg.KVBudget, 0); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	if s.batcher, err = batch.New(batch.Config{Model: cfg.Model, Chunk: cfg.Chunk, Guard: s.withWeights}); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	s.unwatch = make(chan struct{})
	if cfg.Watch != nil {
		go s.watch()
	}
	return s, nil
}

// Layers is the range this stage serves.
func (s *Server) Layers() wire.LayerRange {
	w := s.cfg.Model.W
	return wire.LayerRange{Start: uint32(w.First), End: uint32(w.Last)}
}

// Serve accepts connections on l until Close or Shutdown. It returns nil
// after them, and only once every connection's handler has returned: no
// frame is being computed then, so the caller may release the weights.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return l.Close()
	}
	s.listeners = append(s.listeners, l)
	s.mu.Unlock()
	c := s.cfg
	s.log.Info("listening", "session", 0, "addr", l.Addr().String(), "layers", s.Layers(), "max_conns", c.MaxConns,
		"max_sessions", c.MaxSessions, "max_sessions_per_conn", c.MaxSessionsPerConn, "max_sessions_per_identity", c.MaxSessionsPerIdentity,
		"max_prefill", c.MaxPrefill, "max_queue", c.MaxQueue, "max_inflight_tokens", c.MaxInFlight, "idle_timeout", c.IdleTimeout.String())
	err := acceptLoop(l, s.isClosed, s.log, s.ServeConn)
	if err == nil {
		s.wg.Wait()
	}
	return err
}

// track registers a new connection and its handler; false once closed or
// when MaxConns connections are held, after closing the connection.
// The handler is counted under the lock that Close takes, so Close never
// waits on a count that a handler is about to join.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	closed, full := s.closed, len(s.conns) >= s.cfg.MaxConns
	if !closed && !full {
		s.conns[c] = struct{}{}
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closed || full {
		c.Close()
	}
	if full && !closed {
		if n := s.refusals.conns.Add(1); sparse(n) {
			s.log.Warn("connection refused: too many connections", "session", 0, "peer", c.RemoteAddr().String(), "max_conns", s.cfg.MaxConns, "refused_so_far", n)
		}
	}
	return !closed && !full
}

// RefusedConns counts the connections closed because MaxConns were held
// (Refusals().Conns).
func (s *Server) RefusedConns() uint64 { return s.refusals.conns.Load() }

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// addPeer registers a handshaken connection, so that Shutdown can tell it
// why it is being closed; false once the server is shutting down.
func (s *Server) addPeer(p *peer, head bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.peers[p] = head
	return true
}

func (s *Server) removePeer(p *peer) {
	s.mu.Lock()
	delete(s.peers, p)
	s.mu.Unlock()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops accepting, closes every connection and waits for handlers.
// Peers see their connection end; Shutdown tells them why first.
func (s *Server) Close() error { return s.stop("") }

// Shutdown stops the stage gracefully: it stops accepting, sends every
// connected head and upstream stage an Error frame (code shutdown) saying
// that this stage is shutting down and why, closes the connections, and
// waits until every handler has returned, so that a frame being computed is
// either finished or abandoned before Shutdown returns. The heads' requests
// fail with that message, naming this stage.
func (s *Server) Shutdown(reason string) error { return s.stop(reason) }

func (s *Server) stop(reason string) error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	for _, l := range s.listeners {
		l.Close()
	}
	peers := make([]*peer, 0, len(s.peers))
	for p := range s.peers {
		peers = append(peers, p)
	}
	sessions := len(s.sessions)
	s.mu.Unlock()
	if first && reason != "" {
		s.log.Info("shutting down", "session", 0, "reason", reason, "connections", len(peers), "sessions", sessions)
		msg := fmt.Sprintf("stage %q is shutting down (%s)", s.cfg.Name, reason)
		var wg sync.WaitGroup
		for _, p := range peers {
			wg.Add(1)
			go func() { // a peer that stopped reading must not hold up the others
				defer wg.Done()
				p.sendShutdown(msg, shutdownNotice)
				// Closing the peer's own connection, not only the socket
				// below, delivers what an emulated link still holds (the
				// notice among it) within the notice's write deadline.
				p.close()
			}()
		}
		wg.Wait()
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.batcher.Close() // no handler is left to use it
	if first {
		close(s.unwatch)
	}
	return nil
}

// shutdownNotice bounds how long Shutdown waits to deliver its message to
// one peer (behind a frame being written to it, or a full socket buffer).
const shutdownNotice = 2 * time.Second

// hello is this stage's own handshake message.
func (s *Server) hello() wire.Hello {
	c := s.cfg.Model.Config()
	return wire.Hello{
		Generation: wire.MaxGeneration, MinGeneration: wire.MinGeneration, MaxGeneration: wire.MaxGeneration,
		Model: s.cfg.Identity, Layers: s.Layers(), Width: uint32(c.Dim), Vocab: uint32(c.VocabSize),
		Encodings: s.reg.IDs(), Encoding: wire.EncodingF32, Codecs: s.cfg.Codecs, Name: s.cfg.Name,
	}
}

// handle runs the handshake, then serves the connection as a head's or an
// upstream stage's, by what the peer's Hello says it holds.
func (s *Server) handle(conn net.Conn) {
	s.log.Info("connection accepted", "session", 0, "peer", conn.RemoteAddr().String())
	conn, who, ok := s.authenticate(conn)
	if !ok {
		return
	}
	p, err := newPeer(conn, conn.RemoteAddr().String(), s.cfg.Link, s.reg, s.cfg.Timeout)
	if err != nil {
		s.log.Warn("connection setup failed", "session", 0, "peer", conn.RemoteAddr().String(), "err", err)
		return
	}
	p.log = s.log
	remote, err := s.accept(p)
	if err != nil {
		if n := s.refusals.failedHellos.Add(1); sparse(n) {
			s.log.Warn("handshake refused", "session", 0, "peer", p.name, "err", err, "refused_so_far", n)
		}
		return
	}
	head := remote.Layers.Start == remote.Layers.End
	if head {
		p.name = "head " + p.name
	} else {
		p.name = fmt.Sprintf("upstream stage %s holding layers %v", p.name, remote.Layers)
	}
	if !s.addPeer(p, head) {
		p.sendShutdown(fmt.Sprintf("stage %q is shutting down", s.cfg.Name), shutdownNotice)
		return
	}
	defer s.removePeer(p)
	s.log.Info("handshake accepted", "session", 0, "peer", p.name, "peer_name", remote.Name, "encoding", remote.Encoding.String())
	if head {
		s.serveHead(&headConn{peer: p, in: newInbox(s.cfg.MaxQueue), identity: identityOf(who, conn.RemoteAddr())})
		return
	}
	s.serveUpstream(p)
}

// accept reads the peer's Hello and answers HelloAck, or Error naming every
// mismatch, after which the connection is closed. Every refusal is counted.
func (s *Server) accept(p *peer) (wire.Hello, error) {
	p.conn.SetReadDeadline(time.Now().Add(s.cfg.Timeout))
	defer p.conn.SetReadDeadline(time.Time{})
	defer withPreHandshakeLimits(p.fr)()
	remote, err := s.readHello(p)
	if err != nil {
		return remote, err
	}
	local := s.hello()
	local.PeerLayers = remote.Layers // a stage does not know its upstream's start; the boundary is checked
	agreed, err := wire.CheckHello(&local, &remote)
	if err != nil {
		s.refusals.handshakes.Add(1)
		p.sendError(wire.Meta{}, withholdDigests(fmt.Errorf("stage %q: %w", s.cfg.Name, err), s.anonymous(), s.ownDigests()))
		return remote, err
	}
	ack := wire.Ack(local, agreed)
	if err := p.write(func(fr *wire.Framer) error { return fr.WriteHello(wire.KindHelloAck, &ack) }); err != nil {
		return remote, err
	}
	p.fr.Pin(agreed)
	p.gen = agreed.Generation
	return remote, nil
}

// readHello reads the first frame, which must be a Hello. A first frame
// that breaks the rules is refused with an Error and counted; one that
// never arrives whole within the timeout is counted as trickled, or as
// idle when not a byte came.
func (s *Server) readHello(p *peer) (wire.Hello, error) {
	f, err := p.fr.ReadFrame()
	if err == nil && f.Kind != wire.KindHello {
		err = fmt.Errorf("first frame is %v, want a Hello: %w", f.Kind, wire.ErrMalformed)
	}
	var remote wire.Hello
	if err == nil {
		remote, err = f.Hello()
	}
	switch {
	case err == nil:
		return remote, nil
	case framingError(err):
		s.refusals.preHandshake.Add(1)
		refusePreHandshake(p, err)
	case isTimeout(err) && p.rx.n > 0:
		s.refusals.trickled.Add(1)
	case isTimeout(err):
		s.refusals.idle.Add(1)
	}
	return remote, err
}
