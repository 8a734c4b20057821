package auth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/wire"
)

func mustKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	k, err := GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyFileRoundTripAndMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.key")
	k := mustKey(t)
	if err := WriteKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", st.Mode().Perm())
	}
	got, err := LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(k) {
		t.Fatal("loaded key differs from the written one")
	}
	if err := WriteKeyFile(path, mustKey(t)); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Fatalf("overwrite: err %v, want a refusal", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key: err %v, want a refusal naming chmod 600", err)
	}
}

// The fingerprint is checked against openssl's view of the same key file:
// openssl reads the PKCS #8 file and prints the raw public key, whose
// SHA-256 the fingerprint must encode.
func TestFingerprintAgainstOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		if os.Getenv("SEAM_REQUIRE_REFERENCES") == "1" {
			t.Fatal("openssl not found (apt-get install openssl)")
		}
		t.Skip("openssl not found; the fingerprint is not cross-checked")
	}
	path := filepath.Join(t.TempDir(), "k")
	k := mustKey(t)
	if err := WriteKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	// The DER SubjectPublicKeyInfo of an Ed25519 key ends with the 32 raw bytes.
	der, err := exec.Command(openssl, "pkey", "-in", path, "-pubout", "-outform", "DER").Output()
	if err != nil {
		t.Fatalf("openssl pkey: %v", err)
	}
	if len(der) != 44 {
		t.Fatalf("openssl gave a %d-byte public key, want 44 (12 header + 32)", len(der))
	}
	cmd := exec.Command("sh", "-c", "tail -c 32 | openssl dgst -sha256 -binary | basenc --base64url | tr -d '=\\n'")
	cmd.Stdin = bytes.NewReader(der)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hashing with openssl: %v", err)
	}
	if want := FingerprintPrefix + string(out); Public(k) != want {
		t.Fatalf("fingerprint %s, openssl's key hashes to %s", Public(k), want)
	}
	if _, err := ParseFingerprint(Public(k)); err != nil {
		t.Fatal(err)
	}
}

func TestParseTrust(t *testing.T) {
	a, b := Public(mustKey(t)), Public(mustKey(t))
	file := "# cluster keys\n\n" + a + "  desktop\n\t" + b + "\tlaptop 2\n"
	tr, err := ParseTrust([]byte(file), "trust")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != 2 {
		t.Fatalf("%d keys, want 2", tr.Len())
	}
	if name, ok := tr.Allows(a); !ok || name != "desktop" {
		t.Fatalf("a: %q %v", name, ok)
	}
	if name, ok := tr.Allows(b); !ok || name != "laptop 2" {
		t.Fatalf("b: %q %v", name, ok)
	}
	if _, ok := tr.Allows(Public(mustKey(t))); ok {
		t.Fatal("an unlisted key is allowed")
	}
	for _, bad := range []struct{ text, want string }{
		{a + "\n" + a + "\n", "line 2: " + a + " is listed twice"},
		{"# x\nssh-ed25519 AAAA\n", "line 2"},
		{a[:len(a)-1] + "\n", "characters after the prefix"},
		{a[:len(a)-1] + "+\n", "base64url"},
		{strings.Repeat("x", 2000), "at most 1024 bytes"},
	} {
		if _, err := ParseTrust([]byte(bad.text), "trust"); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: err %v, want %q", clip(bad.text), err, bad.want)
		}
	}
}

func FuzzParseTrust(f *testing.F) {
	f.Add([]byte("# c\n" + FingerprintPrefix + strings.Repeat("A", 43) + " n\n"))
	f.Add([]byte("\n\t\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ParseTrust(data, "fuzz")
		if err != nil {
			return
		}
		for _, fp := range tr.Fingerprints() {
			if _, err := ParseFingerprint(fp); err != nil {
				t.Fatalf("accepted %q: %v", fp, err)
			}
		}
	})
}

// node is one side's configuration with a log buffer.
type node struct {
	cfg *Config
	log *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newNode(t *testing.T, key ed25519.PrivateKey, trusted ...ed25519.PrivateKey) node {
	t.Helper()
	var fps []string
	for _, k := range trusted {
		fps = append(fps, Public(k))
	}
	tr, err := NewTrust(fps...)
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	cfg := &Config{Key: key, Trust: tr, Logger: slog.New(slog.NewTextHandler(buf, nil)), HandshakeTimeout: 5 * time.Second}
	return node{cfg: cfg, log: buf}
}

func insecureNode() node {
	buf := &syncBuffer{}
	return node{cfg: &Config{Insecure: true, Logger: slog.New(slog.NewTextHandler(buf, nil))}, log: buf}
}

type result struct {
	conn net.Conn
	peer Peer
	err  error
}

// connect runs a server and a client over a loopback TCP connection (the
// refusals depend on TCP's half-close, so not net.Pipe).
func connect(t *testing.T, server, client node) (srv, cli result) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		conn, peer, err := server.cfg.Server(context.Background(), c)
		done <- result{conn, peer, err}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn, peer, err := client.cfg.Client(context.Background(), raw, ln.Addr().String())
	cli = result{conn, peer, err}
	if cli.err == nil {
		// A client refused by the server learns it on its first read;
		// exchange a byte each way so both verdicts are in.
		cli.conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := cli.conn.Write([]byte(plainMagic[:1])); err != nil {
			cli.err = err
		}
	}
	srv = <-done
	if srv.err == nil {
		var b [1]byte
		if _, err := io.ReadFull(srv.conn, b[:]); err != nil {
			srv.err = err
		} else if _, err := srv.conn.Write([]byte{2}); err != nil {
			srv.err = err
		}
	}
	if cli.err == nil {
		var b [1]byte
		if _, err := io.ReadFull(cli.conn, b[:]); err != nil {
			cli.err = err
		}
	}
	t.Cleanup(func() {
		for _, r := range []result{srv, cli} {
			if r.conn != nil {
				r.conn.Close()
			}
		}
	})
	return srv, cli
}

func TestMutualAuthentication(t *testing.T) {
	ks, kc := mustKey(t), mustKey(t)
	srv, cli := connect(t, newNode(t, ks, kc), newNode(t, kc, ks))
	if srv.err != nil || cli.err != nil {
		t.Fatalf("server: %v; client: %v", srv.err, cli.err)
	}
	if srv.peer.Fingerprint != Public(kc) || cli.peer.Fingerprint != Public(ks) {
		t.Fatalf("server saw %s (want %s); client saw %s (want %s)", srv.peer, Public(kc), cli.peer, Public(ks))
	}
}

// The server does not trust the client: the server refuses it before any
// application byte is delivered and logs its fingerprint; the client is
// told its key was refused.
func TestServerRefusesUntrustedClient(t *testing.T) {
	ks, kc := mustKey(t), mustKey(t)
	server := newNode(t, ks, mustKey(t)) // trusts someone else
	srv, cli := connect(t, server, newNode(t, kc, ks))
	var ue *UntrustedError
	if !errors.As(srv.err, &ue) || ue.Fingerprint != Public(kc) {
		t.Fatalf("server: err %v, want UntrustedError for %s", srv.err, Public(kc))
	}
	if srv.conn != nil {
		t.Fatal("server returned a connection for an untrusted client")
	}
	if log := server.log.String(); !strings.Contains(log, "refused an untrusted key") || !strings.Contains(log, Public(kc)) {
		t.Fatalf("server log does not name the refused fingerprint:\n%s", log)
	}
	var re *RefusedError
	if !errors.As(cli.err, &re) || !strings.Contains(cli.err.Error(), Public(kc)) {
		t.Fatalf("client: err %v, want a RefusedError naming its own key", cli.err)
	}
}

// The client does not trust the server: the client refuses it during the
// handshake; the server logs that its key was refused.
func TestClientRefusesUntrustedServer(t *testing.T) {
	ks, kc := mustKey(t), mustKey(t)
	server := newNode(t, ks, kc)
	srv, cli := connect(t, server, newNode(t, kc, mustKey(t)))
	var ue *UntrustedError
	if !errors.As(cli.err, &ue) || ue.Fingerprint != Public(ks) || cli.conn != nil {
		t.Fatalf("client: err %v conn %v, want UntrustedError for %s", cli.err, cli.conn, Public(ks))
	}
	if srv.err == nil {
		t.Fatal("server accepted a client that refused it")
	}
	if log := server.log.String(); !strings.Contains(log, "the peer refused this node's key "+Public(ks)) {
		t.Fatalf("server log does not say its key was refused:\n%s", log)
	}
}

// A peer presenting no certificate at all never gets in.
func TestServerRequiresClientCertificate(t *testing.T) {
	ks := mustKey(t)
	anon := newNode(t, ks, ks)
	anon.cfg.Prepare()
	anon.cfg.tls.Certificates = nil
	srv, _ := connect(t, newNode(t, ks, ks), anon)
	if srv.err == nil || !strings.Contains(srv.err.Error(), "certificate") {
		t.Fatalf("server: err %v, want a refusal for a missing certificate", srv.err)
	}
}

// A plaintext client reaching a TLS node gets a Seam Error frame saying
// TLS is required; a TLS client reaching a plaintext node is told the
// peer runs --insecure. Two insecure ends talk plaintext.
func TestPlaintextAndTLSRefuseEachOther(t *testing.T) {
	k := mustKey(t)
	tlsNode, plain := newNode(t, k, k), insecureNode()

	// Plaintext client, TLS server: the client reads the refusal as a frame.
	srv, _ := connect(t, tlsNode, plain)
	if srv.err == nil || !strings.Contains(srv.err.Error(), "requires TLS") {
		t.Fatalf("TLS server: err %v, want a refusal of plaintext", srv.err)
	}
	if !strings.Contains(tlsNode.log.String(), "refused a plaintext peer") {
		t.Fatalf("TLS server did not log the refusal:\n%s", tlsNode.log.String())
	}

	// The same, reading the frame as a head would after sending its Hello.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			tlsNode.cfg.Server(context.Background(), c)
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fr := wire.NewFramer(raw, raw)
	h := wire.Hello{Generation: wire.MaxGeneration, MinGeneration: wire.MinGeneration, MaxGeneration: wire.MaxGeneration,
		Width: 8, Vocab: 8, Encodings: []wire.EncodingID{wire.EncodingF32}, Encoding: wire.EncodingF32}
	if err := fr.WriteHello(wire.KindHello, &h); err != nil {
		t.Fatal(err)
	}
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("plaintext head: %v, want an Error frame", err)
	}
	re, err := f.RemoteError()
	if f.Kind != wire.KindError || err != nil || !strings.Contains(re.Error(), "requires TLS (--key and --trust)") {
		t.Fatalf("plaintext head got %v %v %v, want an Error frame saying TLS is required", f.Kind, re, err)
	}

	// TLS client, plaintext server.
	plain2 := insecureNode()
	srv, cli := connect(t, plain2, newNode(t, k, k))
	var pe *PlaintextPeerError
	if !errors.As(cli.err, &pe) {
		t.Fatalf("TLS client: err %v, want PlaintextPeerError", cli.err)
	}
	if srv.err == nil || !strings.Contains(plain2.log.String(), "refused a TLS peer") {
		t.Fatalf("plaintext server: err %v, log:\n%s", srv.err, plain2.log.String())
	}

	// Both insecure: plaintext works.
	srv, cli = connect(t, insecureNode(), insecureNode())
	if srv.err != nil || cli.err != nil || !srv.peer.Insecure || !cli.peer.Insecure {
		t.Fatalf("insecure pair: server %v %v, client %v %v", srv.err, srv.peer, cli.err, cli.peer)
	}
}

func TestConfigNeedsKeysOrInsecure(t *testing.T) {
	if err := (&Config{}).Prepare(); err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("empty config: %v", err)
	}
	k := mustKey(t)
	if err := (&Config{Insecure: true, Key: k}).Prepare(); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("insecure with a key: %v", err)
	}
}

// Garbage that is neither TLS nor Seam is refused on its first byte.
func TestSniffRefusesOtherProtocols(t *testing.T) {
	k := mustKey(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		_, _, err = newNode(t, k, k).cfg.Server(context.Background(), c)
		errc <- err
	}()
	raw, _ := net.Dial("tcp", ln.Addr().String())
	defer raw.Close()
	raw.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "neither a TLS handshake") {
		t.Fatalf("HTTP request: %v", err)
	}
}
