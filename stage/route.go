package stage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/seamlm/seam/wire"
)

// route dials the downstream stage the head names and runs the boundary
// handshake as its upstream. A failure is counted and logged with its
// detail; what the head is told depends on who it is (routeFailed).
func (s *Server) route(hc *headConn, j *job) error {
	r, err := j.f.Route()
	if err != nil {
		return err
	}
	if hc.down != nil {
		return fmt.Errorf("a downstream route is already set (%s): %w", hc.down.name, wire.ErrMalformed)
	}
	began := time.Now()
	dp, enc, err := s.dialDownstream(j.in.ctx, r)
	if err != nil {
		return s.routeFailed(j.in.ctx, hc, r.Addr, began, err)
	}
	hc.down, hc.downEnc = dp, enc
	s.log.Info("routed downstream", "session", 0, "peer", hc.name, "downstream", r.Addr, "downstream_layers", r.Peer, "encoding", enc.ID().String())
	go s.watchDownstream(hc, dp)
	return nil
}

// dialDownstream connects to the route's address, if this stage may, and
// handshakes with the stage there.
func (s *Server) dialDownstream(ctx context.Context, r wire.Route) (*peer, wire.Encoding, error) {
	addr, err := dialTarget(ctx, r.Addr, s.cfg.AllowDownstream, s.anonymous(), s.cfg.Timeout)
	if err != nil {
		return nil, nil, err
	}
	d := net.Dialer{Timeout: s.cfg.Timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dialing downstream stage %s: %w", r.Addr, err)
	}
	if conn, err = authClient(s.cfg.Auth, conn, r.Addr); err != nil {
		return nil, nil, fmt.Errorf("downstream stage %s: %w", r.Addr, err)
	}
	dp, err := newPeer(conn, "downstream stage "+r.Addr, s.cfg.Link, s.reg, s.cfg.Timeout)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	enc, err := s.handshakeDown(dp, r)
	if err != nil {
		dp.close()
		return nil, nil, err
	}
	return dp, enc, nil
}

// dialTarget is the address to dial for addr, or why this stage may not:
// an address --allow-downstream does not list, when it lists any; without
// a list, for an anonymous stage (--insecure), an address that is not
// loopback, so that strangers cannot use the stage to reach the hosts
// around it. The name is resolved once here and the address it resolved to
// is dialed, so that it cannot change between the check and the dial.
func dialTarget(ctx context.Context, addr string, allow []string, anonymous bool, timeout time.Duration) (string, error) {
	if len(allow) > 0 {
		if !slices.Contains(allow, addr) {
			return "", fmt.Errorf("may not dial %s: it is not in this stage's --allow-downstream list %v", addr, allow)
		}
		return addr, nil
	}
	if !anonymous {
		return addr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("may not dial %q: %w", addr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", fmt.Errorf("may not dial %s: resolving %s: %w", addr, host, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return "", fmt.Errorf("may not dial %s: it resolves to %v, not loopback, and a stage running --insecure dials only loopback addresses unless --allow-downstream lists them", addr, ip)
		}
	}
	return net.JoinHostPort(ips[0].Unmap().String(), port), nil
}

// routeFailed counts and logs a failed route, and returns what the head is
// told. A head that authenticated (or any peer of a stage without Auth)
// gets the whole error. An anonymous head gets one text, whatever failed
// (not allowed, nothing listening, something else listening, a stage that
// did not answer the handshake), no sooner than the timeout after its
// Route arrived, so that neither the words nor the wait tell an open port
// from a closed one or an allowed address from another; the log keeps the
// detail. The refusal of a Seam stage that answered is passed on whole:
// that stage chose what to say to an unauthenticated peer.
func (s *Server) routeFailed(ctx context.Context, hc *headConn, addr string, began time.Time, err error) error {
	n := s.refusals.routes.Add(1)
	s.log.Warn("route failed", "session", 0, "peer", hc.name, "downstream", addr, "err", err, "refused_so_far", n)
	var re *wire.RemoteError
	if !s.anonymous() || errors.As(err, &re) {
		return err
	}
	padUntil(ctx, began.Add(s.cfg.Timeout))
	return fmt.Errorf("could not route to downstream %s: the address is not allowed, or no Seam stage answered there; "+
		"a stage running --insecure tells no more to an unauthenticated head (its log has the detail)", addr)
}

// padUntil waits until t, or until ctx ends.
func padUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
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
