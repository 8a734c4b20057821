package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/wire"
)

// faultProxy stands in front of a stage, so that a test can make it
// disappear (kill: every connection and the listener closed, as when the
// process dies) or freeze (nothing more forwarded either way while the
// connections stay open, as when the process is stopped).
type faultProxy struct {
	ln     net.Listener
	target string

	corrupt atomic.Bool // flip a bit of the next chunk forwarded, either way

	mu     sync.Mutex
	frozen bool
	thaw   chan struct{} // closed when frozen ends
	conns  []net.Conn
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target, thaw: make(chan struct{})}
	go p.accept()
	t.Cleanup(p.kill)
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies src to dst, holding every chunk while the proxy is frozen.
func (p *faultProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			frozen, thaw := p.frozen, p.thaw
			p.mu.Unlock()
			if frozen {
				<-thaw
			}
			if p.corrupt.CompareAndSwap(true, false) {
				buf[n/2] ^= 0x10
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

func (p *faultProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// reset closes the connections through the proxy (a link that drops),
// but keeps accepting new ones.
func (p *faultProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// kill closes everything, thawing frozen pipes so that they end.
func (p *faultProxy) kill() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	if p.frozen {
		p.frozen = false
		close(p.thaw)
	}
}

// failoverSetup serves stories260K as three positions, the middle one with
// one or more replicas, every stage on its own server behind a faultProxy.
type failoverSetup struct {
	m       *loader.Model
	id      wire.Digest
	proxies [3][]*faultProxy   // by position, replica
	servers [3][]*stage.Server // the same
	middle  []*faultProxy      // proxies[1]
	want    [][]float32        // the whole model's logits, teacher-forced over tokens
	tokens  []int              // prompt plus greedy continuation of the whole model
	prompt  int
	opts    Options
}

func newFailoverSetup(t *testing.T, replicas int) *failoverSetup {
	t.Helper()
	m := openStories(t)
	id, err := m.Identity()
	if err != nil {
		t.Fatal(err)
	}
	n := m.Weights.Config.NLayers
	ranges := [][2]int{{0, 2}}
	for range replicas {
		ranges = append(ranges, [2]int{2, 4})
	}
	ranges = append(ranges, [2]int{4, n})
	local, err := stage.StartLocal(m.Weights, ranges, stage.Config{Identity: id, Timeout: 5 * time.Second, Logger: quiet, Heartbeat: 25 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	s := &failoverSetup{m: m, id: id}
	for i, a := range local.Addrs {
		pos := min(i, 1)
		if i == len(local.Addrs)-1 {
			pos = 2
		}
		s.proxies[pos] = append(s.proxies[pos], newFaultProxy(t, a))
		s.servers[pos] = append(s.servers[pos], local.Servers()[i])
	}
	s.middle = s.proxies[1]
	s.opts = Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second, Hang: 400 * time.Millisecond, Logger: quiet}
	// The reference: the whole model's greedy continuation and its logits.
	mod, _ := model.New(m.Weights)
	whole, _ := generate.NewLocal(mod)
	s.tokens = m.Tokenizer.Encode("Once upon a time, there was a little dog", true, false)
	s.prompt = len(s.tokens)
	logits, err := whole.Forward(context.Background(), s.tokens, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	s.want = logits
	for len(s.tokens) < s.prompt+40 {
		next := sample.Argmax(s.want[len(s.want)-1])
		s.tokens = append(s.tokens, next)
		l, err := whole.Forward(context.Background(), []int{next}, len(s.tokens)-1, false)
		if err != nil {
			t.Fatal(err)
		}
		s.want = append(s.want, l[0])
	}
	return s
}

// session supervises the setup's positions and opens a session; cleanup
// closes the supervisor.
func (s *failoverSetup) session(t *testing.T) (*Supervisor, *Session) {
	t.Helper()
	sup, err := Supervise(context.Background(), s.positions(), s.opts, SupervisorOptions{Poll: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	sess, err := sup.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return sup, sess
}

func (s *failoverSetup) positions() [][]string {
	out := make([][]string, 3)
	for i, ps := range s.proxies {
		for _, p := range ps {
			out[i] = append(out[i], p.addr())
		}
	}
	return out
}

// run prefills the prompt and decodes the rest of s.tokens teacher-forced,
// calling fault before the token at index at, and returns the logits.
func (s *failoverSetup) run(ctx context.Context, sess *Session, at int, fault func()) ([][]float32, error) {
	got, err := sess.Forward(ctx, s.tokens[:s.prompt], 0, true)
	if err != nil {
		return nil, err
	}
	for i := s.prompt; i < len(s.tokens); i++ {
		if i == at {
			fault()
		}
		l, err := sess.Forward(ctx, s.tokens[i:i+1], i, false)
		if err != nil {
			return got, fmt.Errorf("token %d: %w", i, err)
		}
		got = append(got, l[0])
	}
	return got, nil
}

// A middle stage killed or stopped at a random token: the session moves to
// the replica, replays its tokens, and every logit after the failure equals
// the whole model's bit for bit, as if nothing had happened.
func TestFailoverToReplicaIsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 0))
	for run := range 6 {
		kind := []string{"kill", "stop"}[run%2]
		t.Run(fmt.Sprintf("%s-%d", kind, run), func(t *testing.T) {
			s := newFailoverSetup(t, 2)
			sup, sess := s.session(t)
			at := s.prompt + 1 + rng.IntN(len(s.tokens)-s.prompt-1)
			fault := s.middle[0].kill
			if kind == "stop" {
				fault = s.middle[0].freeze
			}
			t0 := time.Now()
			got, err := s.run(context.Background(), sess, at, fault)
			if err != nil {
				t.Fatalf("fault at token %d: %v", at, err)
			}
			testmodels.SameBits(t, fmt.Sprintf("%s at token %d, against the whole model", kind, at), got, s.want)
			topo := sup.Topology()
			if topo.Failovers != 1 {
				t.Errorf("%d failovers recorded, want 1", topo.Failovers)
			}
			if a := topo.Stages[1].Addr; a != s.middle[1].addr() {
				t.Errorf("stage 2 is %s after the failover, want the replica %s", a, s.middle[1].addr())
			}
			t.Logf("%s at token %d: %d tokens in %v", kind, at, len(s.tokens), time.Since(t0).Round(time.Millisecond))
		})
	}
}

// Without a replica, a killed or stopped middle stage fails the request
// within the hang threshold (plus a little), with an error naming it.
func TestFailureWithoutReplicaNamesTheStage(t *testing.T) {
	for _, kind := range []string{"kill", "stop"} {
		t.Run(kind, func(t *testing.T) {
			s := newFailoverSetup(t, 1)
			_, sess := s.session(t)
			var failedAt time.Time
			fault := func() { failedAt = time.Now(); s.middle[0].kill() }
			if kind == "stop" {
				fault = func() { failedAt = time.Now(); s.middle[0].freeze() }
			}
			_, err := s.run(context.Background(), sess, s.prompt+3, fault)
			took := time.Since(failedAt)
			if err == nil {
				t.Fatal("the run completed with its middle stage gone")
			}
			if !strings.Contains(err.Error(), s.middle[0].addr()) {
				t.Errorf("the error does not name the middle stage %s: %v", s.middle[0].addr(), err)
			}
			var he *HangError
			if kind == "stop" && !errors.As(err, &he) {
				t.Errorf("a stopped stage gave %v, want a HangError", err)
			}
			// Measured: 2-6 ms for a kill, 450-500 ms for a stop (the
			// threshold, 400 ms, plus a tick of the watch).
			if limit := s.opts.Hang + time.Second; took > limit {
				t.Errorf("failed %v after the fault, want within %v", took, limit)
			}
			t.Logf("%s: failed %v after the fault: %v", kind, took.Round(time.Millisecond), err)
		})
	}
}

// A first stage computing a prefill for several times the hang threshold is
// not taken for hung: its heartbeats keep the head waiting. Without them
// (Heartbeat < 0) the same prefill is declared a hang, naming stage 1: the
// case the heartbeats exist for.
func TestHeartbeatsCoverALongPrefill(t *testing.T) {
	cfg := synth.WideConfig()
	// A prompt of up to 1535 tokens, about 3.7 s of prefill when this was
	// written (11 s under the race detector) and 2.1-2.2 s on 2026-12-04
	// with the per-token work of a batch on both threads: over the 1.2 s
	// (3x the threshold) the test needs to show anything, which it checks. (511 tokens took 0.56 to 0.72 s; 1023 about 1.6 s;
	// 2047 5.4 s, 16.5 s under the race detector.) Without the SIMD
	// kernels (SEAM_SIMD=none) prefill is ten times slower or more, and
	// 1535 tokens outlasted the 30 s request timeout; so a first prefill
	// of 255 tokens times this machine, and the prompt is cut to what
	// should take about 3 s at that speed.
	cfg.SeqLen = 1536
	w, err := synth.Weights(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	id := wire.Digest{1}
	tokens := make([]int, cfg.SeqLen-1)
	for i := range tokens {
		tokens[i] = (i*37 + 11) % cfg.VocabSize
	}
	// 400 ms, not less: the idle last stage must answer the head's ping
	// within half of it while the first stage's prefill keeps both cores
	// busy, and in CI other test binaries share them too (at 200 ms one run
	// declared the idle stage hung).
	const hang = 400 * time.Millisecond
	const probe = 255
	for _, beat := range []time.Duration{25 * time.Millisecond, -1} {
		local, err := stage.StartLocal(w, [][2]int{{0, 3}, {3, 4}}, stage.Config{Identity: id, Timeout: 30 * time.Second, Logger: quiet, Heartbeat: beat}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Dial(context.Background(), local.Addrs, Options{Identity: id, Config: cfg, Timeout: 30 * time.Second, Hang: hang, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if beat > 0 && len(tokens) == cfg.SeqLen-1 {
			tokens = tokens[:sizePrompt(t, c, tokens, probe, 3*time.Second)]
		}
		sess, err := c.NewSession(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, err = sess.ForwardArgmax(context.Background(), tokens, 0)
		took := time.Since(t0)
		c.Close()
		local.Close()
		if beat > 0 {
			if err != nil {
				t.Fatalf("with heartbeats every %v: %v", beat, err)
			}
			if took < 3*hang {
				t.Fatalf("the prefill took %v, under 3x the threshold %v: the test shows nothing", took, hang)
			}
			t.Logf("a %d-token prefill of %v with heartbeats every %v and --hang %v: completed", len(tokens), took.Round(time.Millisecond), beat, hang)
			continue
		}
		var he *HangError
		if !errors.As(err, &he) || he.Index != 0 {
			t.Fatalf("without heartbeats, a prefill of %v gave %v; want stage 1 declared hung", took, err)
		}
		t.Logf("without heartbeats: %v", err)
	}
}

// sizePrompt times a prefill of the first probe tokens in a session of its
// own and returns how many tokens (at least probe, at most all) should take
// about target at that speed, counted linearly: a longer prompt's attention
// makes it slower, not faster, so the real prefill takes at least as long.
func sizePrompt(t *testing.T, c *Chain, tokens []int, probe int, target time.Duration) int {
	t.Helper()
	sess, err := c.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	t0 := time.Now()
	if _, err := sess.ForwardArgmax(context.Background(), tokens[:probe], 0); err != nil {
		t.Fatalf("timing a %d-token prefill: %v", probe, err)
	}
	took := time.Since(t0)
	n := min(len(tokens), max(probe, int(float64(probe)*float64(target)/float64(took))))
	t.Logf("a %d-token prefill took %v: the prompt is %d tokens", probe, took.Round(time.Millisecond), n)
	return n
}

// ParsePositions reads replicas with '|' and refuses what it cannot use.
func TestParsePositions(t *testing.T) {
	got, err := ParsePositions("a:1, b1:2|b2:2 ,c:3")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[[a:1] [b1:2 b2:2] [c:3]]" {
		t.Errorf("got %v", got)
	}
	for in, want := range map[string]string{
		"":            "no stage addresses",
		"a:1,,c:3":    "stage 2, replica 1 has no address",
		"a:1,b:2|":    "stage 2, replica 2 has no address",
		"a:1,b:2|b:2": "stage 2 lists b:2 twice",
		"a:1,b":       `stage 2, replica 1 address "b": want host:port`,
	} {
		if _, err := ParsePositions(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePositions(%q) = %v, want an error with %q", in, err, want)
		}
	}
}
