package api_test

import (
	"context"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Killing a stage mid-stream: the client's stream ends with an error event
// naming the stage (and no [DONE]) within --timeout; /health goes unready
// and new requests get 503 naming it; once the stage is back on its address,
// requests succeed again without restarting the API.
func TestStageKilledMidStream(t *testing.T) {
	m := stories(t)
	procs := startStages(t, m, 3, 2*time.Millisecond)
	const timeout = 3 * time.Second
	_, url := serveSplit(t, m, procs, timeout)
	victim := procs[1]
	ch, _ := stream(t, context.Background(), url, `{"model":"stories260K","prompt":"Once upon a time","max_tokens":480,"temperature":0,"stream":true}`)
	for range 5 {
		if ev := <-ch; ev.Error != "" || ev.Done {
			t.Fatalf("stream ended before the kill: %+v", ev)
		}
	}
	victim.kill()
	killed := time.Now()
	_, done, errMsg := collect(ch)
	took := time.Since(killed)
	if done || errMsg == "" || !strings.Contains(errMsg, victim.addr) {
		t.Fatalf("after killing stage 2 (%s): done %v, error %q; want an error event naming it and no [DONE]", victim.addr, done, errMsg)
	}
	if took > timeout {
		t.Fatalf("the error came %v after the kill, past --timeout %v", took, timeout)
	}
	t.Logf("client saw %q %v after the kill", errMsg, took)

	resp, body := httpGet(t, url+"/health")
	if resp.StatusCode != 503 || !strings.Contains(body, victim.addr) {
		t.Fatalf("/health with stage 2 down: %d %s", resp.StatusCode, body)
	}
	waitHealth(t, url, func(code int, body string) bool { return strings.Contains(body, "stage 2 ("+victim.addr+")") })
	resp, body = httpPost(t, url+"/v1/completions", `{"model":"stories260K","prompt":"Once","max_tokens":5}`)
	if resp.StatusCode != 503 || !strings.Contains(body, "stage 2 ("+victim.addr+")") || !strings.Contains(body, "stage_unavailable") {
		t.Fatalf("request while stage 2 is down: %d %s", resp.StatusCode, body)
	}

	victim.start(t) // the same address
	restarted := time.Now()
	waitHealth(t, url, func(code int, _ string) bool { return code == 200 })
	t.Logf("/health ready %v after the stage came back", time.Since(restarted))
	resp, body = httpPost(t, url+"/v1/completions", `{"model":"stories260K","prompt":"Once","max_tokens":5}`)
	if resp.StatusCode != 200 {
		t.Fatalf("request after the restart: %d %s", resp.StatusCode, body)
	}
}

// waitHealth polls /health until ok(code, body), for at most 10 s.
func waitHealth(t *testing.T, url string, ok func(int, string) bool) {
	t.Helper()
	var code int
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, b := httpGet(t, url+"/health")
		if code, body = resp.StatusCode, b; ok(code, body) {
			return
		}
	}
	t.Fatalf("/health stayed %d %s", code, body)
}

// Shutdown stops accepting, ends in-flight streams with an error event
// (never a [DONE]), closes their sessions on every stage and returns.
func TestShutdownAbortsStreams(t *testing.T) {
	m := stories(t)
	procs := startStages(t, m, 3, 2*time.Millisecond)
	srv, _ := serveSplit(t, m, procs, 5*time.Second)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	ch, _ := stream(t, context.Background(), url, `{"model":"stories260K","prompt":"Once upon a time","max_tokens":480,"stream":true}`)
	for range 3 {
		<-ch
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	_, done, errMsg := collect(ch)
	if done || !strings.Contains(errMsg, "shutting down") {
		t.Fatalf("stream at shutdown: done %v, error %q", done, errMsg)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting connections after shutdown")
	}
	for i, p := range procs {
		waitUntil(t, time.Second, func() bool { return p.srv.Stats().Sessions == 0 }, "stage %d frees the session", i+1)
	}
}

func waitUntil(t *testing.T, within time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: "+format, append([]any{within}, args...)...)
		}
	}
}

func httpGet(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(resp)
}

func httpPost(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(resp)
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// stallProxy forwards TCP connections on loopback to target until stalled:
// then it holds every byte it reads, both ways, until resumed. The
// connections stay open, so to both ends the other has just gone silent,
// as a hung process or a dead link looks.
type stallProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	closed  bool
	conns   []net.Conn
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies src to dst, holding what it read while the proxy is stalled.
func (p *stallProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.stalled && !p.closed {
			p.cond.Wait()
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) stall(on bool) {
	p.mu.Lock()
	p.stalled = on
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *stallProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
}

// A stage that goes silent mid-stream (its connections open, nothing
// flowing: a hung process or a dead link) fails the stream within --timeout
// with an error event naming it; /health goes 503 naming it, and once it
// answers again requests succeed without restarting the API.
func TestStageSilentMidStream(t *testing.T) {
	m := stories(t)
	procs := startStages(t, m, 3, 2*time.Millisecond)
	proxy := newStallProxy(t, procs[1].addr)
	// The head and stage 1 both reach stage 2 through the proxy: the head
	// routes stage 1 to the address it was given.
	chain := []*stageProc{procs[0], {addr: proxy.addr()}, procs[2]}
	const timeout = time.Second
	_, url := serveSplit(t, m, chain, timeout)
	stage2 := "stage 2 (" + proxy.addr()
	const greedy = `{"model":"stories260K","prompt":"Once upon a time","max_tokens":8,"temperature":0}`
	resp, before := httpPost(t, url+"/v1/completions", greedy)
	if resp.StatusCode != 200 {
		t.Fatalf("before the stall: %d %s", resp.StatusCode, before)
	}

	ch, _ := stream(t, context.Background(), url, `{"model":"stories260K","prompt":"Once upon a time","max_tokens":480,"temperature":0,"stream":true}`)
	for range 5 {
		if ev := <-ch; ev.Error != "" || ev.Done {
			t.Fatalf("stream ended before the stall: %+v", ev)
		}
	}
	proxy.stall(true)
	stalled := time.Now()
	_, done, errMsg := collect(ch)
	took := time.Since(stalled)
	t.Logf("client saw %q %v after the stall", errMsg, took)
	if done || !strings.Contains(errMsg, stage2) {
		t.Fatalf("stage 2 silent: done %v, error %q; want an error event naming %s...) and no [DONE]", done, errMsg, stage2)
	}
	// The reply in flight is given up after --timeout (it was sent at most
	// a token's time, about 10 ms, before the stall); naming the silent
	// stage pings every stage for at most a quarter of it more. Measured:
	// ~1.25 s.
	if took < timeout-100*time.Millisecond || took > timeout+time.Second {
		t.Fatalf("the error came %v after the stall; want --timeout %v plus at most 1 s", took, timeout)
	}

	waitHealth(t, url, func(code int, body string) bool { return code == 503 && strings.Contains(body, stage2) })
	resp, body := httpPost(t, url+"/v1/completions", greedy)
	if resp.StatusCode != 503 || !strings.Contains(body, stage2) || !strings.Contains(body, "stage_unavailable") {
		t.Fatalf("request while stage 2 is silent: %d %s", resp.StatusCode, body)
	}

	proxy.stall(false)
	resumed := time.Now()
	waitHealth(t, url, func(code int, _ string) bool { return code == 200 })
	t.Logf("/health ready %v after stage 2 answered again", time.Since(resumed))
	resp, after := httpPost(t, url+"/v1/completions", greedy)
	strip := regexp.MustCompile(`"(id|created)":("[^"]*"|\d+)`)
	if resp.StatusCode != 200 || strip.ReplaceAllString(after, "") != strip.ReplaceAllString(before, "") {
		t.Fatalf("after the stall: %d %s\nbefore: %s", resp.StatusCode, after, before)
	}
}
