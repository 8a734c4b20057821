package stage

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/wire"
)

// limitDefaults fills in the limits left zero and refuses impossible ones.
// The session quotas default to MaxSessions (already set), so that they
// add no bound of their own unless asked to.
func (c *Config) limitDefaults() error {
	for _, l := range []struct {
		v    int
		flag string
	}{{c.MaxSessionsPerConn, "--max-sessions-per-conn"}, {c.MaxSessionsPerIdentity, "--max-sessions-per-identity"},
		{c.MaxPrefill, "--max-prefill"}, {c.MaxQueue, "--max-queue"}, {c.MaxInFlight, "--max-inflight-tokens"}} {
		if l.v < 0 {
			return fmt.Errorf("stage: %s %d: want 0 (the default) or more", l.flag, l.v)
		}
	}
	if c.MaxSessionsPerConn == 0 {
		c.MaxSessionsPerConn = c.MaxSessions
	}
	if c.MaxSessionsPerIdentity == 0 {
		c.MaxSessionsPerIdentity = c.MaxSessions
	}
	if c.MaxPrefill == 0 {
		c.MaxPrefill = DefaultMaxPrefill
	}
	if wireMax := wire.DefaultLimits().MaxTokens; c.MaxPrefill > wireMax {
		return fmt.Errorf("stage: --max-prefill %d is above the wire's cap of %d tokens a frame", c.MaxPrefill, wireMax)
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = 2 * c.MaxSessionsPerConn
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = c.MaxSessionsPerConn * c.MaxPrefill
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	return nil
}

// anonymous reports whether this stage's peers are unauthenticated: it
// runs with an insecure auth configuration (seam serve --insecure), so
// anyone who can reach it is a peer and nobody knows who. Errors sent to
// them then withhold what a stranger should not learn from the stage: its
// digests, whether an address it was asked to dial is open, closed or
// allowed. Without any Auth (in-process stages, package tests) the program
// that built the stage vouches for its peers, and they are told everything,
// as a head that authenticated with a trusted key is.
func (s *Server) anonymous() bool { return s.cfg.Auth != nil && s.cfg.Auth.Insecure }

// identityOf names who a head is for the per-identity session quota: the
// key it authenticated with, or without authentication its IP address.
func identityOf(p auth.Peer, addr net.Addr) string {
	if p.Fingerprint != "" {
		return "key " + p.Fingerprint
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		host = addr.String()
	}
	return "address " + host
}

// ownDigests are the digests this stage's Hello carries.
func (s *Server) ownDigests() []wire.Digest {
	return helloDigests(s.cfg.Identity, s.cfg.Codecs)
}

func helloDigests(model wire.Digest, codecs []wire.CodecDigest) []wire.Digest {
	out := []wire.Digest{model}
	for _, c := range codecs {
		out = append(out, c.Digest)
	}
	return out
}

// withheldText replaces this stage's own digests in what an anonymous peer
// is told. The model digest is what a Hello must present to be accepted:
// naming it in a refusal would hand any stranger the key to the handshake.
const withheldText = "(withheld from unauthenticated peers)"

// withholdDigests returns err with the digests own removed from its text
// when the peer is anonymous; its code (errors.Is) is kept. The peer's
// own values, which it sent, are still named.
func withholdDigests(err error, anonymous bool, own []wire.Digest) error {
	if !anonymous {
		return err
	}
	msg := err.Error()
	for _, d := range own {
		msg = strings.ReplaceAll(msg, d.String(), withheldText)
	}
	return &withheldError{msg: msg, err: err}
}

// withheldError is an error whose text was cut for an anonymous peer.
type withheldError struct {
	msg string
	err error
}

func (e *withheldError) Error() string { return e.msg }
func (e *withheldError) Unwrap() error { return e.err }

// framingError reports whether err is a frame that broke the wire's rules
// (as opposed to the connection failing or timing out).
func framingError(err error) bool {
	for _, e := range []error{wire.ErrLimit, wire.ErrMalformed, wire.ErrGeneration, wire.ErrChecksum, wire.ErrEncoding, wire.ErrNonFinite} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sparse says whether the n-th occurrence of an event is logged: the first
// and each power of two after it, so that a flood shows in the log
// without filling it.
func sparse(n uint64) bool { return n&(n-1) == 0 }
