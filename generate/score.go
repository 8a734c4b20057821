package generate

import (
	"context"
	"fmt"
	"math"

	"github.com/seamlm/seam/tokenizer"
)

// Score is the result of teacher-forced scoring.
type Score struct {
	Tokens     int     `json:"tokens"`    // BOS + encoded text
	Predicted  int     `json:"predicted"` // positions scored (Tokens - 1)
	MeanNLL    float64 `json:"mean_nll"`  // nats per predicted token
	Perplexity float64 `json:"perplexity"`
}

// ScoreText feeds BOS + text and measures how well each next token was predicted.
func ScoreText(ctx context.Context, s Session, tok tokenizer.Tokenizer, contextLen int, text string) (Score, error) {
	ids := tok.Encode(text, true, false)
	if len(ids) < 2 {
		return Score{}, fmt.Errorf("text encodes to no tokens after BOS: nothing to score")
	}
	if len(ids) > contextLen {
		return Score{}, fmt.Errorf("text is %d tokens (with BOS), longer than the context of %d", len(ids), contextLen)
	}
	logits, err := s.Forward(ctx, ids[:len(ids)-1], 0, true)
	if err != nil {
		return Score{}, err
	}
	var sum float64
	for i, l := range logits {
		sum += NLL(l, ids[i+1])
	}
	n := len(ids) - 1
	mean := sum / float64(n)
	return Score{Tokens: len(ids), Predicted: n, MeanNLL: mean, Perplexity: math.Exp(mean)}, nil
}

// NLL is -log softmax(logits)[target], computed in float64.
func NLL(logits []float32, target int) float64 {
	return logSumExp(logits) - float64(logits[target])
}

// KL is KL(softmax(p) || softmax(q)) in nats, computed in float64: how far
// the distribution q (a split or compressed run) is from p (the whole model).
func KL(p, q []float32) float64 {
	lp, lq := logSumExp(p), logSumExp(q)
	var kl float64
	for i := range p {
		a, b := float64(p[i])-lp, float64(q[i])-lq
		kl += math.Exp(a) * (a - b)
	}
	return kl
}

// logSumExp is log(sum(exp(x))), shifted by the maximum for stability.
func logSumExp(x []float32) float64 {
	maxv := math.Inf(-1)
	for _, v := range x {
		maxv = math.Max(maxv, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - maxv)
	}
	return math.Log(sum) + maxv
}
