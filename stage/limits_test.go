package stage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// startServer runs one stage over every layer of w on ln and returns it.
func startServer(t *testing.T, w *model.Weights, ln net.Listener, cfg stage.Config) *stage.Server {
	t.Helper()
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model, cfg.Identity, cfg.Name = m, testID, "limits"
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	srv, err := stage.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Close, want nil", err)
		}
	})
	return srv
}

// dialHead opens a chain through the one stage at addr and checks that it
// computes: a stage that still serves.
func dialHead(t *testing.T, w *model.Weights, addr string) {
	t.Helper()
	c, err := pipeline.Dial(context.Background(), []string{addr}, pipeline.Options{Identity: testID, Config: w.Config, Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatalf("a head after the fault: %v", err)
	}
	defer c.Close()
	s, err := c.NewSession(context.Background())
	if err != nil {
		t.Fatalf("a session after the fault: %v", err)
	}
	defer s.Close()
	if _, err := s.Forward(context.Background(), []int{1, 5, 9}, 0, false); err != nil {
		t.Fatalf("a prefill after the fault: %v", err)
	}
}

// flakyListener fails its first n Accepts with err, as a listener does when
// the process is out of file descriptors.
type flakyListener struct {
	net.Listener
	n   atomic.Int32
	err error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, l.err
	}
	return l.Listener.Accept()
}

// Running out of file descriptors used to end `seam serve` ("accept4: too
// many open files"). Accept errors of that kind are now waited out.
func TestAcceptErrorsAreRetried(t *testing.T) {
	w := demoWeights(t)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	ln := &flakyListener{Listener: inner, err: emfile}
	ln.n.Store(5)
	var log syncBuffer
	startServer(t, w, ln, stage.Config{Timeout: 5 * time.Second, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	dialHead(t, w, inner.Addr().String())
	if left := ln.n.Load(); left >= 0 {
		t.Fatalf("the listener still has %d failures to give: the stage did not accept past them", left+1)
	}
	if got := strings.Count(log.String(), "accept failed; retrying"); got != 5 {
		t.Errorf("%d accept-failure warnings logged, want 5 (one per failure):\n%s", got, log.String())
	}
}

// An error that is not a passing shortage still ends Serve, with the error.
func TestAcceptFatalErrorReturns(t *testing.T) {
	w := demoWeights(t)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	bad := errors.New("listener broke")
	ln := &flakyListener{Listener: inner, err: bad}
	ln.n.Store(1)
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := stage.New(stage.Config{Model: m, Identity: testID, Name: "limits", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Serve(ln); !errors.Is(err, bad) {
		t.Fatalf("Serve = %v, want %v", err, bad)
	}
}

// Connections past MaxConns are closed at once and counted; the stage
// keeps serving, and a slot freed is usable again.
func TestConnectionCap(t *testing.T) {
	w := demoWeights(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	const limit = 3
	srv := startServer(t, w, ln, stage.Config{Timeout: 30 * time.Second, MaxConns: limit})
	var idle []net.Conn
	for range limit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	// Until the stage has accepted all three, a fourth may still fit.
	deadline := time.Now().Add(5 * time.Second)
	refused := 0
	for srv.RefusedConns() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no connection refused past MaxConns = %d", limit)
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			refused++
		}
		c.Close()
	}
	if refused == 0 {
		t.Fatal("the stage counted a refusal, but no extra connection was closed by it")
	}
	if r := srv.Refusals(); r.Conns != srv.RefusedConns() {
		t.Errorf("Refusals().Conns = %d, RefusedConns() = %d", r.Conns, srv.RefusedConns())
	}
	// A head cannot get in while the idle connections hold every slot ...
	if _, err := pipeline.Dial(context.Background(), []string{addr}, pipeline.Options{Identity: testID, Config: w.Config, Timeout: 2 * time.Second, Logger: quiet}); err == nil {
		t.Fatal("a head got a connection past MaxConns")
	}
	// ... and can once one of them goes.
	idle[0].Close()
	deadline = time.Now().Add(5 * time.Second)
	for {
		c, err := pipeline.Dial(context.Background(), []string{addr}, pipeline.Options{Identity: testID, Config: w.Config, Timeout: 2 * time.Second, Logger: quiet})
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no head admitted after a slot was freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A first frame larger than any Hello is refused from its header, with an
// Error frame, instead of being buffered (63 MiB frames from 8 unknown
// connections took a stage from 34 MB to 737 MB). The stage does not wait
// for the payload: its handshake timeout here is 30 s.
func TestPreHandshakeFrameLimit(t *testing.T) {
	w := demoWeights(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, w, ln, stage.Config{Timeout: 30 * time.Second})
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A Prefill of 1024 f32 activations of width 64: 256 KiB, more than the
	// largest Hello (wire.MaxHelloPayload), though far within the limits
	// after a handshake. Only its header is sent.
	var buf bytes.Buffer
	fr := wire.NewFramer(&buf, nil)
	x := make([]float32, 1024*64)
	if err := fr.WriteActivations(wire.KindPrefill, 0, wire.Meta{Session: 1, Request: 1}, wire.F32, x, 1024, 64); err != nil {
		t.Fatal(err)
	}
	if buf.Len() <= wire.HeaderSize+wire.MaxHelloPayload {
		t.Fatalf("test frame of %d bytes is not larger than a Hello", buf.Len())
	}
	start := time.Now()
	if _, err := conn.Write(buf.Bytes()[:wire.HeaderSize]); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	rf := wire.NewFramer(nil, conn)
	f, err := rf.ReadFrame()
	if err != nil {
		t.Fatalf("no Error frame for an oversized first frame: %v", err)
	}
	re, err := f.RemoteError()
	if err != nil {
		t.Fatalf("first frame back is %v, want an Error: %v", f.Kind, err)
	}
	if !strings.Contains(re.Message, "before the handshake") || !strings.Contains(re.Message, "exceeds limit") {
		t.Errorf("refusal message %q does not say the frame was over the pre-handshake limit", re.Message)
	}
	if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("connection after the refusal: read %v, want EOF", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusal took %v: the stage waited for the payload", d)
	}
	if r := srv.Refusals(); r.PreHandshake != 1 {
		t.Errorf("%d first frames counted as refused, want 1", r.PreHandshake)
	}
	dialHead(t, w, ln.Addr().String())
}

// A connection that trickles a frame after its handshake (one byte every
// 100 ms) is cut off once the frame has taken longer than the timeout,
// where it used to be held forever; an idle connection is not.
func TestTricklingFrameIsCutOff(t *testing.T) {
	w := demoWeights(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 400 * time.Millisecond
	srv := startServer(t, w, ln, stage.Config{Timeout: timeout})
	h := wire.Hello{Generation: wire.MaxGeneration, MinGeneration: wire.MinGeneration, MaxGeneration: wire.MaxGeneration,
		Model: testID, Width: uint32(w.Config.Dim), Vocab: uint32(w.Config.VocabSize),
		Encodings: wire.Default.IDs(), Encoding: wire.EncodingF32, Name: "trickle"}
	idle, ifr := rawPeer(t, ln.Addr().String(), h)
	conn, fr := rawPeer(t, ln.Addr().String(), h)
	var buf bytes.Buffer
	if err := wire.NewFramer(&buf, nil).WriteReset(wire.Meta{Session: 5, Request: 1}); err != nil {
		t.Fatal(err)
	}
	frame := buf.Bytes()
	start := time.Now()
	cut := false
	for i := 0; i < len(frame) && time.Since(start) < 5*time.Second; i++ {
		if _, err := conn.Write(frame[i : i+1]); err != nil {
			cut = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	f, err := fr.ReadFrame()
	switch {
	case err == nil && f.Kind == wire.KindError:
		re, _ := f.RemoteError()
		t.Logf("cut off after %v with: %v", time.Since(start).Round(time.Millisecond), re)
	case err == nil:
		t.Fatalf("the trickled frame was answered with %v: it was not cut off", f.Kind)
	case !cut && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset"):
		t.Fatalf("after trickling %d bytes over %v: %v, want the stage to have closed the connection", len(frame), time.Since(start), err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cut off after %v, want about the %v timeout", d, timeout)
	}
	if r := srv.Refusals(); r.Trickled != 1 {
		t.Errorf("%d frames counted as cut off, want 1", r.Trickled)
	}
	// The idle connection, silent all along, is still open: a Ping on it
	// is answered.
	if err := ifr.WritePing(9, nil); err != nil {
		t.Fatal(err)
	}
	idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	if f, err := ifr.ReadFrame(); err != nil || f.Kind != wire.KindPing {
		t.Fatalf("idle connection after %v: %v, %v; want a Ping answer", time.Since(start), f, err)
	}
}
