package bench

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"net"
	"strings"
	"testing"

	"github.com/seamlm/seam/api"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/scheduler"
	"github.com/seamlm/seam/synth"
)

// seam bench api's driver on stories260K: two rounds of 8 greedy tokens,
// the first discarded; both sides generate the 8 tokens, each side's one
// measured run has a speed and a CPU time, and the log says what it did.
func TestAPIOverhead(t *testing.T) {
	m, err := loader.Open(testmodels.Path(t, testmodels.Stories260K), loader.Options{TokenizerPath: testmodels.Path(t, testmodels.Tok512)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var log bytes.Buffer
	res, err := APIOverhead(context.Background(), m, APIOptions{Prompt: "Once upon a time", Tokens: 8, Rounds: 2, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v\n%s", res, log.String())
	finite := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
	if res.Tokens != 8 || len(res.Run) != 1 || len(res.API) != 1 || len(res.RunCPU) != 1 || len(res.APICPU) != 1 {
		t.Fatalf("result %+v: want 8 tokens and one measured run a side", res)
	}
	for what, x := range map[string]float64{"run tok/s": res.Run[0], "api tok/s": res.API[0], "run CPU": res.RunCPU[0], "api CPU": res.APICPU[0],
		"ratio": res.Ratio(), "CPU ratio": res.CPURatio()} {
		if !finite(x) {
			t.Errorf("%s = %v, want a positive finite number", what, x)
		}
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 4 || strings.Count(log.String(), "(warm-up, discarded)") != 2 || strings.Count(log.String(), " 8 tokens") != 4 ||
		!strings.HasPrefix(lines[0], "round 1 run") || !strings.HasPrefix(lines[2], "round 2 api") {
		t.Errorf("log:\n%s\nwant round 1 run then api (discarded), round 2 api then run, 8 tokens each", log.String())
	}
}

// instant is an engine whose forward pass costs nothing: it returns logits
// over a 32000-word vocabulary that make the next token cycle through ids,
// so a benchmark through it measures everything but the model (sampling,
// decoding, stop detection, JSON, SSE, HTTP, the client's parsing).
type instant struct{ logits [][]float32 }

func (e *instant) NewSession(context.Context) (generate.Session, error) { return &instantSess{e}, nil }
func (e *instant) Ready(context.Context) error                          { return nil }
func (e *instant) Topology() scheduler.Topology                         { return scheduler.Topology{} }
func (e *instant) Refresh(context.Context)                              {}

type instantSess struct{ e *instant }

func (s *instantSess) Forward(_ context.Context, tokens []int, pos int, _ bool) ([][]float32, error) {
	l := s.e.logits[0]
	clear(l)
	l[300+(pos*7)%31000] = 1
	return s.e.logits, nil
}
func (s *instantSess) Close() error { return nil }

// BenchmarkAPITokenOverhead streams greedy completions of 256 tokens through
// the API with a model that costs nothing, and reports the time per token:
// the API's overhead per token on top of the model's (seam run pays the
// sampling part of it too).
func BenchmarkAPITokenOverhead(b *testing.B) {
	tok, err := synth.Tokenizer(32000)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := api.New(api.Config{Engine: &instant{logits: [][]float32{make([]float32, 32000)}}, Tokenizer: tok, ContextLen: 4096,
		ModelName: "bench", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	url := "http://" + ln.Addr().String()
	opts := APIOptions{Prompt: "Once upon a time", Tokens: 256}
	b.ResetTimer()
	tokens := 0
	for b.Loop() {
		_, n, err := apiSide(context.Background(), url, opts)
		if err != nil {
			b.Fatal(err)
		}
		tokens += n
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(tokens), "ns/token")
}
