package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/api"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/scheduler"
	"github.com/seamlm/seam/stage"
)

var quiet = slog.New(slog.DiscardHandler)

func stories(t testing.TB) *loader.Model {
	t.Helper()
	m, err := loader.Open(testmodels.Path(t, testmodels.Stories260K), loader.Options{TokenizerPath: testmodels.Path(t, testmodels.Tok512)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// stageProc is one in-process stage that a test can kill and restart on
// the same address.
type stageProc struct {
	cfg  stage.Config
	addr string
	srv  *stage.Server
}

func (p *stageProc) start(t testing.TB) {
	t.Helper()
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	if p.srv, err = stage.New(p.cfg); err != nil {
		t.Fatal(err)
	}
	go p.srv.Serve(ln)
}

func (p *stageProc) kill() { p.srv.Close() }

// startStages serves m as n stages; each stage delays what it sends by lat.
func startStages(t testing.TB, m *loader.Model, n int, lat time.Duration) []*stageProc {
	t.Helper()
	ranges, err := stage.EvenRanges(m.Weights.Config.NLayers, n)
	if err != nil {
		t.Fatal(err)
	}
	return stagesOver(t, m, ranges, lat)
}

// stagesOver serves m's layer ranges, each as its own stage delaying what
// it sends by lat.
func stagesOver(t testing.TB, m *loader.Model, ranges [][2]int, lat time.Duration) []*stageProc {
	t.Helper()
	id, err := m.Identity()
	if err != nil {
		t.Fatal(err)
	}
	var procs []*stageProc
	for i, r := range ranges {
		part := *m.Weights
		part.First, part.Last = r[0], r[1]
		mod, err := model.New(&part)
		if err != nil {
			t.Fatal(err)
		}
		p := &stageProc{cfg: stage.Config{Model: mod, Identity: id, Name: fmt.Sprintf("test-%d", i+1), Timeout: 5 * time.Second,
			Logger: quiet, Link: link.Config{Latency: lat}}}
		p.start(t)
		t.Cleanup(func() { p.srv.Close() })
		procs = append(procs, p)
	}
	return procs
}

// serveSplit runs the API over a supervised chain through procs.
func serveSplit(t testing.TB, m *loader.Model, procs []*stageProc, timeout time.Duration) (*api.Server, string) {
	t.Helper()
	id, _ := m.Identity()
	var addrs []string
	for _, p := range procs {
		addrs = append(addrs, p.addr)
	}
	sup, err := pipeline.Supervise(context.Background(), pipeline.Singles(addrs), pipeline.Options{Identity: id, Config: m.Weights.Config, Timeout: timeout},
		pipeline.SupervisorOptions{Poll: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	return serve(t, m, scheduler.Pipeline(sup))
}

func serveWhole(t testing.TB, m *loader.Model) (*api.Server, string) {
	t.Helper()
	mod, err := model.New(m.Weights)
	if err != nil {
		t.Fatal(err)
	}
	e, err := scheduler.NewLocal(mod)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, m, e)
}

func serve(t testing.TB, m *loader.Model, e scheduler.Engine) (*api.Server, string) {
	t.Helper()
	s, err := api.New(api.Config{Engine: e, Tokenizer: m.Tokenizer, ContextLen: m.Weights.Config.SeqLen, ModelName: "stories260K",
		ModelInfo: m.Weights.Config.String(), MaxConcurrent: 32, Queue: 8, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// event is one server-sent event: a chunk, an error, or [DONE].
type event struct {
	Done  bool
	Text  string
	Error string
	Raw   string
}

// stream posts a streamed completion and delivers its events in order; the
// channel closes when the stream ends.
func stream(t testing.TB, ctx context.Context, url, body string) (<-chan event, func()) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	ch := make(chan event, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if data == "[DONE]" {
				ch <- event{Done: true}
				continue
			}
			var c struct {
				Choices []struct{ Text string }
				Error   *struct{ Message string }
			}
			json.Unmarshal([]byte(data), &c)
			ev := event{Raw: data}
			if c.Error != nil {
				ev.Error = c.Error.Message
			}
			if len(c.Choices) > 0 {
				ev.Text = c.Choices[0].Text
			}
			ch <- ev
		}
	}()
	return ch, func() { resp.Body.Close() }
}

// collect drains a stream: its text, whether it ended with [DONE], its error.
func collect(ch <-chan event) (text string, done bool, errMsg string) {
	var b strings.Builder
	for ev := range ch {
		b.WriteString(ev.Text)
		done = done || ev.Done
		if ev.Error != "" {
			errMsg = ev.Error
		}
	}
	return b.String(), done, errMsg
}

// 32 concurrent streamed requests through a 3-stage split all complete,
// each with the text of the same request run alone.
func TestConcurrentStreams(t *testing.T) {
	m := stories(t)
	_, url := serveSplit(t, m, startStages(t, m, 3, 0), 10*time.Second)
	const n = 32
	body := func(i int) string {
		return fmt.Sprintf(`{"model":"stories260K","prompt":"Once upon a time, %d","max_tokens":%d,"temperature":0.8,"seed":%d,"stream":true,"stop":["\n\n"]}`, i, 20+i, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	solo := make([]string, n)
	for i := range n {
		ch, _ := stream(t, ctx, url, body(i))
		text, done, e := collect(ch)
		if !done || e != "" {
			t.Fatalf("solo %d: done %v error %q", i, done, e)
		}
		solo[i] = text
	}
	var wg sync.WaitGroup
	got := make([]string, n)
	ok := make([]bool, n)
	t0 := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, _ := stream(t, ctx, url, body(i))
			text, done, e := collect(ch)
			got[i], ok[i] = text, done && e == ""
		}()
	}
	wg.Wait()
	t.Logf("32 concurrent streams through 3 stages in %v", time.Since(t0))
	for i := range n {
		if !ok[i] || got[i] != solo[i] {
			t.Errorf("request %d: complete %v\n got %q\nsolo %q", i, ok[i], got[i], solo[i])
		}
	}
}

// A client that disconnects mid-stream frees its KV caches on every stage
// within a second, as /metrics shows: while the stream runs each stage
// holds one session and its KV cache (blocks for the positions so far, at
// most a full-context cache), afterwards none.
func TestDisconnectFreesKV(t *testing.T) {
	m := stories(t)
	procs := startStages(t, m, 3, 2*time.Millisecond)
	_, url := serveSplit(t, m, procs, 10*time.Second)
	// One session's full-context KV cache on layers [first, last): keys and
	// values of kvDim float32s for every position, on every layer; a
	// session holds blocks for the positions it has computed.
	c := m.Weights.Config
	if c.HeadSize != 0 {
		t.Fatalf("stories260K has head size %d; this test derives it from dim / heads", c.HeadSize)
	}
	kvDim := c.Dim / c.NHeads * c.NKVHeads
	perSession := map[string]float64{}
	for i, p := range procs {
		layers := p.cfg.Model.W.Last - p.cfg.Model.W.First
		perSession[strconv.Itoa(i+1)] = float64(layers * c.SeqLen * kvDim * 2 * 4)
	}
	ch, closeBody := stream(t, context.Background(), url, `{"model":"stories260K","prompt":"Once upon a time","max_tokens":400,"stream":true}`)
	for range 5 {
		<-ch
	}
	waitMetrics(t, url, 1, perSession, 5*time.Second) // the poll shows the session held
	closeBody()
	t0 := time.Now()
	waitMetrics(t, url, 0, perSession, time.Second)
	t.Logf("/metrics showed every stage's session and KV cache freed %v after the client disconnected (KV per session by stage: %v bytes)", time.Since(t0), perSession)
}

// waitMetrics waits until /metrics shows want sessions on each of the 3
// stages, holding want x perSession[stage] bytes of KV cache.
func waitMetrics(t *testing.T, url string, want int, perSession map[string]float64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ss := scrape(t, url)
		sessions, kv := values(ss, "seam_stage_sessions", "stage"), values(ss, "seam_stage_kv_cache_bytes", "stage")
		ok := len(sessions) == 3 && len(kv) == 3
		for st, per := range perSession {
			held := kv[st] == 0
			if want > 0 {
				held = kv[st] > 0 && kv[st] <= float64(want)*per
			}
			ok = ok && sessions[st] == float64(want) && held
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stage sessions %v and KV bytes %v; want %d session(s) on each of 3 stages holding KV bytes in (0, %d x %v] (none for 0 sessions), within %v", sessions, kv, want, want, perSession, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Whole and split into 3 stages, the API gives the same tokens with the same
// log-probabilities, to the last bit (the f32 wire is exact).
func TestWholeEqualsSplit(t *testing.T) {
	m := stories(t)
	_, whole := serveWhole(t, m)
	_, split := serveSplit(t, m, startStages(t, m, 3, 0), 10*time.Second)
	body := `{"model":"stories260K","messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":50,"temperature":0.7,"seed":5,"logprobs":true,"top_logprobs":4}`
	_, a := httpPost(t, whole+"/v1/chat/completions", body)
	_, b := httpPost(t, split+"/v1/chat/completions", body)
	strip := regexp.MustCompile(`"(id|created)":("[^"]*"|\d+)`)
	a, b = strip.ReplaceAllString(a, ""), strip.ReplaceAllString(b, "")
	if a != b || !strings.Contains(a, `"top_logprobs":[{`) {
		t.Fatalf("whole and split differ:\nwhole %s\nsplit %s", a, b)
	}
}
