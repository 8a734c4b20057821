package stage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
)

// PoolConfig describes a pool member: a stage started without a layer
// range, which a head assigns one after measuring the pool (docs/wire.md,
// "Pool members").
type PoolConfig struct {
	// Base is the stage configuration once assigned: Name, Link, Timeout,
	// Logger, AllowDownstream. Its Model, Registry, Codecs and MaxSessions
	// are set at assignment.
	Base     Config
	Identity wire.Digest
	Model    model.Config       // the whole model's shape
	Codecs   []wire.CodecDigest // the container's codecs, every boundary
	Describe wire.Description   // free memory and the measured speeds
	// Open maps layers [first, last) of the model (with the embedding for
	// a first part and the classifier for a last one).
	Open func(first, last int) (*Part, error)
	// Dial connects to another member to measure the link (TCP when nil);
	// Base.Auth then authenticates the connection.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

// Part is a mapped layer range of the model.
type Part struct {
	Model  *model.Model
	Codecs map[int]*codec.Codec // by boundary, for the range's two boundaries
	Close  func() error
	// KVBudget, when > 0, replaces Base.KVBudget: a budget resolved from
	// the memory left once the range's weights were loaded.
	KVBudget int64
}

// PoolMember serves the pool protocol until a head assigns it a layer
// range, and from then on serves that range as a stage. A member is
// assigned once: a head that finds every member assigned reuses their
// ranges; one that wants other ranges must restart the members.
type PoolMember struct {
	cfg PoolConfig
	log *slog.Logger

	mu        sync.Mutex
	srv       *Server // nil until assigned
	part      *Part
	listeners []net.Listener
	conns     map[net.Conn]struct{} // pool connections (the server tracks its own)
	closed    bool
	wg        sync.WaitGroup
	refused   atomic.Uint64 // connections closed for MaxConns before the assignment
}

// NewPoolMember checks cfg and returns an unassigned member.
func NewPoolMember(cfg PoolConfig) (*PoolMember, error) {
	if cfg.Open == nil {
		return nil, errors.New("pool member: no way to open layers")
	}
	if err := cfg.Model.Validate(); err != nil {
		return nil, fmt.Errorf("pool member: %w", err)
	}
	if _, err := wire.AppendDescription(nil, &cfg.Describe); err != nil {
		return nil, fmt.Errorf("pool member: %w", err)
	}
	if cfg.Base.Timeout <= 0 {
		cfg.Base.Timeout = 30 * time.Second
	}
	p := &PoolMember{cfg: cfg, log: cfg.Base.Logger, conns: map[net.Conn]struct{}{}}
	if p.log == nil {
		p.log = slog.Default()
	}
	return p, nil
}

// Assigned is the range assigned so far (empty before).
func (p *PoolMember) Assigned() wire.LayerRange {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		return wire.LayerRange{}
	}
	return p.srv.Layers()
}

// Serve accepts connections on l until Close. Before the assignment each
// connection speaks the pool protocol; after it, the stage's.
func (p *PoolMember) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return l.Close()
	}
	p.listeners = append(p.listeners, l)
	p.mu.Unlock()
	closed := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.closed
	}
	return acceptLoop(l, closed, p.log.With("stage", p.cfg.Base.Name), p.serveConn)
}

// serveConn hands an accepted connection to the stage, once assigned, or
// serves the pool protocol on it; connections past the stage's MaxConns are
// closed at once.
func (p *PoolMember) serveConn(conn net.Conn) {
	p.mu.Lock()
	srv, closed, full := p.srv, p.closed, len(p.conns) >= p.maxConns()
	if !closed && !full && srv == nil {
		p.conns[conn] = struct{}{}
		p.wg.Add(1)
	}
	p.mu.Unlock()
	switch {
	case closed:
		conn.Close()
	case srv != nil:
		srv.ServeConn(conn)
	case full:
		conn.Close()
		if n := p.refused.Add(1); n&(n-1) == 0 {
			p.log.Warn("connection refused: too many connections", "session", 0, "stage", p.cfg.Base.Name, "peer", conn.RemoteAddr().String(), "max_conns", p.maxConns(), "refused_so_far", n)
		}
	default:
		go func() {
			defer p.wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.conns, conn)
				p.mu.Unlock()
				conn.Close()
			}()
			p.servePool(conn)
		}()
	}
}

func (p *PoolMember) maxConns() int {
	if p.cfg.Base.MaxConns > 0 {
		return p.cfg.Base.MaxConns
	}
	return DefaultMaxConns
}

// Close stops accepting, closes every connection, stops the stage and
// unmaps its layers.
func (p *PoolMember) Close() error { return p.Shutdown("") }

// Shutdown is Close for a signal: an assigned member shuts its stage down
// gracefully (Server.Shutdown: heads are told why), then unmaps.
func (p *PoolMember) Shutdown(reason string) error {
	p.mu.Lock()
	p.closed = true
	for _, l := range p.listeners {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	srv, part := p.srv, p.part
	p.mu.Unlock()
	p.wg.Wait()
	var err error
	if srv != nil {
		err = srv.Shutdown(reason)
	}
	if part != nil && part.Close != nil {
		err = errors.Join(err, part.Close())
	}
	return err
}

// hello is an unassigned member's handshake message: no layers.
func (p *PoolMember) hello() wire.Hello {
	c := p.cfg.Model
	ids := wire.Default.IDs()
	if len(p.cfg.Codecs) > 0 {
		ids = append(ids, wire.EncodingLowRank)
	}
	return wire.Hello{
		Generation: wire.MaxGeneration, MinGeneration: wire.MinGeneration, MaxGeneration: wire.MaxGeneration,
		Model: p.cfg.Identity, Width: uint32(c.Dim), Vocab: uint32(c.VocabSize),
		Encodings: ids, Encoding: wire.EncodingF32, Codecs: p.cfg.Codecs, Name: p.cfg.Base.Name,
	}
}

// servePool runs the handshake as an unassigned member, then answers pool
// frames until the peer leaves. Only a head (a peer holding no layers) of
// a generation with pool frames is served.
func (p *PoolMember) servePool(conn net.Conn) {
	if a := p.cfg.Base.Auth; a != nil {
		c, peer, err := a.Server(context.Background(), conn)
		if err != nil {
			return // refused and logged with the peer's fingerprint
		}
		p.log.Info("peer authenticated", "session", 0, "stage", p.cfg.Base.Name, "peer", conn.RemoteAddr().String(), "key", peer.String())
		conn = c
	}
	pe, err := newPeer(conn, conn.RemoteAddr().String(), p.cfg.Base.Link, wire.Default, p.cfg.Base.Timeout)
	if err != nil {
		p.log.Warn("connection setup failed", "session", 0, "stage", p.cfg.Base.Name, "peer", conn.RemoteAddr().String(), "err", err)
		return
	}
	if err := p.handshake(pe); err != nil {
		p.log.Warn("handshake refused", "session", 0, "stage", p.cfg.Base.Name, "peer", pe.name, "err", err)
		return
	}
	for {
		f, err := pe.fr.ReadFrame()
		if err != nil {
			if !isClosedConn(err) {
				p.log.Warn("pool connection failed", "session", 0, "stage", p.cfg.Base.Name, "peer", pe.name, "err", err)
				pe.sendError(wire.Meta{}, err)
			}
			return
		}
		if err := p.frame(pe, f); err != nil {
			pe.sendError(wire.Meta{Request: f.Request}, fmt.Errorf("pool member %q: %w", p.cfg.Base.Name, err))
			if errors.Is(err, wire.ErrMalformed) {
				return
			}
		}
	}
}

func (p *PoolMember) handshake(pe *peer) error {
	pe.conn.SetReadDeadline(time.Now().Add(p.cfg.Base.Timeout))
	defer pe.conn.SetReadDeadline(time.Time{})
	defer withPreHandshakeLimits(pe.fr)()
	f, err := pe.fr.ReadFrame()
	if err != nil {
		refusePreHandshake(pe, err)
		return err
	}
	if f.Kind != wire.KindHello {
		err := fmt.Errorf("first frame is %v, want a Hello: %w", f.Kind, wire.ErrMalformed)
		pe.sendError(wire.Meta{}, err)
		return err
	}
	remote, err := f.Hello()
	if err != nil {
		pe.sendError(wire.Meta{}, err)
		return err
	}
	local := p.hello()
	agreed, err := wire.CheckHello(&local, &remote)
	switch {
	case err != nil:
	case remote.Layers.Start != remote.Layers.End:
		err = fmt.Errorf("stage %q holding layers %v connected, but this pool member holds no layers yet: a head assigns them first (seam run --pool): %w",
			remote.Name, remote.Layers, wire.ErrHandshake)
	case agreed.Generation < wire.PoolGeneration:
		err = fmt.Errorf("head %q speaks generations %d..%d; this is an unassigned pool member (seam serve without --layers), which needs a head of generation %d or later with --pool to assign it layers: %w",
			remote.Name, remote.MinGeneration, remote.MaxGeneration, wire.PoolGeneration, wire.ErrGeneration)
	}
	if err != nil {
		err = fmt.Errorf("pool member %q: %w", p.cfg.Base.Name, err)
		pe.sendError(wire.Meta{}, withholdDigests(err, p.anonymous(), helloDigests(p.cfg.Identity, p.cfg.Codecs)))
		return err
	}
	ack := wire.Ack(local, agreed)
	if err := pe.write(func(fr *wire.Framer) error { return fr.WriteHello(wire.KindHelloAck, &ack) }); err != nil {
		return err
	}
	pe.fr.Pin(agreed)
	pe.name = fmt.Sprintf("head %s (%s)", remote.Name, pe.name)
	return nil
}

// frame answers one frame of the pool protocol.
func (p *PoolMember) frame(pe *peer, f *wire.Frame) error {
	req := f.Request
	switch f.Kind {
	case wire.KindDescribe:
		if len(f.Payload) != 0 {
			return fmt.Errorf("a head sent a description: %w", wire.ErrMalformed)
		}
		d := p.cfg.Describe
		return pe.write(func(fr *wire.Framer) error { return fr.WriteDescribe(req, &d) })
	case wire.KindProbe:
		return pe.write(func(fr *wire.Framer) error { return fr.WriteProbe(req, 0) })
	case wire.KindMeasure:
		addr, err := f.MeasureAddr()
		if err != nil {
			return err
		}
		r, err := p.measure(addr)
		if err != nil {
			return err
		}
		return pe.write(func(fr *wire.Framer) error { return fr.WriteLinkReport(req, &r) })
	case wire.KindAssign:
		a, err := f.Assignment()
		if err != nil {
			return err
		}
		if err := p.assign(a); err != nil {
			return err
		}
		return pe.write(func(fr *wire.Framer) error { return fr.WriteAssign(req, &a) })
	}
	return fmt.Errorf("this pool member holds no layers yet, so a head may not send %v frames; assign it layers first (seam run --pool): %w", f.Kind, wire.ErrMalformed)
}

// assign maps the range and starts serving it. It runs once; the same
// assignment again is acknowledged, any other refused.
func (p *PoolMember) assign(a wire.Assignment) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		if p.srv.Layers() == a.Layers && p.srv.cfg.MaxSessions == int(a.MaxSessions) {
			return nil
		}
		return fmt.Errorf("already assigned layers %v with %d sessions; restart it to serve %v: %w",
			p.srv.Layers(), p.srv.cfg.MaxSessions, a.Layers, wire.ErrHandshake)
	}
	if p.closed {
		return fmt.Errorf("shutting down: %w", wire.ErrHandshake)
	}
	n := p.cfg.Model.NLayers
	if int(a.Layers.End) > n || a.MaxSessions > 1<<16 {
		return fmt.Errorf("assignment of layers %v with %d sessions: the model has %d layers and a stage at most 65536 sessions: %w", a.Layers, a.MaxSessions, n, wire.ErrHandshake)
	}
	t0 := time.Now()
	part, err := p.cfg.Open(int(a.Layers.Start), int(a.Layers.End))
	if err != nil {
		return fmt.Errorf("mapping layers %v: %w", a.Layers, err)
	}
	cfg := p.cfg.Base
	cfg.Model, cfg.Identity, cfg.MaxSessions = part.Model, p.cfg.Identity, int(a.MaxSessions)
	if part.KVBudget > 0 {
		cfg.KVBudget = part.KVBudget
	}
	if len(part.Codecs) > 0 {
		if err := UseCodecs(&cfg, part.Codecs); err != nil {
			part.Close()
			return err
		}
	}
	srv, err := New(cfg)
	if err != nil {
		if part.Close != nil {
			part.Close()
		}
		return err
	}
	p.srv, p.part = srv, part
	p.log.Info("assigned", "session", 0, "stage", cfg.Name, "layers", a.Layers, "sessions", a.MaxSessions, "mapped_in", time.Since(t0).Round(time.Millisecond))
	return nil
}

// anonymous is Server.anonymous for the member: it runs --insecure.
func (p *PoolMember) anonymous() bool { return p.cfg.Base.Auth != nil && p.cfg.Base.Auth.Insecure }

// measure measures the link to the member at addr, where the member may
// dial it (dialTarget: an anonymous member dials only loopback addresses,
// or those --allow-downstream lists). A failure is logged with its
// detail; an anonymous head is told one text, after the timeout, as for
// a route (Server.routeFailed).
func (p *PoolMember) measure(addr string) (wire.LinkReport, error) {
	began := time.Now()
	r, err := p.measureLink(addr)
	if err == nil || !p.anonymous() {
		return r, err
	}
	p.log.Warn("measuring a link failed", "session", 0, "stage", p.cfg.Base.Name, "to", addr, "err", err)
	var re *wire.RemoteError
	if errors.As(err, &re) {
		return r, err
	}
	padUntil(context.Background(), began.Add(p.cfg.Base.Timeout))
	return r, fmt.Errorf("could not measure the link to %s: the address is not allowed, or no Seam node answered there; "+
		"a member running --insecure tells no more to an unauthenticated head (its log has the detail)", addr)
}

// measureLink measures the link from this member to the member at addr,
// as a head would: a handshake holding no layers, then Probe frames.
func (p *PoolMember) measureLink(addr string) (wire.LinkReport, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.Base.Timeout)
	defer cancel()
	var allow []string
	if p.anonymous() {
		allow = p.cfg.Base.AllowDownstream // a member that authenticates its peers measures any link it is asked to
	}
	target, err := dialTarget(ctx, addr, allow, p.anonymous(), p.cfg.Base.Timeout)
	if err != nil {
		return wire.LinkReport{}, err
	}
	var conn net.Conn
	if p.cfg.Dial != nil {
		conn, err = p.cfg.Dial(ctx, target)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", target)
	}
	if err != nil {
		return wire.LinkReport{}, fmt.Errorf("measuring the link to %s: %w", addr, err)
	}
	if conn, err = authClient(p.cfg.Base.Auth, conn, addr); err != nil {
		return wire.LinkReport{}, fmt.Errorf("measuring the link to %s: %w", addr, err)
	}
	pe, err := newPeer(conn, "pool member "+addr, p.cfg.Base.Link, wire.Default, p.cfg.Base.Timeout)
	if err != nil {
		conn.Close()
		return wire.LinkReport{}, err
	}
	defer pe.close()
	h := p.hello()
	h.Name = p.cfg.Base.Name
	if err := pe.write(func(fr *wire.Framer) error { return fr.WriteHello(wire.KindHello, &h) }); err != nil {
		return wire.LinkReport{}, err
	}
	pe.conn.SetDeadline(time.Now().Add(p.cfg.Base.Timeout))
	f, err := pe.fr.ReadFrame()
	if err != nil {
		return wire.LinkReport{}, fmt.Errorf("measuring the link to %s: handshake: %w", addr, err)
	}
	if f.Kind != wire.KindHelloAck {
		if re, rerr := f.RemoteError(); rerr == nil {
			return wire.LinkReport{}, fmt.Errorf("measuring the link to %s: refused: %w", addr, re)
		}
		return wire.LinkReport{}, fmt.Errorf("measuring the link to %s: answered the Hello with %v: %w", addr, f.Kind, wire.ErrMalformed)
	}
	ack, err := f.Hello()
	if err != nil {
		return wire.LinkReport{}, err
	}
	agreed, err := wire.CheckHelloAck(&h, &ack)
	if err != nil {
		return wire.LinkReport{}, fmt.Errorf("measuring the link to %s: %w", addr, err)
	}
	pe.fr.Pin(agreed)
	fig, err := link.Measure(ctx, &FrameProber{Framer: pe.fr, Write: pe.write}, link.MeasureOptions{})
	if err != nil {
		return wire.LinkReport{}, fmt.Errorf("measuring the link to %s: %w", addr, err)
	}
	return wire.LinkReport{RTTNanos: uint64(max(fig.RTT, 1)), BitsPerSecond: uint64(max(fig.Mbps*1e6, 1))}, nil
}

// FrameProber probes a link with Probe frames over a pinned connection on
// which nothing else is read meanwhile.
type FrameProber struct {
	Framer *wire.Framer
	// Write runs a framed write (under the connection's write lock); nil
	// writes directly.
	Write func(func(*wire.Framer) error) error
	req   uint64
}

// Probe sends n bytes and waits for the empty answer.
func (fp *FrameProber) Probe(ctx context.Context, n int) error {
	fp.req++
	req := fp.req
	write := func(fr *wire.Framer) error { return fr.WriteProbe(req, n) }
	var err error
	if fp.Write != nil {
		err = fp.Write(write)
	} else {
		err = write(fp.Framer)
	}
	if err != nil {
		return err
	}
	f, err := fp.Framer.ReadFrame()
	if err != nil {
		return err
	}
	switch {
	case f.Kind == wire.KindError:
		re, rerr := f.RemoteError()
		if rerr != nil {
			return rerr
		}
		return re
	case f.Kind != wire.KindProbe || f.Request != req || len(f.Payload) != 0:
		return fmt.Errorf("answered probe %d with %v (request %d, %d bytes): %w", req, f.Kind, f.Request, len(f.Payload), wire.ErrMalformed)
	}
	return nil
}
