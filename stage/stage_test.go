package stage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/wire"
)

var (
	testID = wire.Digest{1, 2, 3}
	quiet  = slog.New(slog.DiscardHandler)
)

func demoWeights(t *testing.T) *model.Weights {
	t.Helper()
	w, err := synth.Weights(synth.DemoConfig(), 5)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// upstreamHello is what a stage holding [a, b) would send to the next one.
func upstreamHello(w *model.Weights, a, b, peerEnd uint32) wire.Hello {
	return wire.Hello{
		Generation: 1, MinGeneration: 1, MaxGeneration: 1, Model: testID,
		Layers: wire.LayerRange{Start: a, End: b}, PeerLayers: wire.LayerRange{Start: b, End: peerEnd},
		Width: uint32(w.Config.Dim), Vocab: uint32(w.Config.VocabSize),
		Encodings: wire.Default.IDs(), Encoding: wire.EncodingF16, Name: "test-upstream",
	}
}

// hello dials addr, sends h, and returns the refusal message, or "" on acceptance.
func hello(t *testing.T, addr string, h wire.Hello) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fr := wire.NewFramer(conn, conn)
	if err := fr.WriteHello(wire.KindHello, &h); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if f.Kind == wire.KindHelloAck {
		return ""
	}
	re, err := f.RemoteError()
	if err != nil {
		t.Fatal(err)
	}
	return re.Message
}

// Each handshake mismatch is refused, and the refusal names both values.
func TestHandshakeRefusals(t *testing.T) {
	w := demoWeights(t)
	// This stage decodes f32 and q8 only.
	reg := wire.NewRegistryOf(wire.F32, wire.Q8)
	local, err := stage.StartLocal(w, [][2]int{{2, 6}}, stage.Config{Identity: testID, Timeout: 5 * time.Second, Registry: reg, Logger: quiet}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	addr := local.Addrs[0]
	ok := upstreamHello(w, 0, 2, 6)
	ok.Encoding = wire.EncodingQ8
	if msg := hello(t, addr, ok); msg != "" {
		t.Fatalf("matching upstream refused: %s", msg)
	}
	unspoken := wire.MaxGeneration + 1 // a generation this implementation does not speak
	cases := []struct {
		name  string
		edit  func(*wire.Hello)
		wants []string
	}{
		{"generation", func(h *wire.Hello) { h.Generation, h.MinGeneration, h.MaxGeneration = unspoken, unspoken, unspoken }, []string{fmt.Sprintf("%d..%d", unspoken, unspoken), fmt.Sprintf("1..%d", wire.MaxGeneration)}},
		{"model digest", func(h *wire.Hello) { h.Model = wire.Digest{9} }, []string{"model digest", wire.Digest{9}.String(), testID.String()}},
		{"layer boundary", func(h *wire.Hello) {
			h.Layers = wire.LayerRange{Start: 0, End: 1}
			h.PeerLayers = wire.LayerRange{Start: 1, End: 6}
		}, []string{"layer boundary", "ending at 1", "starting at 2"}},
		{"width", func(h *wire.Hello) { h.Width = 96 }, []string{"hidden width", "96", "128"}},
		{"encoding", func(h *wire.Hello) { h.Encoding = wire.EncodingQ4 }, []string{"encoding", "q4", "[f32 q8]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := ok
			c.edit(&h)
			msg := hello(t, addr, h)
			if msg == "" {
				t.Fatal("accepted")
			}
			for _, want := range c.wants {
				if !strings.Contains(msg, want) {
					t.Errorf("refusal %q does not mention %q", msg, want)
				}
			}
		})
	}
}

func startChain(t *testing.T, w *model.Weights, ranges [][2]int, cfg stage.Config) (*pipeline.Chain, *stage.Local) {
	t.Helper()
	cfg.Identity = testID
	cfg.Logger = quiet
	local, err := stage.StartLocal(w, ranges, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	c, err := pipeline.Dial(context.Background(), local.Addrs, pipeline.Options{Identity: testID, Config: w.Config, Timeout: cfg.Timeout, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, local
}

// Many sessions at once through one chain each get exactly the whole
// model's logits (run this package with -race).
func TestConcurrentSessions(t *testing.T) {
	w := demoWeights(t)
	mod, _ := model.New(w)
	c, _ := startChain(t, w, [][2]int{{0, 2}, {2, 4}, {4, 6}}, stage.Config{Timeout: 10 * time.Second})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens := []int{1, 10 + g, 20 + g, 30, 40, 50 + g}
			whole, _ := generate.NewLocal(mod)
			want, _ := whole.Forward(context.Background(), tokens, 0, true)
			s, err := c.NewSession(context.Background())
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for p, tok := range tokens {
				got, err := s.Forward(context.Background(), []int{tok}, p, false)
				if err != nil {
					errs <- err
					return
				}
				for i := range got[0] {
					if got[0][i] != want[p][i] {
						t.Errorf("session %d position %d logit %d: %v, whole %v", g, p, i, got[0][i], want[p][i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A stage that dies mid-generation fails the request quickly, with an error
// naming a stage, and the text written before the failure is only what the
// model produced up to then.
func TestKilledStageAbortsGeneration(t *testing.T) {
	w := demoWeights(t)
	tok, _ := synth.Tokenizer(w.Config.VocabSize)
	c, local := startChain(t, w, [][2]int{{0, 3}, {3, 6}}, stage.Config{Timeout: 3 * time.Second})
	s, err := c.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := &killAfter{n: 10, kill: func() { local.Servers()[1].Close() }}
	smp, _ := sample.New(0, 1, 1)
	start := time.Now()
	_, err = generate.Generate(context.Background(), s, tok, w.Config.SeqLen, "hello", generate.Options{Steps: 200, Sampler: smp}, out)
	if err == nil {
		t.Fatal("generation succeeded with a dead stage")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("failure took %v, beyond the 3 s timeout", took)
	}
	if !strings.Contains(err.Error(), "stage") {
		t.Errorf("error %q does not name a stage", err)
	}
	if out.after != 0 {
		t.Errorf("%d pieces were written after the stage died", out.after)
	}
	t.Logf("error after %d pieces: %v", out.pieces, err)
}

// killAfter calls kill once n pieces were written, then counts pieces written after.
type killAfter struct {
	n, pieces, after int
	kill             func()
	killed           bool
}

func (k *killAfter) Write(p []byte) (int, error) {
	if k.killed {
		k.after++
	}
	k.pieces++
	if k.pieces == k.n {
		k.kill()
		k.killed = true
	}
	return len(p), nil
}

// A frame whose positions run past the context, or skip ahead of what the
// session has cached, is refused with an error to the head, before the stage
// allocates anything for it; the session stays usable.
func TestPositionsBeyondContextRefused(t *testing.T) {
	w := demoWeights(t)
	c, _ := startChain(t, w, [][2]int{{0, 3}, {3, 6}}, stage.Config{Timeout: 5 * time.Second})
	s, err := c.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tooMany := make([]int, w.Config.SeqLen+1)
	if _, err := s.Forward(context.Background(), tooMany, 0, false); err == nil || !strings.Contains(err.Error(), "context") {
		t.Fatalf("prefill beyond the context: %v", err)
	}
	if _, err := s.Forward(context.Background(), []int{1}, 5, false); err == nil || !strings.Contains(err.Error(), "cached") {
		t.Fatalf("decode skipping ahead: %v", err)
	}
	if _, err := s.Forward(context.Background(), []int{1, 2, 3}, 0, false); err != nil {
		t.Fatalf("session unusable after refusals: %v", err)
	}
}

// A stage with an allowlist refuses to be routed elsewhere, naming the address.
func TestAllowDownstream(t *testing.T) {
	w := demoWeights(t)
	local, err := stage.StartLocal(w, [][2]int{{0, 3}, {3, 6}}, stage.Config{Identity: testID, Timeout: 5 * time.Second, Logger: quiet,
		AllowDownstream: []string{"10.9.9.9:7070"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	_, err = pipeline.Dial(context.Background(), local.Addrs, pipeline.Options{Identity: testID, Config: w.Config, Timeout: 5 * time.Second, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "may not dial "+local.Addrs[1]) {
		t.Fatalf("route outside the allowlist: %v", err)
	}
	// Said once, without the wire's code word for an unclassified failure.
	if n := strings.Count(err.Error(), "local-1"); n != 1 || strings.Contains(err.Error(), "peer error") {
		t.Errorf("the refusal names the stage %d times or shows the wire code: %v", n, err)
	}
	t.Logf("%v", err)
}

// Shutdown tells a head in the middle of a generation why its request
// failed, naming the stage, and returns only once no frame is being
// computed; the other stages keep serving new heads.
func TestShutdownTellsTheHead(t *testing.T) {
	w := demoWeights(t)
	// The second pair runs over emulated 5 ms links, whose queued bytes
	// (the notice among them) are delivered only if the stage closes the
	// link rather than the socket under it.
	for run := range 4 {
		victim := run % 2
		cfg := stage.Config{Timeout: 5 * time.Second}
		if run >= 2 {
			cfg.Link = link.Config{Latency: 5 * time.Millisecond}
		}
		c, local := startChain(t, w, [][2]int{{0, 3}, {3, 6}}, cfg)
		s, err := c.NewSession(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 1)
		go func() {
			for pos := 0; ; pos++ {
				if _, err := s.Forward(context.Background(), []int{1 + pos%7}, pos, false); err != nil {
					errs <- err
					return
				}
			}
		}()
		time.Sleep(20 * time.Millisecond)
		if err := local.Servers()[victim].Shutdown("received SIGTERM"); err != nil {
			t.Fatal(err)
		}
		err = <-errs
		var se *pipeline.StageError
		if !errors.As(err, &se) || !se.Shutdown() {
			t.Fatalf("victim %d: head saw %v, want a shutdown", victim+1, err)
		}
		// The head's description of the stage, naming it once, then why;
		// or, when the upstream stage's relay of the same notice arrives
		// first (a race between two sockets), that relay, which names the
		// stage that shut down.
		msg, name := se.Error(), fmt.Sprintf("%q", fmt.Sprintf("local-%d", victim+1))
		direct := strings.HasPrefix(msg, fmt.Sprintf("stage %d (", victim+1)) && strings.Count(msg, name) == 1 &&
			strings.Contains(msg, name+", layers ") && strings.HasSuffix(msg, ") is shutting down (received SIGTERM)")
		relay := victim > 0 && strings.HasSuffix(msg, "reports: stage "+name+" is shutting down (received SIGTERM)")
		if !direct && !relay {
			t.Fatalf("victim %d: head saw %v, want a shutdown naming the stage %s", victim+1, err, name)
		}
		t.Logf("victim %d: %v", victim+1, err)
	}
}

// At Info a stage logs connections, handshakes and sessions, at Debug
// every frame, and every line carries the stage name and a session id (0
// for the whole connection), as JSON when asked.
func TestStageLogs(t *testing.T) {
	w := demoWeights(t)
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	local, err := stage.StartLocal(w, [][2]int{{0, 3}, {3, 6}}, stage.Config{Identity: testID, Timeout: 5 * time.Second, Logger: logger}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pipeline.Dial(context.Background(), local.Addrs, pipeline.Options{Identity: testID, Config: w.Config, Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward(context.Background(), []int{1, 2, 3}, 0, false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	c.Close()
	local.Close()
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if _, ok := rec["session"]; !ok || rec["stage"] == nil || rec["stage"] == "" {
			t.Errorf("log line without stage and session: %s", line)
		}
		msg := rec["msg"].(string)
		if strings.HasPrefix(msg, "session closed") {
			msg = "session closed" // by a Close frame, or when the head left first
		}
		seen[msg] = true
	}
	for _, m := range []string{"listening", "connection accepted", "handshake accepted", "routed downstream", "session opened",
		"frame from head", "frame from upstream", "session closed", "head disconnected"} {
		if !seen[m] {
			t.Errorf("no %q line; saw %v", m, seen)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BalancedRanges gives the stage that holds the classifier fewer layers, in
// proportion to its weight, and every range at least one layer.
func TestBalancedRanges(t *testing.T) {
	cfg := synth.Stories110MConfig()
	cfg.VocabSize = 32000
	w, err := synth.Weights(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := stage.BalancedRanges(w, 3)
	if err != nil {
		t.Fatal(err)
	}
	// 12 layers of 7.1M weights and a 24.6M classifier: about 5.2 layers' worth a stage.
	if fmt.Sprint(got) != "[[0 5] [5 10] [10 12]]" {
		t.Errorf("BalancedRanges(stories110M, 3) = %v", got)
	}
	one, _ := stage.BalancedRanges(w, 12)
	for i, r := range one {
		if r != [2]int{i, i + 1} {
			t.Fatalf("12 stages of 12 layers: %v", one)
		}
	}
	if _, err := stage.BalancedRanges(w, 13); err == nil {
		t.Error("13 stages of 12 layers accepted")
	}
	t.Logf("stories110M in 3: %v", got)
}
