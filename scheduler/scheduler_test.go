package scheduler

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/seamlm/seam/generate"
)

// fakeTok is a tiny vocabulary: ids 0..2 are control, the rest are pieces.
type fakeTok []string

func (f fakeTok) Decode(prev, id int) string {
	if id < 3 {
		return ""
	}
	return f[id]
}
func (fakeTok) BOS() int          { return 1 }
func (fakeTok) IsEOG(id int) bool { return id == 2 }

var vocab = fakeTok{"<unk>", "<s>", "</s>", "Hello", " world", "!", "\xe2", "\x82", "\xac"}

// scripted is an engine whose sessions make token script[k] the most likely
// k-th generated token (logit 5; every other id i has logit i/10).
type scripted struct {
	script []int
	fed    [][2]int // (position, count) of every Forward
}

func (s *scripted) NewSession(context.Context) (generate.Session, error) { return &scriptSess{s}, nil }
func (s *scripted) Ready(context.Context) error                          { return nil }
func (s *scripted) Topology() Topology                                   { return Topology{} }
func (s *scripted) Refresh(context.Context)                              {}

type scriptSess struct{ e *scripted }

func scriptLogits(want int) []float32 {
	l := make([]float32, len(vocab))
	for i := range l {
		l[i] = float32(i) / 10
	}
	l[want] = 5
	return l
}

func (s *scriptSess) Forward(_ context.Context, tokens []int, pos int, all bool) ([][]float32, error) {
	s.e.fed = append(s.e.fed, [2]int{pos, len(tokens)})
	k := pos + len(tokens) - 3 // prompts in these tests are 3 tokens
	if k >= len(s.e.script) {
		return nil, errors.New("script exhausted")
	}
	return [][]float32{scriptLogits(s.e.script[k])}, nil
}
func (s *scriptSess) Close() error { return nil }

func newScripted(t *testing.T, script ...int) (*Scheduler, *scripted) {
	t.Helper()
	e := &scripted{script: script}
	s, err := New(Config{Engine: e, Tokenizer: vocab, ContextLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

var prompt3 = []int{1, 3, 4}

func TestFinishReasons(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []int
		req    Request
		text   string
		reason string
		tokens int
	}{
		{"eos", []int{3, 4, 5, 2}, Request{MaxTokens: 10}, "Hello world!", FinishStop, 3},
		{"max tokens", []int{3, 4, 5, 2}, Request{MaxTokens: 2}, "Hello world", FinishLength, 2},
		{"stop string", []int{3, 4, 5, 2}, Request{MaxTokens: 10, Stop: []string{"o w"}}, "Hell", FinishStop, 2},
		{"bos ends too", []int{3, 1, 5}, Request{MaxTokens: 10}, "Hello", FinishStop, 1},
		{"split character", []int{6, 7, 8, 2}, Request{MaxTokens: 10}, "€", FinishStop, 3},
		{"length fills the context", []int{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, Request{MaxTokens: 13}, strings.Repeat("Hello", 13), FinishLength, 13},
	} {
		s, e := newScripted(t, tc.script...)
		tc.req.Prompt, tc.req.TopP = prompt3, 1
		var streamed strings.Builder
		res, err := s.Run(context.Background(), tc.req, func(c Chunk) error { streamed.WriteString(c.Text); return nil })
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.Text != tc.text || res.FinishReason != tc.reason || res.CompletionTokens != tc.tokens || res.PromptTokens != 3 {
			t.Errorf("%s: %q %s %d tokens (prompt %d), want %q %s %d", tc.name, res.Text, res.FinishReason, res.CompletionTokens, res.PromptTokens, tc.text, tc.reason, tc.tokens)
		}
		if streamed.String() != res.Text {
			t.Errorf("%s: streamed %q, result %q", tc.name, streamed.String(), res.Text)
		}
		// The prompt is one prefill at 0, then one token per position.
		if e.fed[0] != [2]int{0, 3} || (len(e.fed) > 1 && e.fed[1] != [2]int{3, 1}) {
			t.Errorf("%s: fed %v", tc.name, e.fed)
		}
	}
}

func TestLogprobs(t *testing.T) {
	s, _ := newScripted(t, 3, 4, 2)
	res, err := s.Run(context.Background(), Request{Prompt: prompt3, MaxTokens: 5, TopP: 1, Logprobs: true, TopLogprobs: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) != 2 {
		t.Fatalf("%d tokens with logprobs, want 2", len(res.Tokens))
	}
	// Oracle: the softmax of {5, i/10 for the 8 other ids}, written out.
	for k, want := range []int{3, 4} {
		sum := math.Exp(5)
		for i := range len(vocab) {
			if i != want {
				sum += math.Exp(float64(float32(i) / 10))
			}
		}
		tok := res.Tokens[k]
		if tok.ID != want || math.Abs(tok.Logprob-(5-math.Log(sum))) > 1e-12 {
			t.Errorf("token %d: id %d logprob %v, want id %d logprob %v", k, tok.ID, tok.Logprob, want, 5-math.Log(sum))
		}
		// the runner-up is the highest id other than the chosen one
		second := 8
		if want == 8 {
			second = 7
		}
		if len(tok.Top) != 2 || tok.Top[0].ID != want || tok.Top[1].ID != second || tok.Top[0].Logprob != tok.Logprob {
			t.Errorf("token %d: top %+v", k, tok.Top)
		}
	}
}

func TestRefusals(t *testing.T) {
	s, _ := newScripted(t, 3)
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{MaxTokens: 1, TopP: 1}, "prompt is empty"},
		{Request{Prompt: prompt3, MaxTokens: 0, TopP: 1}, "max tokens 0"},
		{Request{Prompt: prompt3, MaxTokens: 14, TopP: 1}, "3 prompt tokens + 14 to generate exceed the context of 16"},
		{Request{Prompt: prompt3, MaxTokens: 1, TopP: 1, Stop: []string{""}}, "empty stop"},
		{Request{Prompt: prompt3, MaxTokens: 1, TopP: 1, TopLogprobs: 21}, "top logprobs 21"},
		{Request{Prompt: prompt3, MaxTokens: 1, TopP: 0}, "top-p 0"},
		{Request{Prompt: prompt3, MaxTokens: 1, TopP: 1, Temperature: -1}, "temperature -1"},
	} {
		if _, err := s.Run(context.Background(), tc.req, nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
}

func TestEmitErrorAborts(t *testing.T) {
	s, _ := newScripted(t, 3, 4, 5, 2)
	boom := errors.New("client gone")
	res, err := s.Run(context.Background(), Request{Prompt: prompt3, MaxTokens: 10, TopP: 1}, func(Chunk) error { return boom })
	if !errors.Is(err, boom) || res.FinishReason != "" {
		t.Fatalf("err %v, finish %q: an aborted generation must not look finished", err, res.FinishReason)
	}
}
