package stage_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// raiseFileLimit lifts the soft limit on open files to the hard one, for
// a test that holds a few hundred connections at each end.
func raiseFileLimit(t *testing.T, need uint64) {
	t.Helper()
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			t.Logf("raising the open-file limit: %v", err)
		}
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	if l.Cur < need {
		t.Skipf("open-file limit %d, the flood needs %d", l.Cur, need)
	}
}

// decodeRun decodes n tokens greedily after prompt through c, on a new
// session, and returns them and how long the decode steps took.
func decodeRun(c *pipeline.Chain, prompt []int, n int) ([]int, time.Duration, error) {
	ctx := context.Background()
	s, err := c.NewSession(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	next, err := s.ForwardArgmax(ctx, prompt, 0)
	if err != nil {
		return nil, 0, err
	}
	out := []int{next}
	t0 := time.Now()
	for pos := len(prompt); len(out) < n; pos++ {
		if next, err = s.ForwardArgmax(ctx, []int{next}, pos); err != nil {
			return out, time.Since(t0), fmt.Errorf("decode at position %d: %w", pos, err)
		}
		out = append(out, next)
	}
	return out, time.Since(t0), nil
}

// flood is the hostile traffic of one phase: limit connection attempts in
// all, at most rate a second (0: as fast as they go), made by connections
// held idle up to the stage's cap (half of them handshaken), peers
// trickling a Hello a byte at a time, first frames declaring 63 MiB, and
// peers that connect and hang up. Each kind runs in its own goroutines
// until the attempts are spent; a connection the stage closes is made
// again at once, as an attacker would.
type flood struct {
	addr     string
	hello    []byte // a head's Hello frame, for idle heads and tricklers
	limit    int64
	pace     *time.Ticker // nil: no pace
	attempts atomic.Int64
	dialErrs atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

func newFlood(addr string, hello []byte, limit int64, rate int, maxConns int) *flood {
	fl := &flood{addr: addr, hello: hello, limit: limit, stop: make(chan struct{})}
	if rate > 0 {
		fl.pace = time.NewTicker(time.Second / time.Duration(rate))
	}
	fl.run(8, func(net.Conn, int) {}) // connect and hang up
	fl.run(maxConns, func(c net.Conn, i int) {
		if i%2 == 0 {
			fl.hold(c, fl.hello) // a head that never opens a session
		} else {
			fl.hold(c, nil) // a connection that never says Hello
		}
	})
	fl.run(16, func(c net.Conn, _ int) { fl.trickle(c) })
	fl.run(4, func(c net.Conn, _ int) { oversized(c) })
	return fl
}

// done reports whether the attempts are spent.
func (fl *flood) done() bool { return fl.attempts.Load() >= fl.limit }

// end stops every attacker and waits for them.
func (fl *flood) end() {
	close(fl.stop)
	fl.wg.Wait()
	if fl.pace != nil {
		fl.pace.Stop()
	}
}

// dial makes one connection attempt, false once they are spent.
func (fl *flood) dial() (net.Conn, bool) {
	if fl.pace != nil {
		select {
		case <-fl.pace.C:
		case <-fl.stop:
			return nil, false
		}
	}
	if fl.attempts.Add(1) > fl.limit {
		return nil, false
	}
	c, err := net.DialTimeout("tcp", fl.addr, time.Second)
	if err != nil {
		fl.dialErrs.Add(1)
		return nil, true
	}
	return c, true
}

func (fl *flood) run(workers int, attack func(net.Conn, int)) {
	for i := range workers {
		fl.wg.Add(1)
		go func() {
			defer fl.wg.Done()
			for {
				c, ok := fl.dial()
				if !ok {
					return
				}
				if c != nil {
					attack(c, i)
					c.Close()
				}
			}
		}()
	}
}

// hold keeps c open, sending nothing after its opening bytes, until the
// stage closes it or the flood ends.
func (fl *flood) hold(c net.Conn, opening []byte) {
	c.Write(opening)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [512]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-fl.stop:
	}
}

// trickle sends the Hello a byte every 20 ms until the stage cuts it off.
func (fl *flood) trickle(c net.Conn) {
	for _, b := range fl.hello {
		select {
		case <-fl.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := c.Write([]byte{b}); err != nil {
			return
		}
	}
}

// oversized sends the header of a 63 MiB first frame and waits for the
// refusal.
func oversized(c net.Conn) {
	var buf bytes.Buffer
	fr := wire.NewFramer(&buf, nil)
	x := make([]float32, 1024*64)
	fr.WriteActivations(wire.KindPrefill, 0, wire.Meta{Session: 1, Request: 1}, wire.F32, x, 1024, 64)
	hdr := buf.Bytes()[:wire.HeaderSize]
	// The declared length: 63 MiB, far past what any Hello may be.
	hdr[8], hdr[9], hdr[10], hdr[11] = 0, 0, 0xf0, 0x03
	c.Write(hdr)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	c.Read(make([]byte, 256))
}

// decodeUnder decodes runs of n tokens through c until fl's attempts are
// spent (or 20 s pass), requiring each run's tokens to be want, and
// returns the head's decode rate and how many runs it made.
func decodeUnder(t *testing.T, c *pipeline.Chain, fl *flood, prompt, want []int) (float64, int) {
	t.Helper()
	runs, tokens := 0, 0
	var took time.Duration
	t0 := time.Now()
	for !fl.done() && time.Since(t0) < 20*time.Second {
		got, d, err := decodeRun(c, prompt, len(want))
		if err != nil {
			t.Fatalf("during the flood, after %d runs: %v", runs, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("during the flood, run %d decoded %v, quiet %v", runs, got, want)
		}
		runs, tokens, took = runs+1, tokens+len(want)-1, took+d
	}
	if runs == 0 {
		t.Fatal("the flood ended before the head decoded once under it")
	}
	if !fl.done() {
		t.Errorf("only %d of %d connection attempts were made in 20 s", fl.attempts.Load(), fl.limit)
	}
	return float64(tokens) / took.Seconds(), runs
}

// A head decoding through a stage keeps being served, with the same
// tokens, while other peers flood the stage: 20,000 connection attempts,
// idle connections up to --max-conns, tricklers, and oversized first
// frames (8,000 attempts under -race). Half the attempts come as fast as
// the flood's goroutines make them, half at 2,000 a second. It logs the head's tokens per second
// quiet and under each half. The flood runs in the same process, on the
// same cores: an all-out flood takes CPU from the stage as any busy
// neighbour would, and the head's rate shows that, not a refusal.
func TestFlood(t *testing.T) {
	const maxConns = 256
	raiseFileLimit(t, 3*maxConns+64)
	w := demoWeights(t)
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: time.Second, IdleTimeout: time.Second, MaxConns: maxConns})
	c, err := pipeline.Dial(context.Background(), []string{addr}, pipeline.Options{Identity: testID, Config: w.Config, Timeout: 10 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prompt := []int{1, 17, 42, 99, 7}
	const n = 100
	want, quietTook, err := decodeRun(c, prompt, n)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the quiet rate from the best of three runs
		_, took, err := decodeRun(c, prompt, n)
		if err != nil {
			t.Fatal(err)
		}
		quietTook = min(quietTook, took)
	}
	quiet := float64(n-1) / quietTook.Seconds()

	var hello bytes.Buffer
	h := headHello(w, "idle")
	wire.NewFramer(&hello, nil).WriteHello(wire.KindHello, &h)
	// Under the race detector each attempt costs about eight times as much
	// (10,000 all-out took 8.5 s): the flood is cut to keep the test near
	// 20 s there.
	attempts := int64(10_000)
	if raceDetector {
		attempts = 4_000
	}
	for _, phase := range []struct {
		name string
		rate int
	}{{"all-out", 0}, {"2,000 attempts/s", 2000}} {
		t0 := time.Now()
		fl := newFlood(addr, hello.Bytes(), attempts, phase.rate, maxConns)
		rate, runs := decodeUnder(t, c, fl, prompt, want)
		fl.end()
		t.Logf("%s flood: %.0f tok/s against %.0f quiet (%.0f%%), %d runs of %d tokens in %v; %d attempts, %d dials failed",
			phase.name, rate, quiet, 100*rate/quiet, runs, n, time.Since(t0).Round(time.Millisecond), min(fl.attempts.Load(), fl.limit), fl.dialErrs.Load())
	}
	r := srv.Refusals()
	t.Logf("refused: %d connections past --max-conns, %d oversized first frames, %d trickled, %d idle", r.Conns, r.PreHandshake, r.Trickled, r.Idle)
	if r.Conns == 0 || r.PreHandshake == 0 || r.Trickled == 0 || r.Idle == 0 {
		t.Errorf("refusals %+v: each kind of flood should have met its limit", r)
	}
	// Still serving once it is over.
	if got, _, err := decodeRun(c, prompt, n); err != nil || !slices.Equal(got, want) {
		t.Fatalf("after the flood: %v, %v", got, err)
	}
}
