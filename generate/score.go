package generate

import (
	"context"
	"fmt"
	"math"

	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/tokenizer"
)

// Score is the result of teacher-forced scoring.
type Score struct {
	Tokens     int     `json:"tokens"`    // BOS (when the vocabulary adds one) + encoded text
	Predicted  int     `json:"predicted"` // positions scored (Tokens - 1)
	MeanNLL    float64 `json:"mean_nll"`  // nats per predicted token
	Perplexity float64 `json:"perplexity"`
	// PerToken has one entry per position when asked for (ScoreOptions).
	PerToken []TokenScore `json:"per_token,omitempty"`
}

// TokenScore describes one position of a scored text, so that a run can be
// compared position by position with another engine's.
type TokenScore struct {
	ID     int `json:"id"`     // the token at this position (BOS included)
	Argmax int `json:"argmax"` // the most likely next token after it
	// LogProb is the log-probability (nats) of the actual next token; nil
	// (JSON null) at the last position, which has no next token.
	LogProb *float64 `json:"logprob"`
}

// ScoreOptions selects what ScoreTokens reports.
type ScoreOptions struct {
	PerToken bool // fill Score.PerToken
}

// ScoreText encodes text (with BOS first when the vocabulary's rule,
// tok.AddBOS, says so) and scores it with ScoreTokens.
func ScoreText(ctx context.Context, s Session, tok tokenizer.Tokenizer, contextLen int, text string) (Score, error) {
	return ScoreTextWith(ctx, s, tok, contextLen, text, ScoreOptions{})
}

// ScoreTextWith is ScoreText with options.
func ScoreTextWith(ctx context.Context, s Session, tok tokenizer.Tokenizer, contextLen int, text string, opt ScoreOptions) (Score, error) {
	return ScoreTokens(ctx, s, tok.Encode(text, tok.AddBOS(), false), contextLen, opt)
}

// ScoreTokens feeds ids teacher-forced and measures how well each next
// token was predicted. With opt.PerToken the last position is fed too, so
// that its argmax (the model's continuation) is reported.
func ScoreTokens(ctx context.Context, s Session, ids []int, contextLen int, opt ScoreOptions) (Score, error) {
	if len(ids) < 2 {
		return Score{}, fmt.Errorf("text encodes to %d token(s) (BOS included when the vocabulary adds one): nothing to predict", len(ids))
	}
	if len(ids) > contextLen {
		return Score{}, fmt.Errorf("text is %d tokens (BOS included when the vocabulary adds one), longer than the context of %d", len(ids), contextLen)
	}
	fed := ids[:len(ids)-1]
	if opt.PerToken {
		fed = ids
	}
	logits, err := s.Forward(ctx, fed, 0, true)
	if err != nil {
		return Score{}, err
	}
	if len(logits) != len(fed) {
		return Score{}, fmt.Errorf("model returned logits for %d positions, %d were fed", len(logits), len(fed))
	}
	n := len(ids) - 1
	var sum float64
	for i := range n {
		sum += NLL(logits[i], ids[i+1])
	}
	mean := sum / float64(n)
	sc := Score{Tokens: len(ids), Predicted: n, MeanNLL: mean, Perplexity: math.Exp(mean)}
	if opt.PerToken {
		sc.PerToken = make([]TokenScore, len(ids))
		for i, l := range logits {
			sc.PerToken[i] = TokenScore{ID: ids[i], Argmax: sample.Argmax(l)}
			if i < n {
				lp := -NLL(l, ids[i+1])
				sc.PerToken[i].LogProb = &lp
			}
		}
	}
	return sc, nil
}

// NLL is -log softmax(logits)[target], computed in float64.
func NLL(logits []float32, target int) float64 {
	return LogSumExp(logits) - float64(logits[target])
}

// KL is KL(softmax(p) || softmax(q)) in nats, computed in float64: how far
// the distribution q (a split or compressed run) is from p (the whole model).
func KL(p, q []float32) float64 {
	lp, lq := LogSumExp(p), LogSumExp(q)
	var kl float64
	for i := range p {
		a, b := float64(p[i])-lp, float64(q[i])-lq
		kl += math.Exp(a) * (a - b)
	}
	return kl
}

// LogSumExp is log(sum(exp(x))), shifted by the maximum for stability.
func LogSumExp(x []float32) float64 {
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
