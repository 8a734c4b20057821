package stage

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/seamlm/seam/wire"
)

// DefaultMaxConns bounds the connections a stage holds at once when
// Config.MaxConns is zero. A head holds one per stage; an upstream stage
// one per head it carries; a pool one per probe. 256 is far above a real
// cluster's needs and far below a process's usual 1024 descriptors, so a
// flood of idle connections is refused before it can exhaust them.
const DefaultMaxConns = 256

// Accept back-off: a resource error from Accept (out of descriptors, out of
// buffers) is waited out, doubling from the first to the last delay, and
// never ends the server.
const (
	acceptBackoffFirst = 5 * time.Millisecond
	acceptBackoffLast  = time.Second
)

// acceptLoop accepts connections on l and hands each to serve until closed
// reports true. Errors that a later Accept may not repeat (descriptors or
// buffers exhausted, a connection aborted before it was accepted, a
// timeout) are logged and retried with back-off; any other error ends the
// loop and is returned, except after closed, when nil is returned.
func acceptLoop(l net.Listener, closed func() bool, log *slog.Logger, serve func(net.Conn)) error {
	var delay time.Duration
	for {
		conn, err := l.Accept()
		if err == nil {
			delay = 0
			serve(conn)
			continue
		}
		if closed() {
			return nil
		}
		if !retryableAccept(err) {
			return err
		}
		delay = min(max(2*delay, acceptBackoffFirst), acceptBackoffLast)
		log.Warn("accept failed; retrying", "session", 0, "err", err, "retry_in", delay)
		time.Sleep(delay)
	}
}

// retryableAccept reports whether an Accept error is a passing shortage
// rather than a listener that is gone.
func retryableAccept(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// preHandshakeLimits bound what a peer may send before its Hello is
// accepted: the largest Hello there can be, so that an unauthenticated
// or unknown peer cannot make the stage buffer a large frame.
func preHandshakeLimits() wire.Limits {
	l := wire.DefaultLimits()
	l.MaxPayload = wire.MaxHelloPayload
	return l
}

// withPreHandshakeLimits narrows fr's limits for the handshake; the
// returned function restores the ones it had.
func withPreHandshakeLimits(fr *wire.Framer) func() {
	old := fr.Limits()
	if err := fr.SetLimits(preHandshakeLimits()); err != nil {
		panic("stage: pre-handshake limits: " + err.Error()) // constants: cannot fail
	}
	return func() { fr.SetLimits(old) }
}

// refusePreHandshake answers a first frame that broke the rules (too
// large, malformed, of another generation, ...) with an Error frame saying
// so, before the connection is closed. I/O errors get none: there is no
// one to tell. The message names only the rule, nothing about this stage.
func refusePreHandshake(p *peer, err error) {
	if framingError(err) {
		p.sendError(wire.Meta{}, fmt.Errorf("before the handshake: %w", err))
	}
}
