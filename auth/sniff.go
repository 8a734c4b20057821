package auth

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/seamlm/seam/wire"
)

// How a server tells a plaintext peer from a TLS one: by the first byte.
// A TLS connection starts with a handshake record (content type 22); a
// plaintext Seam connection starts with a frame, whose magic is "SEAM".
// Neither can be mistaken for the other, so each side can refuse the other
// kind with a message it understands: a plaintext peer gets a Seam Error
// frame, a TLS peer gets bytes starting with "SEAM" where a TLS record
// header belongs, which its side reports as a plaintext peer.
const (
	tlsHandshakeRecord = 0x16
	plainMagic         = "SEAM"
)

type connKind int

const (
	kindTLS connKind = iota
	kindPlain
)

// sniff reads the first byte and returns a connection that replays it.
func sniff(c net.Conn, timeout time.Duration) (connKind, net.Conn, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, nil, fmt.Errorf("reading the first byte: %w", err)
	}
	pc := &prefixConn{Conn: c, prefix: b[:]}
	switch b[0] {
	case tlsHandshakeRecord:
		return kindTLS, pc, nil
	case plainMagic[0]:
		return kindPlain, pc, nil
	}
	return 0, nil, fmt.Errorf("first byte 0x%02x is neither a TLS handshake (0x16) nor a Seam frame ('S'): not a Seam peer", b[0])
}

// prefixConn replays bytes already read before reading c.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// refusePlain answers a plaintext peer with a Seam Error frame it can
// read, then closes.
func refusePlain(c net.Conn, msg string) {
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	fr := wire.NewFramer(c, c)
	fr.WriteError(wire.Meta{}, wire.CodeHandshake, msg)
	linger(c)
}

// refuseTLS answers a TLS client with plaintext bytes starting with the
// Seam magic, which its TLS layer reports as a bad record header and
// Client explains as a plaintext peer.
func refuseTLS(c net.Conn) {
	refusePlain(c, "refused: this node runs with --insecure (plaintext); the peer started TLS")
}

// linger half-closes and discards what the peer is still sending for a
// moment before closing: closing a socket with unread input sends a reset,
// which can destroy the refusal before the peer reads it.
func linger(c net.Conn) {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := unwrap(c).(closeWriter); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	c.Close()
}

func unwrap(c net.Conn) net.Conn {
	if p, ok := c.(*prefixConn); ok {
		return p.Conn
	}
	return c
}
