package stage_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/wire"
)

// headHello is what a head of this implementation sends a stage of w.
func headHello(w *model.Weights, name string) wire.Hello {
	return wire.Hello{Generation: wire.MaxGeneration, MinGeneration: wire.MinGeneration, MaxGeneration: wire.MaxGeneration,
		Model: testID, Width: uint32(w.Config.Dim), Vocab: uint32(w.Config.VocabSize),
		Encodings: wire.Default.IDs(), Encoding: wire.EncodingF32, Name: name}
}

// dialRaw connects to addr, authenticating with a when it is a TLS
// configuration, handshakes as h says, and returns the pinned Framer.
func dialRaw(t *testing.T, addr string, a *auth.Config, h wire.Hello) (net.Conn, *wire.Framer) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if a != nil && !a.Insecure {
		if conn, _, err = a.Client(context.Background(), conn, addr); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { conn.Close() })
	fr := wire.NewFramer(conn, conn)
	if err := fr.WriteHello(wire.KindHello, &h); err != nil {
		t.Fatal(err)
	}
	f := reply(t, conn, fr, 5*time.Second)
	if f.Kind != wire.KindHelloAck {
		re, _ := f.RemoteError()
		t.Fatalf("handshake refused: %v", re)
	}
	ack, err := f.Hello()
	if err != nil {
		t.Fatal(err)
	}
	agreed, err := wire.CheckHelloAck(&h, &ack)
	if err != nil {
		t.Fatal(err)
	}
	fr.Pin(agreed)
	return conn, fr
}

// reply reads the next frame that is not a heartbeat (a Ping with request
// 0), waiting at most d, and returns a copy that stays valid.
func reply(t *testing.T, conn net.Conn, fr *wire.Framer, d time.Duration) *wire.Frame {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(d))
	defer conn.SetReadDeadline(time.Time{})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no answer within %v: %v", d, err)
		}
		if f.Kind != wire.KindPing || f.Request != 0 {
			cp := *f
			cp.Payload = bytes.Clone(f.Payload)
			return &cp
		}
	}
}

// wantError requires f to be an Error of code whose message holds every
// one of subs, and returns it.
func wantError(t *testing.T, f *wire.Frame, code wire.ErrorCode, subs ...string) *wire.RemoteError {
	t.Helper()
	re, err := f.RemoteError()
	if err != nil {
		t.Fatalf("got a %v frame (request %d), want an Error of code %v", f.Kind, f.Request, code)
	}
	if re.Code != code {
		t.Errorf("error code %v, want %v: %s", re.Code, code, re.Message)
	}
	for _, s := range subs {
		if !strings.Contains(re.Message, s) {
			t.Errorf("error %q does not say %q", re.Message, s)
		}
	}
	return re
}

// openRaw opens session id with request req and returns the answer: the
// Reset's echo, or an Error.
func openRaw(t *testing.T, conn net.Conn, fr *wire.Framer, id, req uint64) *wire.Frame {
	t.Helper()
	if err := fr.WriteReset(wire.Meta{Session: id, Request: req}); err != nil {
		t.Fatal(err)
	}
	return reply(t, conn, fr, 5*time.Second)
}

// mustOpen opens session id and fails the test on a refusal.
func mustOpen(t *testing.T, conn net.Conn, fr *wire.Framer, id uint64) {
	t.Helper()
	if f := openRaw(t, conn, fr, id, id); f.Kind != wire.KindReset || f.Session != id {
		re, _ := f.RemoteError()
		t.Fatalf("session %d: %v %v, want its Reset echoed", id, f.Kind, re)
	}
}

// tokens is n token ids below vocab, none of them all alike.
func tokens(n, vocab int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32((i*37 + 11) % vocab)
	}
	return ids
}

// startLogged is startServer with a JSON log the test can read.
func startLogged(t *testing.T, w *model.Weights, cfg stage.Config) (*stage.Server, string, *syncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(log, nil))
	return startServer(t, w, ln, cfg), ln.Addr().String(), log
}

var (
	wideOnce sync.Once
	wide     *model.Weights
	wideErr  error
)

// wideWeights is synth.WideConfig (width 1024, 4 layers) with a context of
// seqLen, generated once per test binary: a model on which a long prefill
// takes seconds. The copies share the tensors.
func wideWeights(t *testing.T, seqLen int) *model.Weights {
	t.Helper()
	wideOnce.Do(func() {
		cfg := synth.WideConfig()
		cfg.SeqLen = 4096
		wide, wideErr = synth.Weights(cfg, 7)
	})
	if wideErr != nil {
		t.Fatal(wideErr)
	}
	w := *wide
	w.Config.SeqLen = seqLen
	return &w
}
