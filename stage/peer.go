package stage

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/wire"
)

// peer is one connection: a Framer whose writes are serialised, since a
// stage writes to a head's connection both from that connection's own reader
// and from the readers of upstream links that carry the head's sessions.
type peer struct {
	conn    net.Conn
	fr      *wire.Framer
	name    string // for messages: "head 127.0.0.1:5000", "downstream 10.0.0.2:9000"
	timeout time.Duration
	log     *slog.Logger
	gen     uint16 // the agreed protocol generation, once handshaken
	rx      *countingReader
	wmu     sync.Mutex
}

// countingReader counts the bytes read from a connection, so that a read
// that timed out tells a silent peer (idle) from one that began a frame
// and trickled it. Only the connection's reader touches it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// newPeer wraps conn; with a non-zero link config, writes go through the
// emulated link (reads never do: each side emulates what it sends). Each
// frame read must arrive whole within timeout of its first byte.
func newPeer(conn net.Conn, name string, lc link.Config, reg *wire.Registry, timeout time.Duration) (*peer, error) {
	w := net.Conn(conn)
	if lc.RateMbps > 0 || lc.Latency > 0 {
		lw, err := link.Wrap(conn, lc)
		if err != nil {
			return nil, err
		}
		w = lw
	}
	rx := &countingReader{r: conn}
	fr := wire.NewFramer(w, rx)
	fr.SetRegistry(reg)
	// A frame that has begun must end within the timeout: a peer trickling
	// bytes is cut off. Waiting for a frame to begin is bounded only by the
	// idle deadline (inbox.go).
	fr.SetFrameTimeout(conn.SetReadDeadline, timeout)
	return &peer{conn: w, fr: fr, name: name, timeout: timeout, rx: rx}, nil
}

// write runs one framed write under the write lock and a write deadline, so
// a peer that stops reading cannot wedge the stage forever.
func (p *peer) write(f func(*wire.Framer) error) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.timeout > 0 {
		p.conn.SetWriteDeadline(time.Now().Add(p.timeout))
	}
	return f(p.fr)
}

func (p *peer) sendError(m wire.Meta, err error) {
	if p.log != nil {
		p.log.Debug("sending error frame", "session", m.Session, "peer", p.name, "request", m.Request, "code", wire.CodeOf(err).String(), "err", err)
	}
	p.write(func(fr *wire.Framer) error {
		return fr.WriteError(m, wire.CodeOf(err), wire.TruncateMessage(err.Error()))
	})
}

// sendShutdown tells the peer, on the whole connection, that this stage is
// going away. It waits at most wait for the write lock (a frame being
// written to a peer that stopped reading holds it up to the write timeout)
// and for the write itself, and gives up on the notice after that.
func (p *peer) sendShutdown(msg string, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for !p.wmu.TryLock() {
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer p.wmu.Unlock()
	p.conn.SetWriteDeadline(deadline)
	p.fr.WriteError(wire.Meta{}, wire.CodeShutdown, wire.TruncateMessage(msg))
}

func (p *peer) close() { p.conn.Close() }
