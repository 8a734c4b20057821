package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/scheduler"
	"github.com/seamlm/seam/tokenizer"
)

// fakeTok: ids 0..2 control (unk, BOS, EOS), then one id per byte value
// 'a'..'z' and space: Encode spells text letter by letter.
type fakeTok struct{}

const fakeVocab = 3 + 27

func (fakeTok) Encode(text string, bos, eos bool) []int {
	var ids []int
	if bos {
		ids = append(ids, 1)
	}
	for _, c := range text {
		switch {
		case c >= 'a' && c <= 'z':
			ids = append(ids, 3+int(c-'a'))
		default:
			ids = append(ids, 29)
		}
	}
	return ids
}
func (fakeTok) Decode(prev, id int) string {
	switch {
	case id < 3 || id >= fakeVocab:
		return ""
	case id == 29:
		return " "
	}
	return string(rune('a' + id - 3))
}
func (fakeTok) Piece(id int) string { return fakeTok{}.Decode(0, id) }
func (t fakeTok) EncodeWith(text string, opt tokenizer.EncodeOptions) []int {
	return t.Encode(text, opt.BOS, opt.EOS)
}
func (t fakeTok) DecodeAll(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(t.Decode(0, id))
	}
	return b.String()
}
func (fakeTok) AddBOS() bool      { return true }
func (fakeTok) IsEOG(id int) bool { return id == 2 }
func (fakeTok) BOS() int          { return 1 }
func (fakeTok) EOS() int          { return 2 }
func (fakeTok) VocabSize() int    { return fakeVocab }

// fakeEngine's sessions always make "ab" next (a, b, a, b, ...), and wait
// on gate (when not nil) before every step.
type fakeEngine struct {
	gate chan struct{}
}

func (e *fakeEngine) NewSession(context.Context) (generate.Session, error) { return &fakeSess{e}, nil }
func (e *fakeEngine) Ready(context.Context) error                          { return nil }
func (e *fakeEngine) Topology() scheduler.Topology                         { return scheduler.Topology{} }
func (e *fakeEngine) Refresh(context.Context)                              {}

type fakeSess struct{ e *fakeEngine }

func (s *fakeSess) Forward(ctx context.Context, tokens []int, pos int, all bool) ([][]float32, error) {
	if s.e.gate != nil {
		select {
		case <-s.e.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l := make([]float32, fakeVocab)
	l[3+(pos+len(tokens))%2] = 10 // 'a' or 'b'
	return [][]float32{l}, nil
}
func (s *fakeSess) Close() error { return nil }

func fakeServer(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Engine == nil {
		cfg.Engine = &fakeEngine{}
	}
	cfg.Tokenizer, cfg.ModelName = fakeTok{}, "fake"
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ContextLen == 0 {
		cfg.ContextLen = 64
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs
}

func post(t testing.TB, url, path, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, sb.String()
}
