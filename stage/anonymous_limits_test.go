package stage_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

var insecure = &auth.Config{Insecure: true, Logger: quiet}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// otherServer listens on loopback and answers each connection with
// greeting (nothing when empty), then waits for it to close: a port that
// is open, but not to a Seam stage.
func otherServer(t *testing.T, greeting string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte(greeting))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// routeRaw sends a Route to addr and returns the answer and how long it took.
func routeRaw(t *testing.T, w *model.Weights, conn net.Conn, fr *wire.Framer, req uint64, addr string) (*wire.Frame, time.Duration) {
	t.Helper()
	r := wire.Route{Addr: addr, Peer: wire.LayerRange{Start: 3, End: uint32(w.Config.NLayers)}, Encoding: wire.EncodingF32}
	t0 := time.Now()
	if err := fr.WriteRoute(wire.Meta{Request: req}, &r); err != nil {
		t.Fatal(err)
	}
	return reply(t, conn, fr, 10*time.Second), time.Since(t0)
}

// A stage running --insecure cannot tell who its heads are, so a route
// that fails tells the head one text whatever failed: an address not in
// --allow-downstream, a non-loopback address (dialed only when listed), a
// closed port, a port open to something else, and it says so no sooner
// than the timeout after the Route, so that the wait tells nothing
// either. The stage's log keeps the detail, with the head's address.
func TestAnonymousRouteFailuresLookAlike(t *testing.T) {
	w := demoWeights(t)
	const timeout = 400 * time.Millisecond
	srv, addr, log := startLogged(t, w, stage.Config{Timeout: timeout, Auth: insecure})
	listed, listedAddr, _ := startLogged(t, w, stage.Config{Timeout: timeout, Auth: insecure, AllowDownstream: []string{"127.0.0.1:1"}})
	targets := []struct {
		name, addr string
		srv        *stage.Server
		at         string
		detail     string
	}{
		{"closed port", closedAddr(t), srv, addr, "connection refused"},
		{"closed port by name", "localhost:" + strings.Split(closedAddr(t), ":")[1], srv, addr, "connection refused"},
		{"silent port", otherServer(t, ""), srv, addr, "handshake"},
		{"HTTP server", otherServer(t, "HTTP/1.1 400 Bad Request\r\n\r\n"), srv, addr, "handshake"},
		{"another host", "10.255.255.1:7070", srv, addr, "not loopback"},
		{"not listed", closedAddr(t), listed, listedAddr, "--allow-downstream list [127.0.0.1:1]"},
		{"listed, closed", "127.0.0.1:1", listed, listedAddr, "connection refused"},
	}
	var first string
	for i, c := range targets {
		conn, fr := dialRaw(t, c.at, nil, headHello(w, "stranger"))
		f, took := routeRaw(t, w, conn, fr, uint64(i+1), c.addr)
		re := wantError(t, f, wire.CodeInternal, "could not route to downstream "+c.addr+": the address is not allowed, or no Seam stage answered there")
		text := strings.ReplaceAll(re.Message, c.addr, "ADDR")
		if first == "" {
			first = text
		}
		if text != first {
			t.Errorf("%s: %q differs from the others' %q", c.name, text, first)
		}
		if took < timeout-20*time.Millisecond {
			t.Errorf("%s: answered after %v, before the %v timeout: the wait tells what failed", c.name, took, timeout)
		}
		if strings.Contains(re.Message, "127.0.0.1:1]") || strings.Contains(re.Message, c.detail) {
			t.Errorf("%s: the head is told %q", c.name, re.Message)
		}
		t.Logf("%s: %v after %v", c.name, re.Message, took.Round(time.Millisecond))
	}
	if n := srv.Refusals().Routes + listed.Refusals().Routes; n != uint64(len(targets)) {
		t.Errorf("%d routes counted as failed, want %d", n, len(targets))
	}
	logged := log.String()
	for _, c := range targets[:5] {
		if !strings.Contains(logged, `"msg":"route failed"`) || !strings.Contains(logged, c.addr) || !strings.Contains(logged, c.detail) {
			t.Errorf("%s: the log does not have the detail %q for %s", c.name, c.detail, c.addr)
		}
	}
	if !strings.Contains(logged, `"peer":"head 127.0.0.1:`) {
		t.Errorf("the route failures are logged without the head's address:\n%s", logged)
	}
}

// A head that authenticated, or any head of a stage built without Auth
// (the program vouches for its peers), is told what failed, at once.
func TestTrustedRouteFailuresSayWhy(t *testing.T) {
	w := demoWeights(t)
	stageKey, headKey := trustedPair(t)
	for _, c := range []struct {
		name      string
		stage, hd *auth.Config
	}{{"authenticated head", stageKey, headKey}, {"no Auth", nil, nil}} {
		_, addr, _ := startLogged(t, w, stage.Config{Timeout: 2 * time.Second, Auth: c.stage})
		conn, fr := dialRaw(t, addr, c.hd, headHello(w, "trusted"))
		target := closedAddr(t)
		f, took := routeRaw(t, w, conn, fr, 1, target)
		wantError(t, f, wire.CodeInternal, "dialing downstream stage "+target, "connection refused")
		if took > time.Second {
			t.Errorf("%s: told after %v", c.name, took)
		}
	}
}

// trustedPair returns a stage's and a head's authentication, each
// trusting the other.
func trustedPair(t *testing.T) (*auth.Config, *auth.Config) {
	t.Helper()
	var keys [2]*auth.Config
	var fps []string
	for i := range keys {
		k, err := auth.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = &auth.Config{Key: k, Logger: quiet, HandshakeTimeout: 5 * time.Second}
		fps = append(fps, auth.Public(k))
	}
	for _, k := range keys {
		tr, err := auth.NewTrust(fps...)
		if err != nil {
			t.Fatal(err)
		}
		k.Trust = tr
	}
	return keys[0], keys[1]
}

// helloRefusal sends h and returns the refusal.
func helloRefusal(t *testing.T, addr string, a *auth.Config, h wire.Hello) *wire.RemoteError {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if a != nil && !a.Insecure {
		if conn, _, err = a.Client(context.Background(), conn, addr); err != nil {
			t.Fatal(err)
		}
	}
	fr := wire.NewFramer(conn, conn)
	if err := fr.WriteHello(wire.KindHello, &h); err != nil {
		t.Fatal(err)
	}
	return wantError(t, reply(t, conn, fr, 5*time.Second), wire.CodeHandshake)
}

// A refused Hello names every mismatch with both sides' values, except, to
// a peer of a stage running --insecure, the stage's own digests: the
// model digest is what a Hello must present to be accepted, so a stranger
// is not handed it. The peer's own values are still named, and so is
// everything else.
func TestHandshakeRefusalWithholdsDigests(t *testing.T) {
	w := demoWeights(t)
	ours, theirs := wire.Digest{0xc0, 0xde, 1}, wire.Digest{0xc0, 0xde, 2}
	stranger := wire.Digest{0xee, 0xee}
	h := headHello(w, "stranger")
	h.Model = stranger
	h.Codecs = []wire.CodecDigest{{Boundary: 3, ID: 1, Digest: theirs}}
	h.Width++
	stageKey, headKey := trustedPair(t)
	for _, c := range []struct {
		name      string
		stage, hd *auth.Config
		withheld  bool
	}{{"insecure", insecure, nil, true}, {"no Auth", nil, nil, false}, {"authenticated", stageKey, headKey, false}} {
		srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 2 * time.Second, Auth: c.stage, Codecs: []wire.CodecDigest{{Boundary: 3, ID: 1, Digest: ours}}})
		re := helloRefusal(t, addr, c.hd, h)
		for _, s := range []string{"model digest", stranger.String(), "codec digest at layer 3", theirs.String(), "hidden width", "129", "128"} {
			if !strings.Contains(re.Message, s) {
				t.Errorf("%s: refusal %q does not say %q", c.name, re.Message, s)
			}
		}
		for _, d := range []wire.Digest{testID, ours} {
			if named := strings.Contains(re.Message, d.String()); named == c.withheld {
				t.Errorf("%s: digest %s named %v in %q", c.name, d, named, re.Message)
			}
		}
		if withheld := strings.Contains(re.Message, "(withheld from unauthenticated peers)"); withheld != c.withheld {
			t.Errorf("%s: says withheld %v: %q", c.name, withheld, re.Message)
		}
		if n := srv.Refusals().Handshakes; n != 1 {
			t.Errorf("%s: %d handshakes counted as refused, want 1", c.name, n)
		}
	}
}

// With authentication, a peer without a trusted key never reaches the
// stage's frames: a plaintext one is told only that TLS is required, and
// a TLS one with an unknown key fails the TLS handshake. Neither learns
// the stage's name, model or layers.
func TestUnauthenticatedPeersLearnNothing(t *testing.T) {
	w := demoWeights(t)
	stageKey, _ := trustedPair(t)
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 2 * time.Second, Auth: stageKey})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fr := wire.NewFramer(conn, conn)
	h := headHello(w, "plaintext")
	if err := fr.WriteHello(wire.KindHello, &h); err != nil {
		t.Fatal(err)
	}
	re := wantError(t, reply(t, conn, fr, 5*time.Second), wire.CodeHandshake, "requires TLS")
	for _, s := range []string{`"limits"`, "limits", testID.String(), "[0,", "layers"} {
		if strings.Contains(re.Message, s) {
			t.Errorf("a plaintext peer is told %q, which names %q", re.Message, s)
		}
	}
	t.Logf("a plaintext peer sees: %v %q", re.Code, re.Message)
	if _, err := fr.ReadFrame(); err == nil {
		t.Error("a second frame after the refusal")
	}

	// A stranger that trusts the stage: the stage is the one refusing.
	key, err := auth.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := auth.NewTrust(auth.Public(key), auth.Public(stageKey.Key))
	if err != nil {
		t.Fatal(err)
	}
	stranger := &auth.Config{Key: key, Trust: tr, Logger: quiet, HandshakeTimeout: 5 * time.Second}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tc, _, err := stranger.Client(context.Background(), raw, addr)
	if err == nil {
		// TLS 1.3: the stage checks the client's key after the client's
		// handshake is done; its refusal arrives on the first read.
		tc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = tc.Read(make([]byte, 1))
	}
	var refused *auth.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("an untrusted key: %v, want the TLS handshake refused by the stage", err)
	}
	t.Logf("an untrusted key sees: %v", err)
	if st := srv.Stats(); st.Sessions != 0 || srv.Refusals().Handshakes != 0 || srv.Refusals().PreHandshake != 0 {
		t.Errorf("the stage saw a frame of an unauthenticated peer: %+v", srv.Refusals())
	}
}

// An unassigned pool member running --insecure withholds its digests from
// a refused Hello, and measures only links it may dial, telling an
// anonymous head one text after the timeout when it may not or cannot.
func TestAnonymousPoolMember(t *testing.T) {
	w := demoWeights(t)
	const timeout = 300 * time.Millisecond
	pm, err := stage.NewPoolMember(stage.PoolConfig{
		Base:     stage.Config{Name: "member", Timeout: timeout, Auth: insecure, Logger: quiet},
		Identity: testID, Model: w.Config,
		Open:     func(first, last int) (*stage.Part, error) { return nil, errors.New("not assigned in this test") },
		Describe: wire.Description{Free: 8 << 20, DecodeNanos: 20_000, PrefillNanos: 10_000, HeadNanos: 30_000},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go pm.Serve(ln)
	defer pm.Close()
	h := headHello(w, "stranger")
	h.Model = wire.Digest{0xee}
	if re := helloRefusal(t, ln.Addr().String(), nil, h); strings.Contains(re.Message, testID.String()) || !strings.Contains(re.Message, "(withheld from unauthenticated peers)") {
		t.Errorf("the member's refusal names its model digest: %q", re.Message)
	}
	conn, fr := dialRaw(t, ln.Addr().String(), nil, headHello(w, "head"))
	var texts []string
	for i, target := range []string{closedAddr(t), "10.255.255.1:7070"} {
		t0 := time.Now()
		if err := fr.WriteMeasure(uint64(i+1), target); err != nil {
			t.Fatal(err)
		}
		re := wantError(t, reply(t, conn, fr, 5*time.Second), wire.CodeInternal, "could not measure the link to "+target)
		if took := time.Since(t0); took < timeout-20*time.Millisecond {
			t.Errorf("measuring %s: refused after %v, before the %v timeout", target, took, timeout)
		}
		texts = append(texts, strings.ReplaceAll(re.Message, target, "ADDR"))
	}
	if texts[0] != texts[1] {
		t.Errorf("a closed port and a host it may not dial are told apart: %q, %q", texts[0], texts[1])
	}
}
