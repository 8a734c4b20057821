// Package pipeline is the head of a split model: it connects to the stages,
// checks that their layer ranges tile the model, routes each stage to the
// next, and drives sessions through the chain. Token ids go to the first
// stage; activations flow stage to stage; logits come back from the last
// stage directly. Any stage's error, disconnect or silence past the timeout
// aborts the request with an error that names the stage.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
)

// Options configure a chain.
type Options struct {
	Identity wire.Digest  // the model identity every stage must hold
	Config   model.Config // the model's shape (width, vocab, layer count)
	// Encoding of activations between stages. For lowrank, each boundary
	// uses its own codec, named by Codecs.
	Encoding wire.EncodingID
	// Encodings, when set, gives each boundary its own encoding (a plan's
	// choice), in chain order; it must have one entry per boundary.
	Encodings []wire.EncodingID
	// Codecs are the learned codecs the head knows (from its container), by
	// boundary; their digests go into the head's Hello, and lowrank routes
	// name each boundary's codec by its short id.
	Codecs   []wire.CodecDigest
	Registry *wire.Registry
	Timeout  time.Duration // bound on each reply, and on dialing
	// Hang is how long a stage may stay silent while a request waits
	// before the head declares it hung and fails the chain naming it
	// (DefaultHang when zero, never when negative). The head pings a quiet
	// stage after half of it; a stage computing a long frame sends
	// heartbeats (stage.Config.Heartbeat). It also bounds each handshake.
	Hang time.Duration
	Link link.Config // emulation on what the head sends
	// Auth authenticates and encrypts the connections to the stages
	// (package auth); nil leaves them plaintext.
	Auth *auth.Config
	// Logger receives connection, handshake and session events at Info and
	// every frame at Debug (nil: slog.Default()).
	Logger *slog.Logger
}

// Chain is a head's connections to every stage, in layer order.
type Chain struct {
	opts   Options
	stages []*stageConn
	log    *slog.Logger

	mu       sync.Mutex
	waiters  map[uint64]waiter // request id -> who waits for its reply
	failed   error             // the first failure: the chain is dead after it
	nextReq  uint64
	sessions map[uint64]bool
	idBytes  atomic.Uint64 // bytes of token-id frames sent to the first stage
	done     chan struct{} // closed at the first failure: stops the hang watch
	// maxPrefill is the most tokens one frame may carry through every
	// stage: the smallest --max-prefill the stages reported (generation 4
	// on), else the wire's bound.
	maxPrefill int
}

// waiter is a request waiting for its reply, and since when.
type waiter struct {
	ch    chan event
	since time.Time
}

func newChain(opts Options, log *slog.Logger) *Chain {
	if log == nil {
		log = slog.Default()
	}
	return &Chain{opts: opts, waiters: map[uint64]waiter{}, sessions: map[uint64]bool{}, log: log, done: make(chan struct{}),
		maxPrefill: wire.DefaultLimits().MaxTokens}
}

type stageConn struct {
	index  int
	addr   string
	name   string
	layers wire.LayerRange
	conn   net.Conn
	fr     *wire.Framer
	first  *prefixReader // the stage's first bytes, to say what answered instead of a stage
	wmu    sync.Mutex
	gen    uint16       // the agreed protocol generation (pings need 2)
	heard  atomic.Int64 // when a frame last came from the stage, Unix ns
	pinged atomic.Int64 // when the hang watch last pinged it, Unix ns
}

func (sc *stageConn) String() string {
	return fmt.Sprintf("stage %d (%s, %q, layers %v)", sc.index+1, sc.addr, sc.name, sc.layers)
}

// event is a reply for one request: logits, token ids, an ack, or an error.
type event struct {
	logits [][]float32
	ids    []int
	stats  wire.StageStats // a Ping's answer
	err    error
}

// Dial connects to the stages at addrs, which must be given in layer order.
func Dial(ctx context.Context, addrs []string, opts Options) (*Chain, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no stages given")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.Registry == nil {
		opts.Registry = wire.Default
	}
	if opts.Encoding == wire.EncodingNone {
		opts.Encoding = wire.EncodingF32
	}
	if opts.Hang == 0 {
		opts.Hang = DefaultHang
	}
	c := newChain(opts, opts.Logger)
	for i, addr := range addrs {
		sc, err := c.connect(ctx, i, addr)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.stages = append(c.stages, sc)
	}
	if err := checkTiling(c.stages, opts.Config.NLayers); err != nil {
		c.Close()
		return nil, err
	}
	for _, sc := range c.stages {
		go c.read(sc)
	}
	if c.opts.Hang > 0 {
		go c.watch()
	}
	if err := c.learnLimits(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.route(ctx); err != nil {
		c.Close()
		return nil, err
	}
	c.log.Info("pipeline ready", "session", 0, "stage", "head", "stages", len(c.stages), "encoding", opts.Encoding.String(), "plan", strings.Join(c.Stages(), "; "))
	return c, nil
}

func (c *Chain) connect(ctx context.Context, i int, addr string) (*stageConn, error) {
	d := net.Dialer{Timeout: c.opts.Timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &DialError{Index: i, Addr: addr, Err: err}
	}
	if c.opts.Auth != nil {
		if conn, _, err = c.opts.Auth.Client(ctx, conn, addr); err != nil {
			// A DialError, as a refused TCP connection is: a replica that
			// dies between accepting and finishing TLS is moved past.
			return nil, &DialError{Index: i, Addr: addr, Err: err}
		}
	}
	w := net.Conn(conn)
	if c.opts.Link.RateMbps > 0 || c.opts.Link.Latency > 0 {
		if w, err = link.Wrap(conn, c.opts.Link); err != nil {
			conn.Close()
			return nil, err
		}
	}
	first := &prefixReader{r: conn}
	sc := &stageConn{index: i, addr: addr, conn: w, fr: wire.NewFramer(w, first), first: first}
	sc.fr.SetRegistry(c.opts.Registry)
	c.log.Info("connected", "session", 0, "stage", i+1, "addr", addr)
	if err := c.handshake(sc); err != nil {
		w.Close()
		return nil, &DialError{Index: i, Addr: addr, Err: err}
	}
	c.log.Info("handshake accepted", "session", 0, "stage", i+1, "addr", addr, "name", sc.name, "layers", sc.layers)
	return sc, nil
}

// handshake introduces the head (a peer holding no layers) and learns the
// stage's range from its HelloAck.
func (c *Chain) handshake(sc *stageConn) error {
	cfg := c.opts.Config
	h := wire.Hello{
		Generation: wire.MaxGeneration, MinGeneration: wire.MinGeneration, MaxGeneration: wire.MaxGeneration,
		Model: c.opts.Identity, Width: uint32(cfg.Dim), Vocab: uint32(cfg.VocabSize),
		Encodings: c.opts.Registry.IDs(), Encoding: wire.EncodingF32, Codecs: c.opts.Codecs, Name: "head",
	}
	if err := sc.fr.WriteHello(wire.KindHello, &h); err != nil {
		return err
	}
	wait := c.opts.Timeout
	if c.opts.Hang > 0 {
		wait = min(wait, c.opts.Hang) // a live stage answers at once, computing or not
	}
	sc.conn.SetReadDeadline(time.Now().Add(wait))
	defer sc.conn.SetReadDeadline(time.Time{})
	f, err := sc.fr.ReadFrame()
	if err != nil {
		if what := sc.first.notSeam(); what != "" {
			return fmt.Errorf("%s, not the Seam stage protocol: give the address a 'seam serve' listens on", what)
		}
		var ne net.Error
		if len(sc.first.prefix) == 0 && errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("no handshake reply within %v: is a 'seam serve' listening there, and not stopped? (an HTTP or other server waits silently for its own protocol): %w", wait, err)
		}
		return fmt.Errorf("handshake: %w", err)
	}
	if f.Kind == wire.KindError {
		re, err := f.RemoteError()
		if err != nil {
			return err
		}
		return fmt.Errorf("refused the connection: %w", re)
	}
	if f.Kind != wire.KindHelloAck {
		return fmt.Errorf("answered the Hello with %v: %w", f.Kind, wire.ErrMalformed)
	}
	ack, err := f.Hello()
	if err != nil {
		return err
	}
	agreed, err := wire.CheckHelloAck(&h, &ack)
	if err != nil {
		return err
	}
	sc.fr.Pin(agreed)
	sc.gen = agreed.Generation
	// The head holds no layers, so the handshake skipped the boundary
	// checks; it learns the range here and checks the tiling of all stages.
	sc.layers, sc.name = ack.Layers, ack.Name
	if ack.Layers.Start == ack.Layers.End {
		return fmt.Errorf("%q is a pool member that holds no layers yet (seam serve without --layers): give the pool with --pool, which plans and assigns the layers, not --stages", ack.Name)
	}
	return nil
}

// checkTiling requires the stages, in the order given, to hold [0, n) with
// no gap and no overlap, and says exactly what is wrong otherwise.
func checkTiling(stages []*stageConn, n int) error {
	var problems []string
	next := uint32(0)
	for _, sc := range stages {
		r := sc.layers
		switch {
		case r.Start > next:
			problems = append(problems, fmt.Sprintf("layers [%d, %d) are held by no stage (before %v)", next, r.Start, sc))
		case r.Start < next:
			problems = append(problems, fmt.Sprintf("%v overlaps the previous stage, which ends at layer %d", sc, next))
		}
		next = max(next, r.End)
	}
	if int(next) < n {
		problems = append(problems, fmt.Sprintf("layers [%d, %d) are held by no stage (after the last)", next, n))
	}
	if int(next) > n {
		problems = append(problems, fmt.Sprintf("stages reach layer %d, but the model has %d", next, n))
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("stage layer ranges do not tile the model's %d layers: %s", n, strings.Join(problems, "; "))
	}
	return nil
}

// route tells each stage but the last to connect to its successor.
func (c *Chain) route(ctx context.Context) error {
	if n := len(c.opts.Encodings); n > 0 && n != len(c.stages)-1 {
		return fmt.Errorf("%d boundary encodings given for %d stages (want %d)", n, len(c.stages), len(c.stages)-1)
	}
	for i := 0; i+1 < len(c.stages); i++ {
		next := c.stages[i+1]
		r := wire.Route{Addr: next.addr, Peer: next.layers, Encoding: c.opts.Encoding}
		if len(c.opts.Encodings) > 0 {
			r.Encoding = c.opts.Encodings[i]
		}
		if r.Encoding == wire.EncodingLowRank {
			id, err := c.codecAt(next.layers.Start)
			if err != nil {
				return err
			}
			r.Codec = id
		}
		req, ch := c.expect()
		err := c.send(c.stages[i], func(fr *wire.Framer) error { return fr.WriteRoute(wire.Meta{Request: req}, &r) })
		if err == nil {
			_, err = c.wait(ctx, req, ch)
		}
		if err != nil {
			// err names stage i+1 already; name only where it was sent.
			return fmt.Errorf("routing to stage %d (%s): %w", i+2, next.addr, err)
		}
		c.log.Info("routed", "session", 0, "stage", i+1, "to", next.addr, "encoding", r.Encoding.String())
	}
	return nil
}

// codecAt is the short id of the codec for the boundary entering layer b.
func (c *Chain) codecAt(b uint32) (uint32, error) {
	for _, cd := range c.opts.Codecs {
		if cd.Boundary == b {
			return cd.ID, nil
		}
	}
	return 0, fmt.Errorf("--wire lowrank: no codec is attached for the boundary at layer %d (fit one with seam fit-codec and attach it with seam codec add)", b)
}

// Close ends every session and connection.
func (c *Chain) Close() error {
	c.fail(errors.New("chain closed"))
	for _, sc := range c.stages {
		sc.conn.Close()
	}
	return nil
}

// Stages lists the stages' addresses and ranges, in layer order.
func (c *Chain) Stages() []string {
	var out []string
	for _, sc := range c.stages {
		out = append(out, sc.String())
	}
	return out
}

// expect registers a new request id and returns the channel its reply comes on.
func (c *Chain) expect() (uint64, chan event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextReq++
	ch := make(chan event, 1)
	c.waiters[c.nextReq] = waiter{ch: ch, since: time.Now()}
	return c.nextReq, ch
}

func (c *Chain) deliver(req uint64, ev event) {
	c.mu.Lock()
	w, ok := c.waiters[req]
	delete(c.waiters, req)
	c.mu.Unlock()
	if ok {
		w.ch <- ev
	}
}

// fail records the chain's first failure and wakes every waiter with it.
func (c *Chain) fail(err error) {
	c.mu.Lock()
	first := c.failed == nil
	if first {
		c.failed = err
		close(c.done)
	}
	waiters := c.waiters
	c.waiters = map[uint64]waiter{}
	c.mu.Unlock()
	for _, w := range waiters {
		w.ch <- event{err: err}
	}
}

// wait blocks for request req's reply, the chain's failure, the timeout or ctx.
func (c *Chain) wait(ctx context.Context, req uint64, ch chan event) (event, error) {
	t := time.NewTimer(c.opts.Timeout)
	defer t.Stop()
	select {
	case ev := <-ch:
		return ev, ev.err
	case <-t.C:
		err := fmt.Errorf("no reply from the stages within %v (request %d); the chain is abandoned", c.opts.Timeout, req)
		if silent := c.silentStages(); silent != nil {
			err = fmt.Errorf("%w: %w", silent, err) // name where it is stuck
		}
		c.fail(err)
		return event{}, err
	case <-ctx.Done():
		// Only this request is abandoned: its late reply finds no waiter
		// and is dropped, and the chain goes on serving other sessions.
		c.forget(req)
		return event{}, ctx.Err()
	}
}

func (c *Chain) send(sc *stageConn, write func(*wire.Framer) error) error {
	c.mu.Lock()
	failed := c.failed
	c.mu.Unlock()
	if failed != nil {
		return failed
	}
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	sc.conn.SetWriteDeadline(time.Now().Add(c.opts.Timeout))
	if err := write(sc.fr); err != nil {
		err = fmt.Errorf("%v: %w", sc, err)
		c.fail(err)
		return err
	}
	return nil
}

// read receives one stage's frames: results (last stage), acks, errors.
// Anything that ends it fails the chain, naming the stage.
func (c *Chain) read(sc *stageConn) {
	for {
		f, err := sc.fr.ReadFrame()
		if err != nil {
			c.fail(&LostError{Index: sc.index, Stage: sc.String(), Err: err})
			return
		}
		sc.heard.Store(time.Now().UnixNano())
		if c.log.Enabled(context.Background(), slog.LevelDebug) {
			c.log.Debug("frame from stage", "session", f.Session, "stage", sc.index+1, "kind", f.Kind.String(), "request", f.Request,
				"start", f.Start, "tokens", f.Tokens, "bytes", len(f.Payload))
		}
		switch f.Kind {
		case wire.KindResult:
			c.deliver(f.Request, c.logits(sc, f))
		case wire.KindReset, wire.KindRoute:
			c.deliver(f.Request, event{})
		case wire.KindPing:
			if f.Request == 0 {
				continue // a heartbeat: the stage is computing, and alive
			}
			c.deliver(f.Request, pingAnswer(sc, f))
		case wire.KindError:
			re, err := f.RemoteError()
			if err == nil {
				err = &StageError{Stage: sc.String(), Remote: re}
			} else {
				err = fmt.Errorf("%v sent a bad Error frame: %w", sc, err)
			}
			c.log.Warn("stage error", "session", f.Session, "stage", sc.index+1, "name", sc.name, "request", f.Request, "err", err)
			if f.Request == 0 {
				c.fail(err)
				return
			}
			c.deliver(f.Request, event{err: err})
		default:
			c.fail(fmt.Errorf("%v sent an unexpected %v frame: %w", sc, f.Kind, wire.ErrMalformed))
			return
		}
	}
}

func (c *Chain) logits(sc *stageConn, f *wire.Frame) event {
	if sc.index != len(c.stages)-1 {
		return event{err: fmt.Errorf("%v sent a result, but only the last stage computes logits: %w", sc, wire.ErrMalformed)}
	}
	if f.Flags&wire.FlagTokenIDs != 0 {
		raw, err := f.TokenIDs(nil)
		if err != nil {
			return event{err: fmt.Errorf("%v: result: %w", sc, err)}
		}
		ids := make([]int, len(raw))
		for i, id := range raw {
			ids[i] = int(id)
		}
		return event{ids: ids}
	}
	flat, err := f.Activations(nil)
	if err != nil {
		return event{err: fmt.Errorf("%v: result: %w", sc, err)}
	}
	vocab := c.opts.Config.VocabSize
	out := make([][]float32, int(f.Tokens))
	for i := range out {
		out[i] = flat[i*vocab : (i+1)*vocab]
	}
	return event{logits: out}
}

// NewSession opens a session (a KV cache on every stage).
func (c *Chain) NewSession(ctx context.Context) (*Session, error) {
	id := rand.Uint64() | 1
	for _, sc := range c.stages {
		req, ch := c.expect()
		if err := c.send(sc, func(fr *wire.Framer) error { return fr.WriteReset(wire.Meta{Session: id, Request: req}) }); err != nil {
			return nil, err
		}
		if _, err := c.wait(ctx, req, ch); err != nil {
			(&Session{chain: c, id: id}).Close() // free it on the stages that opened it
			return nil, fmt.Errorf("opening a session: %w", err)
		}
	}
	c.log.Info("session opened", "session", id, "stage", "head", "stages", len(c.stages))
	return &Session{chain: c, id: id}, nil
}

// Session is one conversation through the chain; it implements generate.Session.
// A session of a Supervisor with replicas survives its chain's failure:
// it moves to the replacement chain and replays the tokens it holds
// (failover.go). It is used by one goroutine at a time.
type Session struct {
	chain *Chain
	id    uint64
	sup   *Supervisor // nil for a session of a bare Chain
	hist  []uint32    // the tokens at positions [0, len), kept for a replay
}

// Forward sends tokens to the first stage and waits for the last stage's logits.
func (s *Session) Forward(ctx context.Context, tokens []int, pos int, all bool) ([][]float32, error) {
	flags := wire.Flags(0)
	if all {
		flags |= wire.FlagAllLogits
	}
	ev, err := s.request(ctx, tokens, pos, flags)
	if err != nil {
		return nil, err
	}
	want := 1
	if all {
		want = len(tokens)
	}
	if len(ev.logits) != want {
		return nil, fmt.Errorf("last stage returned logits for %d positions, want %d", len(ev.logits), want)
	}
	return ev.logits, nil
}

// ForwardArgmax is Forward for greedy decoding: the last stage returns only
// the most likely next token, not the logits.
func (s *Session) ForwardArgmax(ctx context.Context, tokens []int, pos int) (int, error) {
	ev, err := s.request(ctx, tokens, pos, wire.FlagGreedy)
	if err != nil {
		return 0, err
	}
	if len(ev.ids) != 1 || ev.ids[0] >= s.chain.opts.Config.VocabSize {
		return 0, fmt.Errorf("last stage answered a greedy request with token ids %v, want one id below %d", ev.ids, s.chain.opts.Config.VocabSize)
	}
	return ev.ids[0], nil
}

func (s *Session) request(ctx context.Context, tokens []int, pos int, flags wire.Flags) (event, error) {
	ids := make([]uint32, len(tokens))
	for i, t := range tokens {
		if t < 0 || t >= s.chain.opts.Config.VocabSize {
			return event{}, fmt.Errorf("token id %d is outside the vocabulary of %d", t, s.chain.opts.Config.VocabSize)
		}
		ids[i] = uint32(t)
	}
	if pos > len(s.hist) && s.sup != nil && s.sup.replicated {
		return event{}, fmt.Errorf("tokens at position %d, but the session holds %d", pos, len(s.hist))
	}
	ev, err := s.send(ctx, ids, pos, flags)
	// Each failover moves past at least one replica, so this ends.
	for tries := 0; s.canFailOver(ctx, err) && tries < s.sup.maxFailovers(); tries++ {
		if ferr := s.failOver(ctx, err); ferr != nil {
			return event{}, ferr
		}
		ev, err = s.send(ctx, ids, pos, flags)
	}
	if err == nil {
		s.remember(ids, pos)
	}
	return ev, err
}

// send sends tokens to the first stage in frames of at most the chain's
// prefill limit (bit-identical to one frame: a stage's layers compute each
// position alike however positions are grouped) and returns the reply to
// the last, with the logits of every frame when all are wanted.
func (s *Session) send(ctx context.Context, ids []uint32, pos int, flags wire.Flags) (event, error) {
	limit := s.chain.maxPrefill
	if len(ids) <= limit {
		return s.sendFrame(ctx, ids, pos, flags)
	}
	var all [][]float32
	for at := 0; at < len(ids); at += limit {
		part := ids[at:min(at+limit, len(ids))]
		f := flags
		if at+len(part) < len(ids) && flags&wire.FlagAllLogits == 0 {
			f = wire.FlagGreedy // only the last frame's answer is wanted: take 4 bytes
		}
		ev, err := s.sendFrame(ctx, part, pos+at, f)
		if err != nil {
			return ev, err
		}
		if at+len(part) == len(ids) {
			if flags&wire.FlagAllLogits != 0 {
				ev.logits = append(all, ev.logits...)
			}
			return ev, nil
		}
		all = append(all, ev.logits...)
	}
	panic("unreachable")
}

// sendFrame sends one frame to the first stage and waits for its reply.
func (s *Session) sendFrame(ctx context.Context, ids []uint32, pos int, flags wire.Flags) (event, error) {
	c := s.chain
	kind := wire.KindDecode
	if len(ids) > 1 || flags&wire.FlagAllLogits != 0 {
		kind = wire.KindPrefill
	}
	req, ch := c.expect()
	m := wire.Meta{Session: s.id, Request: req, Start: uint32(pos)}
	c.log.Debug("frame to stage", "session", s.id, "stage", 1, "kind", kind.String(), "request", req, "start", pos, "tokens", len(ids), "flags", uint8(flags))
	if err := c.send(c.stages[0], func(fr *wire.Framer) error { return fr.WriteTokenIDs(kind, flags, m, ids) }); err != nil {
		return event{}, err
	}
	c.idBytes.Add(uint64(wire.HeaderSize + 4*len(ids)))
	return c.wait(ctx, req, ch)
}

// Close ends the session on every stage.
func (s *Session) Close() error {
	s.chain.log.Info("session closed", "session", s.id, "stage", "head")
	for _, sc := range s.chain.stages {
		s.chain.send(sc, func(fr *wire.Framer) error { return fr.WriteClose(wire.Meta{Session: s.id}) })
	}
	return nil
}
