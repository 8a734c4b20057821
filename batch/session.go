package batch

import (
	"context"
	"fmt"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
)

// Session is one conversation over a batcher whose model holds every layer;
// it implements generate.Session and generate.ArgmaxSession. One goroutine
// uses it at a time.
type Session struct {
	b      *Batcher
	st     *model.State
	x      []float32
	logits []float32 // ForwardArgmax's, reused: its logits do not leave the session
}

// NewSession opens a session whose KV cache takes its blocks from pool
// (nil: unbounded).
func (b *Batcher) NewSession(pool *model.KVPool) (*Session, error) {
	w := b.cfg.Model.W
	if !w.HasEmbedding() || !w.HasHead() {
		return nil, fmt.Errorf("a batched session needs the whole model; this part holds layers [%d, %d) of %d", w.First, w.Last, w.Config.NLayers)
	}
	st, err := b.cfg.Model.NewStateIn(0, w.Config.NLayers, pool)
	if err != nil {
		return nil, err
	}
	return &Session{b: b, st: st}, nil
}

// Forward implements generate.Session.
func (s *Session) Forward(ctx context.Context, tokens []int, pos int, all bool) ([][]float32, error) {
	c := s.b.cfg.Model.Config()
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("no tokens to forward")
	}
	heads := 1
	if all {
		heads = n
	}
	x, err := s.embed(tokens)
	if err != nil {
		return nil, err
	}
	logits := make([]float32, heads*c.VocabSize)
	if err := s.b.Run(ctx, s.st, x, pos, n, logits); err != nil {
		return nil, err
	}
	out := make([][]float32, heads)
	for i := range out {
		out[i] = logits[i*c.VocabSize : (i+1)*c.VocabSize]
	}
	return out, nil
}

// VocabSize implements generate.LogitsSession.
func (s *Session) VocabSize() int { return s.b.cfg.Model.Config().VocabSize }

// ForwardInto implements generate.LogitsSession: Forward's last logits,
// written into logits (VocabSize values).
func (s *Session) ForwardInto(ctx context.Context, tokens []int, pos int, logits []float32) error {
	if len(tokens) == 0 {
		return fmt.Errorf("no tokens to forward")
	}
	if v := s.VocabSize(); len(logits) != v {
		return fmt.Errorf("a logits buffer of %d values for a vocabulary of %d", len(logits), v)
	}
	x, err := s.embed(tokens)
	if err != nil {
		return err
	}
	return s.b.Run(ctx, s.st, x, pos, len(tokens), logits)
}

// ForwardArgmax implements generate.ArgmaxSession.
//
// Unlike Forward it keeps one logits buffer for the session's life: a
// fresh one per token (a vocabulary of floats, 125 KiB for 32000) cost a
// 16-stream decode 4 % of its time in the copy into new pages alone.
func (s *Session) ForwardArgmax(ctx context.Context, tokens []int, pos int) (int, error) {
	if v := s.VocabSize(); len(s.logits) != v {
		s.logits = make([]float32, v)
	}
	if err := s.ForwardInto(ctx, tokens, pos, s.logits); err != nil {
		return 0, err
	}
	return sample.Argmax(s.logits), nil
}

func (s *Session) embed(tokens []int) ([]float32, error) {
	d := s.b.cfg.Model.Config().Dim
	if cap(s.x) < len(tokens)*d {
		s.x = make([]float32, len(tokens)*d)
	}
	x := s.x[:len(tokens)*d]
	for i, t := range tokens {
		if err := s.b.cfg.Model.Embed(t, x[i*d:(i+1)*d]); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// Reserve takes the KV blocks of positions [0, positions) now (see
// model.State.Reserve).
func (s *Session) Reserve(positions int) error { return s.st.Reserve(positions) }

// KVBytes is the KV cache the session holds.
func (s *Session) KVBytes() int64 { return s.st.KVBytes() }

// Close implements generate.Session: the KV blocks go back to the pool.
func (s *Session) Close() error {
	s.st.Release()
	return nil
}
