package model

import (
	"fmt"
	"math"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/tensor"
)

// Model runs the forward pass over the weights it holds. It is safe for
// concurrent use by many sessions, each with its own State.
type Model struct {
	W *Weights
	// rope holds cos/sin per (position, rotated pair), computed once in
	// float64 and rounded, so every stage computes identical rotations.
	ropeCos, ropeSin []float32
	// Norm weights viewed as f32 once, not per token.
	attnNorm, ffnNorm [][]float32
	finalNorm         []float32
}

// New prepares a model for the forward pass. The weights must be valid.
func New(w *Weights) (*Model, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	m := &Model{W: w, attnNorm: make([][]float32, w.Config.NLayers), ffnNorm: make([][]float32, w.Config.NLayers)}
	for l := w.First; l < w.Last; l++ {
		m.attnNorm[l] = tensor.AsF32(w.Layers[l].AttnNorm.Data)
		m.ffnNorm[l] = tensor.AsF32(w.Layers[l].FFNNorm.Data)
	}
	if w.HasHead() {
		m.finalNorm = tensor.AsF32(w.FinalNorm.Data)
	}
	m.buildRope()
	return m, nil
}

func (m *Model) buildRope() {
	c := &m.W.Config
	pairs := c.RopeDim / 2
	m.ropeCos = make([]float32, c.SeqLen*pairs)
	m.ropeSin = make([]float32, c.SeqLen*pairs)
	for pos := 0; pos < c.SeqLen; pos++ {
		for i := 0; i < pairs; i++ {
			freq := 1.0 / math.Pow(float64(c.RopeTheta), float64(2*i)/float64(c.RopeDim))
			angle := float64(pos) * freq
			m.ropeCos[pos*pairs+i] = float32(math.Cos(angle))
			m.ropeSin[pos*pairs+i] = float32(math.Sin(angle))
		}
	}
}

// Config returns the model configuration.
func (m *Model) Config() *Config { return &m.W.Config }

// State is one session's KV cache for a layer range, plus scratch buffers.
type State struct {
	First, Last int
	next        int         // positions [0, next) are cached
	keys, vals  [][]float32 // per held layer: SeqLen x KVDim
	xb, xb2     []float32
	q           []float32
	hb, hb2     []float32
	att         []float32
}

// NewState allocates the KV cache of layers [first, last).
func (m *Model) NewState(first, last int) (*State, error) {
	c := &m.W.Config
	if first < m.W.First || last > m.W.Last || first >= last {
		return nil, fmt.Errorf("layer range [%d, %d) is not within the held layers [%d, %d)", first, last, m.W.First, m.W.Last)
	}
	s := &State{
		First: first, Last: last,
		xb: make([]float32, c.Dim), xb2: make([]float32, c.Dim), q: make([]float32, c.Dim),
		hb: make([]float32, c.HiddenDim), hb2: make([]float32, c.HiddenDim),
		att: make([]float32, c.SeqLen),
	}
	for l := first; l < last; l++ {
		s.keys = append(s.keys, make([]float32, c.SeqLen*c.KVDim()))
		s.vals = append(s.vals, make([]float32, c.SeqLen*c.KVDim()))
	}
	return s, nil
}

// Reset forgets every cached position.
func (s *State) Reset() { s.next = 0 }

// Next is the first position not yet cached: the position of the next token.
func (s *State) Next() int { return s.next }

// Embed writes the embedding of token into x (length Dim).
func (m *Model) Embed(token int, x []float32) error {
	if !m.W.HasEmbedding() {
		return fmt.Errorf("this model part holds layers [%d, %d) and no token embedding", m.W.First, m.W.Last)
	}
	if token < 0 || token >= m.W.Config.VocabSize {
		return fmt.Errorf("token id %d is outside the vocabulary of %d", token, m.W.Config.VocabSize)
	}
	kernels.DequantRow(x, &m.W.Embedding, token)
	return nil
}

// Layers runs the state's layers on the hidden state x of the token at
// position pos, in place, caching its keys and values.
func (m *Model) Layers(s *State, x []float32, pos int) error {
	c := &m.W.Config
	if pos < 0 || pos >= c.SeqLen {
		return fmt.Errorf("position %d is outside the context of %d", pos, c.SeqLen)
	}
	if len(x) != c.Dim {
		return fmt.Errorf("hidden state has width %d, model has %d", len(x), c.Dim)
	}
	// Attention reads positions [0, pos]: all of them must have been computed
	// in this session. Rewinding (pos < next) is allowed and drops the rest.
	if pos > s.next {
		return fmt.Errorf("position %d skips ahead: only positions [0, %d) are cached", pos, s.next)
	}
	for l := s.First; l < s.Last; l++ {
		m.layer(s, l, x, pos)
	}
	s.next = pos + 1
	return nil
}

func (m *Model) layer(s *State, l int, x []float32, pos int) {
	c := &m.W.Config
	w := &m.W.Layers[l]
	kvDim := c.KVDim()
	key := s.keys[l-s.First][pos*kvDim : (pos+1)*kvDim]
	val := s.vals[l-s.First][pos*kvDim : (pos+1)*kvDim]

	kernels.RMSNorm(s.xb, x, m.attnNorm[l], c.NormEps)
	kernels.MatVec(s.q, &w.Wq, s.xb)
	kernels.MatVec(key, &w.Wk, s.xb)
	kernels.MatVec(val, &w.Wv, s.xb)
	m.rope(s.q, pos)
	m.rope(key, pos)
	m.attention(s, l, pos)
	kernels.MatVec(s.xb2, &w.Wo, s.xb)
	kernels.Axpy(x, 1, s.xb2)

	kernels.RMSNorm(s.xb, x, m.ffnNorm[l], c.NormEps)
	kernels.MatVec(s.hb, &w.W1, s.xb)
	kernels.MatVec(s.hb2, &w.W3, s.xb)
	kernels.SwiGLU(s.hb, s.hb2)
	kernels.MatVec(s.xb2, &w.W2, s.hb)
	kernels.Axpy(x, 1, s.xb2)
}

// rope rotates adjacent pairs (v[2i], v[2i+1]) of each head, the pairing that
// llama2.c checkpoints and GGUF files both use.
func (m *Model) rope(v []float32, pos int) {
	c := &m.W.Config
	hd, pairs := c.HeadDim(), c.RopeDim/2
	cos := m.ropeCos[pos*pairs : (pos+1)*pairs]
	sin := m.ropeSin[pos*pairs : (pos+1)*pairs]
	for h := 0; h+hd <= len(v); h += hd {
		for i := 0; i < pairs; i++ {
			// The conversions round each product, which forbids the compiler
			// from fusing them into FMAs on some architectures: every stage
			// must compute the same bits.
			a, b := v[h+2*i], v[h+2*i+1]
			v[h+2*i] = float32(a*cos[i]) - float32(b*sin[i])
			v[h+2*i+1] = float32(a*sin[i]) + float32(b*cos[i])
		}
	}
}

// attention computes grouped-query attention of s.q over cached positions
// 0..pos of layer l, writing the heads' outputs into s.xb.
func (m *Model) attention(s *State, l, pos int) {
	c := &m.W.Config
	hd, kvDim := c.HeadDim(), c.KVDim()
	group := c.NHeads / c.NKVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	keys, vals := s.keys[l-s.First], s.vals[l-s.First]
	att := s.att[:pos+1]
	for h := 0; h < c.NHeads; h++ {
		q := s.q[h*hd : (h+1)*hd]
		kvOff := (h / group) * hd
		for t := 0; t <= pos; t++ {
			att[t] = kernels.Dot(q, keys[t*kvDim+kvOff:t*kvDim+kvOff+hd]) * scale
		}
		kernels.Softmax(att)
		out := s.xb[h*hd : (h+1)*hd]
		clear(out)
		for t := 0; t <= pos; t++ {
			kernels.Axpy(out, att[t], vals[t*kvDim+kvOff:t*kvDim+kvOff+hd])
		}
	}
}

// Head applies the final norm to x (in place) and writes the logits.
func (m *Model) Head(x []float32, logits []float32) error {
	if !m.W.HasHead() {
		return fmt.Errorf("this model part holds layers [%d, %d) of %d and no classifier", m.W.First, m.W.Last, m.W.Config.NLayers)
	}
	if len(logits) != m.W.Config.VocabSize {
		return fmt.Errorf("logits buffer has %d entries, vocabulary has %d", len(logits), m.W.Config.VocabSize)
	}
	kernels.RMSNorm(x, x, m.finalNorm, m.W.Config.NormEps)
	kernels.MatVec(logits, &m.W.Output, x)
	return nil
}
