package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"time"
)

// Config is one node's side of authentication: its key and whom it trusts,
// or Insecure for plaintext.
type Config struct {
	Key   ed25519.PrivateKey
	Trust *Trust
	// Insecure turns authentication and encryption off. Both ends of a
	// connection must agree: a TLS node refuses a plaintext peer, and a
	// plaintext node refuses a TLS one, each with a message saying so.
	Insecure bool
	// HandshakeTimeout bounds the TLS handshake (default 10 s).
	HandshakeTimeout time.Duration
	Logger           *slog.Logger

	mu  sync.Mutex  // guards the lazy preparation
	tls *tls.Config // built by Prepare
}

// Peer is the authenticated other end of a connection.
type Peer struct {
	Fingerprint string // empty when insecure
	Name        string // the trust file's name for it, if any
	Insecure    bool
}

func (p Peer) String() string {
	switch {
	case p.Insecure:
		return "unauthenticated peer (--insecure)"
	case p.Name != "":
		return fmt.Sprintf("%s (%s)", p.Fingerprint, p.Name)
	}
	return p.Fingerprint
}

// UntrustedError is a peer whose key is not in the trust file.
type UntrustedError struct {
	Fingerprint string
	Trust       string // the trust file's path
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("peer key %s is not in the trust file %s", e.Fingerprint, e.Trust)
}

// Prepare checks the configuration and builds the TLS settings. It is
// called by Server and Client if needed; call it first to fail early. It is
// safe for concurrent use.
func (c *Config) Prepare() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.Insecure {
		if c.Key != nil || c.Trust != nil {
			return errors.New("--insecure turns keys off; give either --insecure or --key and --trust, not both")
		}
		return nil
	}
	if c.Key == nil || c.Trust == nil {
		return errors.New("give --key FILE and --trust FILE (make a key with seam keygen), or --insecure for plaintext on a network you trust")
	}
	if c.tls != nil {
		return nil
	}
	cert, err := selfSigned(c.Key)
	if err != nil {
		return err
	}
	c.tls = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		// Both sides check the other's key against the trust file in
		// verifyPeer; there is no CA and no host name to check.
		ClientAuth:         tls.RequireAnyClientCert,
		InsecureSkipVerify: true,
		// No resumption: every connection proves possession of its key.
		SessionTicketsDisabled: true,
		ClientSessionCache:     nil,
		NextProtos:             []string{alpn},
	}
	return nil
}

// alpn names the protocol, so a TLS client of another protocol that
// reaches a stage fails the handshake instead of sending it frames.
const alpn = "seam"

// Self is this node's fingerprint, or "insecure".
func (c *Config) Self() string {
	if c.Insecure || c.Key == nil {
		return "insecure"
	}
	return Public(c.Key)
}

// selfSigned makes a certificate for key, valid for a century: validity
// is not what is checked (the key is), but x509 needs a period.
func selfSigned(key ed25519.PrivateKey) (tls.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "seam " + Public(key)},
		NotBefore:    now.Add(-24 * time.Hour),
		NotAfter:     now.AddDate(100, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("making the TLS certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// verifyPeer accepts exactly one self-signed Ed25519 certificate whose key
// is trusted. TLS 1.3 has already checked that the peer holds that key (its
// CertificateVerify signs this handshake's transcript).
func (c *Config) verifyPeer(raw [][]byte) (Peer, error) {
	if len(raw) != 1 {
		return Peer{}, fmt.Errorf("peer sent %d certificates, want exactly 1", len(raw))
	}
	cert, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return Peer{}, fmt.Errorf("peer certificate: %w", err)
	}
	pub, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok {
		return Peer{}, fmt.Errorf("peer certificate holds a %T key, want Ed25519", cert.PublicKey)
	}
	fp := Fingerprint(pub)
	if err := cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature); err != nil {
		return Peer{Fingerprint: fp}, fmt.Errorf("peer certificate for %s is not self-signed by its key: %w", fp, err)
	}
	name, ok := c.Trust.Allows(fp)
	if !ok {
		return Peer{Fingerprint: fp}, &UntrustedError{Fingerprint: fp, Trust: c.Trust.Path()}
	}
	return Peer{Fingerprint: fp, Name: name}, nil
}

// tlsFor returns a per-connection copy of the TLS settings that records
// the verified peer in *peer.
func (c *Config) tlsFor(peer *Peer) *tls.Config {
	t := c.tls.Clone()
	t.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		p, err := c.verifyPeer(raw)
		*peer = p
		return err
	}
	return t
}

// Server authenticates a connection accepted from a peer. On success it
// returns the connection to use (TLS, or raw when insecure) and the peer.
// On failure it has logged the refusal with the peer's fingerprint when
// one was presented, told the peer why where it can, and closed raw.
func (c *Config) Server(ctx context.Context, raw net.Conn) (net.Conn, Peer, error) {
	if err := c.Prepare(); err != nil {
		raw.Close()
		return nil, Peer{}, err
	}
	addr := raw.RemoteAddr().String()
	kind, conn, err := sniff(raw, c.HandshakeTimeout)
	if err != nil {
		raw.Close()
		return nil, Peer{}, fmt.Errorf("peer %s: %w", addr, err)
	}
	switch {
	case c.Insecure && kind == kindPlain:
		return conn, Peer{Insecure: true}, nil
	case c.Insecure:
		err := errors.New("this node runs with --insecure (plaintext) and the peer started TLS; give --insecure on both sides, or keys on both")
		c.Logger.Warn("refused a TLS peer", "session", 0, "peer", addr, "err", err)
		refuseTLS(conn)
		return nil, Peer{}, fmt.Errorf("peer %s: %w", addr, err)
	case kind == kindPlain:
		err := errors.New("this node requires TLS (--key and --trust) and the peer connected in plaintext (--insecure)")
		c.Logger.Warn("refused a plaintext peer", "session", 0, "peer", addr, "err", err)
		refusePlain(conn, "refused: "+err.Error())
		return nil, Peer{}, fmt.Errorf("peer %s: %w", addr, err)
	}
	var peer Peer
	tc := tls.Server(conn, c.tlsFor(&peer))
	hctx, cancel := context.WithTimeout(ctx, c.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		tc.Close()
		c.logRefusal(addr, peer, err)
		return nil, peer, fmt.Errorf("peer %s: TLS handshake: %w", addr, err)
	}
	return tc, peer, nil
}

func (c *Config) logRefusal(addr string, peer Peer, err error) {
	attrs := []any{"session", 0, "peer", addr, "err", err}
	if peer.Fingerprint != "" {
		attrs = append(attrs, "fingerprint", peer.Fingerprint)
	}
	var ue *UntrustedError
	switch {
	case errors.As(err, &ue):
		c.Logger.Warn("refused an untrusted key", attrs...)
	case isRemoteAlert(err):
		c.Logger.Warn("the peer refused this node's key "+c.Self(), attrs...)
	default:
		c.Logger.Warn("refused a peer: TLS handshake failed", attrs...)
	}
}

// Client authenticates a connection this node dialed to addr.
func (c *Config) Client(ctx context.Context, raw net.Conn, addr string) (net.Conn, Peer, error) {
	if err := c.Prepare(); err != nil {
		raw.Close()
		return nil, Peer{}, err
	}
	if c.Insecure {
		return raw, Peer{Insecure: true}, nil
	}
	var peer Peer
	tc := tls.Client(raw, c.tlsFor(&peer))
	hctx, cancel := context.WithTimeout(ctx, c.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		tc.Close()
		return nil, peer, fmt.Errorf("%s: %w", addr, explain(err, c.Self()))
	}
	return &clientConn{Conn: tc, self: c.Self()}, peer, nil
}

// clientConn explains a refusal that TLS 1.3 reports only after the
// client's handshake completed: the server checks the client's key last,
// so its alert arrives on the first read.
type clientConn struct {
	*tls.Conn
	self string
}

func (c *clientConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		err = explain(err, c.self)
	}
	return n, err
}

// RefusedError is a peer's TLS refusal of this node's key.
type RefusedError struct {
	Self string
	Err  error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the peer refused this node's key %s (add it to the peer's trust file): %v", e.Self, e.Err)
}
func (e *RefusedError) Unwrap() error { return e.Err }

// PlaintextPeerError is a TLS client's view of a plaintext peer.
type PlaintextPeerError struct{ Err error }

func (e *PlaintextPeerError) Error() string {
	return "the peer answered in plaintext: it runs with --insecure; give --insecure on both sides, or keys on both"
}
func (e *PlaintextPeerError) Unwrap() error { return e.Err }

func explain(err error, self string) error {
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && string(rh.RecordHeader[:4]) == plainMagic {
		return &PlaintextPeerError{Err: err}
	}
	if errors.As(err, &rh) && string(rh.RecordHeader[:5]) == "HTTP/" {
		return fmt.Errorf("that address answers HTTP, not the Seam stage protocol (is it an API or web server?): %w", err)
	}
	if isRemoteAlert(err) && strings.Contains(err.Error(), "certificate") {
		return &RefusedError{Self: self, Err: err}
	}
	return err
}

func isRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// Ephemeral returns a configuration with a new key that trusts only
// itself: for stages and a head in one process, which authenticate each
// other like remote ones without any file.
func Ephemeral() (*Config, error) {
	key, err := GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	tr, err := NewTrust(Public(key))
	if err != nil {
		return nil, err
	}
	c := &Config{Key: key, Trust: tr}
	return c, c.Prepare()
}
