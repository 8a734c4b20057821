package stage_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// openedSessions returns the ids of the "session opened" lines of a
// stage's JSON log.
func openedSessions(t *testing.T, log string) []uint64 {
	t.Helper()
	var ids []uint64
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec struct {
			Msg     string `json:"msg"`
			Session uint64 `json:"session"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec.Msg == "session opened" {
			ids = append(ids, rec.Session)
		}
	}
	return ids
}

// rawPeer handshakes with the stage at addr as h says (a head when it
// holds no layers, else an upstream stage) and returns its framer, pinned
// to the agreement.
func rawPeer(t *testing.T, addr string, h wire.Hello) (net.Conn, *wire.Framer) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fr := wire.NewFramer(conn, conn)
	if err := fr.WriteHello(wire.KindHello, &h); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
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

// refusal reads the stage's answer and requires an Error of code session
// whose message contains want.
func refusal(t *testing.T, conn net.Conn, fr *wire.Framer, want string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("no answer to a frame for another connection's session: %v", err)
	}
	re, err := f.RemoteError()
	if err != nil {
		t.Fatalf("answer is a %v frame, want an Error: the stage ran another connection's session", f.Kind)
	}
	if re.Code != wire.CodeSession || !strings.Contains(re.Message, want) {
		t.Fatalf("refusal %v %q, want code session and %q", re.Code, re.Message, want)
	}
}

// continues checks that the victim's session still gives the logits of an
// undisturbed run: the same tokens through a fresh session of the same
// chain, compared bit for bit.
func continues(t *testing.T, c *pipeline.Chain, victim *pipeline.Session, prompt, next []int) {
	t.Helper()
	ctx := context.Background()
	got, err := victim.Forward(ctx, next, len(prompt), false)
	if err != nil {
		t.Fatalf("the victim's next step failed: %v", err)
	}
	control, err := c.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	if _, err := control.Forward(ctx, prompt, 0, false); err != nil {
		t.Fatal(err)
	}
	want, err := control.Forward(ctx, next, len(prompt), false)
	if err != nil {
		t.Fatal(err)
	}
	testmodels.SameBits(t, "the victim's next logits against an undisturbed run's", got, want)
}

// victimChain starts stages over ranges, opens a head's chain and a
// session on it that has run prompt, and returns them with the session's
// id as the stages logged it (one "session opened" line per stage).
func victimChain(t *testing.T, ranges [][2]int, prompt []int) (*pipeline.Chain, *stage.Local, *pipeline.Session, uint64) {
	t.Helper()
	w := demoWeights(t)
	var log syncBuffer
	local, err := stage.StartLocal(w, ranges, stage.Config{Identity: testID, Timeout: 5 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(&log, nil))}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	c, err := pipeline.Dial(context.Background(), local.Addrs, pipeline.Options{Identity: testID, Config: w.Config, Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	victim, err := c.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := victim.Forward(context.Background(), prompt, 0, false); err != nil {
		t.Fatal(err)
	}
	ids := openedSessions(t, log.String())
	if len(ids) != len(ranges) || ids[0] != ids[len(ids)-1] {
		t.Fatalf("sessions opened: %v, want the one session on each of %d stages", ids, len(ranges))
	}
	return c, local, victim, ids[0]
}

// A head may not drive another head's session: its frames for it are
// refused on its own connection (found by the resilience probe: Prefill and
// Decode were processed for any session id from any connection).
func TestHeadCannotDriveAnotherHeadsSession(t *testing.T) {
	w := demoWeights(t)
	prompt := []int{1, 17, 42, 99}
	c, local, victim, id := victimChain(t, [][2]int{{0, w.Config.NLayers}}, prompt)
	h := wire.Hello{Generation: wire.MaxGeneration, MinGeneration: wire.MinGeneration, MaxGeneration: wire.MaxGeneration,
		Model: testID, Width: uint32(w.Config.Dim), Vocab: uint32(w.Config.VocabSize),
		Encodings: wire.Default.IDs(), Encoding: wire.EncodingF32, Name: "intruder"}
	conn, fr := rawPeer(t, local.Addrs[0], h)
	m := wire.Meta{Session: id, Request: 77, Start: uint32(len(prompt))}
	if err := fr.WriteTokenIDs(wire.KindDecode, 0, m, []uint32{3}); err != nil {
		t.Fatal(err)
	}
	refusal(t, conn, fr, "opened by another head")
	continues(t, c, victim, prompt, []int{5})
}

// An upstream connection may not feed another chain's session: a stage
// binds each session to the upstream connection that carries it, and
// answers frames from any other on that connection, never the victim's
// head (the probe ended a victim's run with frames sent as an upstream).
func TestUpstreamCannotFeedAnotherChainsSession(t *testing.T) {
	w := demoWeights(t)
	n := w.Config.NLayers
	prompt := []int{1, 8, 64}
	c, local, victim, id := victimChain(t, [][2]int{{0, 2}, {2, n}}, prompt)
	conn, fr := rawPeer(t, local.Addrs[1], upstreamHello(w, 0, 2, uint32(n)))
	x := make([]float32, w.Config.Dim)
	for i := range x {
		x[i] = 0.25
	}
	m := wire.Meta{Session: id, Request: 78, Start: uint32(len(prompt))}
	if err := fr.WriteActivations(wire.KindDecode, 0, m, wire.F16, x, 1, w.Config.Dim); err != nil {
		t.Fatal(err)
	}
	refusal(t, conn, fr, "carried by another upstream connection")
	continues(t, c, victim, prompt, []int{9})
}
