// Package generate turns a model into text: it drives a Session (the whole
// model, local or spread over pipeline stages) through prefill and decode,
// samples, and streams the decoded text; and it scores text teacher-forced.
package generate

import (
	"context"
	"fmt"

	"github.com/seamlm/seam/model"
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

// Local is a Session over a model held in this process.
type Local struct {
	m     *model.Model
	state *model.State
	x     []float32
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

// Forward implements Session. All tokens go through the layers as one batch
// (bit-identical to feeding them one by one).
func (l *Local) Forward(ctx context.Context, tokens []int, pos int, all bool) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := l.m.Config()
	n := len(tokens)
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
