package generate

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

// Values worked by hand: softmax(0, ln 3) = (1/4, 3/4).
func TestNLLAndKL(t *testing.T) {
	l := []float32{0, float32(math.Log(3))}
	if got, want := NLL(l, 0), math.Log(4); math.Abs(got-want) > 1e-6 {
		t.Errorf("NLL = %v, want ln 4 = %v", got, want)
	}
	if got := KL(l, l); got != 0 {
		t.Errorf("KL(p, p) = %v, want 0", got)
	}
	// KL((1/4,3/4) || (1/2,1/2)) = 1/4 ln(1/2) + 3/4 ln(3/2).
	want := 0.25*math.Log(0.5) + 0.75*math.Log(1.5)
	if got := KL(l, []float32{5, 5}); math.Abs(got-want) > 1e-6 {
		t.Errorf("KL = %v, want %v", got, want)
	}
}

// fixedSession returns, for the token fed at each position, logits[token]:
// a model whose prediction depends only on the current token.
type fixedSession struct {
	logits map[int][]float32
	fed    []int
}

func (f *fixedSession) Forward(_ context.Context, tokens []int, pos int, all bool) ([][]float32, error) {
	f.fed = append(f.fed[:pos], tokens...)
	var out [][]float32
	for _, t := range tokens {
		out = append(out, f.logits[t])
	}
	if !all {
		out = out[len(out)-1:]
	}
	return out, nil
}

func (f *fixedSession) Close() error { return nil }

// Values worked by hand. After token 0 the next-token distribution is
// softmax(0, ln 3, 0) = (1/5, 3/5, 1/5); after 1 it is softmax(ln 2, 0, 0)
// = (1/2, 1/4, 1/4); after 2 it is (1/3, 1/3, 1/3), argmax 0 (first of ties).
func TestScorePerToken(t *testing.T) {
	s := &fixedSession{logits: map[int][]float32{
		0: {0, float32(math.Log(3)), 0},
		1: {float32(math.Log(2)), 0, 0},
		2: {5, 5, 5},
	}}
	ids := []int{0, 1, 0, 2, 1}
	sc, err := ScoreTokens(context.Background(), s, ids, 10, ScoreOptions{PerToken: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		argmax  int
		logprob float64
	}{
		{1, math.Log(3.0 / 5)}, // 0 -> 1
		{0, math.Log(1.0 / 2)}, // 1 -> 0
		{1, math.Log(1.0 / 5)}, // 0 -> 2
		{0, math.Log(1.0 / 3)}, // 2 -> 1
		{0, math.NaN()},        // 1 -> (end)
	}
	if len(sc.PerToken) != len(ids) || sc.Tokens != 5 || sc.Predicted != 4 {
		t.Fatalf("score %+v", sc)
	}
	if !slices.Equal(s.fed, ids) {
		t.Errorf("fed %v, want every token including the last, %v", s.fed, ids)
	}
	var sum float64
	for i, w := range want {
		got := sc.PerToken[i]
		if got.ID != ids[i] || got.Argmax != w.argmax {
			t.Errorf("position %d: id %d argmax %d, want %d, %d", i, got.ID, got.Argmax, ids[i], w.argmax)
		}
		if i == len(ids)-1 {
			if got.LogProb != nil {
				t.Errorf("last position: logprob %v, want null", *got.LogProb)
			}
			continue
		}
		if got.LogProb == nil || math.Abs(*got.LogProb-w.logprob) > 1e-6 {
			t.Errorf("position %d: logprob %v, want %v", i, got.LogProb, w.logprob)
		} else {
			sum -= *got.LogProb
		}
	}
	if math.Abs(sc.MeanNLL-sum/4) > 1e-12 {
		t.Errorf("mean NLL %v, the per-token log-probabilities give %v", sc.MeanNLL, sum/4)
	}
	b, _ := json.Marshal(sc.PerToken[3:])
	if !strings.HasPrefix(string(b), `[{"id":2,"argmax":0,"logprob":-1.09861228866810`) ||
		!strings.HasSuffix(string(b), `},{"id":1,"argmax":0,"logprob":null}]`) {
		t.Errorf("JSON %s, want ids, argmax and logprob -ln 3, then null", b)
	}

	// Without the option the last token is not fed and nothing per token is reported.
	sc2, err := ScoreTokens(context.Background(), s, ids, 10, ScoreOptions{})
	if err != nil || sc2.PerToken != nil || sc2.MeanNLL != sc.MeanNLL || !slices.Equal(s.fed, ids[:4]) {
		t.Errorf("without per-token: %+v, %v, fed %v", sc2, err, s.fed)
	}
	if _, err := ScoreTokens(context.Background(), s, ids, 4, ScoreOptions{}); err == nil {
		t.Error("5 tokens in a context of 4 accepted")
	}
	if _, err := ScoreTokens(context.Background(), s, ids[:1], 4, ScoreOptions{}); err == nil {
		t.Error("one token accepted: nothing to predict")
	}
}
