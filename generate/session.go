// Package generate turns a model into text: it drives a Session (the whole
// model, local or spread over pipeline stages) through prefill and decode,
// samples, and streams the decoded text; and it scores text teacher-forced.
package generate

import (
	"context"
	"fmt"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
)

// Session runs the whole model for one conversation, keeping its KV cache.
type Session interface {
	// Forward feeds tokens at positions pos, pos+1, ... and returns the logits
	// after each token when all is true, or only after the last one. Positions
	// before pos must have been fed already; pos may rewind.
	Forward(ctx context.Context, tokens []int, pos int, all bool) ([][]float32, error)
	// Close releases the session's resources (on every stage).
	Close() error
}

// ArgmaxSession is a Session that can return the most likely next token
// instead of the logits (a split model's last stage then sends 4 bytes
// instead of the whole vocabulary). Generate uses it for greedy decoding.
type ArgmaxSession interface {
	Session
	ForwardArgmax(ctx context.Context, tokens []int, pos int) (int, error)
}

// LogitsSession is a Session that writes the logits after the last token
// it is fed into the caller's buffer (VocabSize values), so that a caller
// sampling token after token reuses one buffer instead of receiving a new
// vocabulary of floats each time.
type LogitsSession interface {
	Session
	VocabSize() int
	ForwardInto(ctx context.Context, tokens []int, pos int, logits []float32) error
}

// Local is a Session over a model held in this process.
type Local struct {
	m      *model.Model
	state  *model.State
	x      []float32
	logits []float32 // ForwardArgmax's, reused
}

// NewLocal starts a session on a model that holds every layer.
func NewLocal(m *model.Model) (*Local, error) {
	w := m.W
	if !w.HasEmbedding() || !w.HasHead() {
		return nil, fmt.Errorf("a local session needs the whole model; this part holds layers [%d, %d) of %d", w.First, w.Last, w.Config.NLayers)
	}
	s, err := m.NewState(0, w.Config.NLayers)
	if err != nil {
		return nil, err
	}
	return &Local{m: m, state: s, x: make([]float32, w.Config.Dim)}, nil
}

// layers runs tokens through every layer at positions pos, ... and
// returns their hidden states.
func (l *Local) layers(ctx context.Context, tokens []int, pos int) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := l.m.Config()
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("no tokens to forward")
	}
	if cap(l.x) < n*cfg.Dim {
		l.x = make([]float32, n*cfg.Dim)
	}
	x := l.x[:n*cfg.Dim]
	for i, tok := range tokens {
		if err := l.m.Embed(tok, x[i*cfg.Dim:(i+1)*cfg.Dim]); err != nil {
			return nil, err
		}
	}
	if err := l.m.LayersBatch(l.state, x, pos, n); err != nil {
		return nil, err
	}
	return x, nil
}

// VocabSize implements LogitsSession.
func (l *Local) VocabSize() int { return l.m.Config().VocabSize }

// ForwardInto implements LogitsSession: Forward's last logits, written
// into logits.
func (l *Local) ForwardInto(ctx context.Context, tokens []int, pos int, logits []float32) error {
	cfg := l.m.Config()
	if len(logits) != cfg.VocabSize {
		return fmt.Errorf("a logits buffer of %d values for a vocabulary of %d", len(logits), cfg.VocabSize)
	}
	x, err := l.layers(ctx, tokens, pos)
	if err != nil {
		return err
	}
	return l.m.Head(x[(len(tokens)-1)*cfg.Dim:], logits)
}

// ForwardArgmax implements ArgmaxSession: Forward's last logits, argmax
// taken, in a buffer kept for the session rather than a fresh one per
// token.
func (l *Local) ForwardArgmax(ctx context.Context, tokens []int, pos int) (int, error) {
	if len(l.logits) != l.VocabSize() {
		l.logits = make([]float32, l.VocabSize())
	}
	if err := l.ForwardInto(ctx, tokens, pos, l.logits); err != nil {
		return 0, err
	}
	return sample.Argmax(l.logits), nil
}

// Forward implements Session. All tokens go through the layers as one batch
// (bit-identical to feeding them one by one).
func (l *Local) Forward(ctx context.Context, tokens []int, pos int, all bool) ([][]float32, error) {
	x, err := l.layers(ctx, tokens, pos)
	if err != nil {
		return nil, err
	}
	cfg := l.m.Config()
	n := len(tokens)
	first := n - 1
	if all {
		first = 0
	}
	var out [][]float32
	for i := first; i < n; i++ {
		logits := make([]float32, cfg.VocabSize)
		if err := l.m.Head(x[i*cfg.Dim:(i+1)*cfg.Dim], logits); err != nil {
			return nil, err
		}
		out = append(out, logits)
	}
	return out, nil
}

// Close implements Session.
func (l *Local) Close() error { return nil }
