package bench

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/seamlm/seam/api"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/scheduler"
	"github.com/seamlm/seam/synth"
)

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
