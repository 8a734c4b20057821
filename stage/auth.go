package stage

import (
	"context"
	"net"

	"github.com/seamlm/seam/auth"
)

// authenticate runs the server side of authentication on an accepted
// connection. A refusal has been logged (with the peer's fingerprint) and
// the connection closed; nothing of the peer's has been read as a frame.
func (s *Server) authenticate(conn net.Conn) (net.Conn, auth.Peer, bool) {
	if s.cfg.Auth == nil {
		return conn, auth.Peer{}, true
	}
	c, peer, err := s.cfg.Auth.Server(context.Background(), conn)
	if err != nil {
		return nil, peer, false
	}
	s.log.Info("peer authenticated", "session", 0, "peer", conn.RemoteAddr().String(), "key", peer.String())
	return c, peer, true
}

// authClient runs the client side on a connection this stage dialed; a
// nil configuration leaves it plaintext.
func authClient(a *auth.Config, conn net.Conn, addr string) (net.Conn, error) {
	if a == nil {
		return conn, nil
	}
	c, _, err := a.Client(context.Background(), conn, addr)
	return c, err
}
