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

// State is one session's KV cache for a layer range, plus scratch buffers
// sized for the largest batch run so far.
type State struct {
	First, Last int
	next        int         // positions [0, next) are cached
	keys, vals  [][]float32 // per held layer: SeqLen x KVDim
	xb, xb2, q  []float32   // batch x Dim
	hb, hb2     []float32   // batch x HiddenDim
	att         []float32   // attention scores: per worker, the positions of a batch
}

// NewState allocates the KV cache of layers [first, last).
func (m *Model) NewState(first, last int) (*State, error) {
	c := &m.W.Config
	if first < m.W.First || last > m.W.Last || first >= last {
		return nil, fmt.Errorf("layer range [%d, %d) is not within the held layers [%d, %d)", first, last, m.W.First, m.W.Last)
	}
	s := &State{First: first, Last: last}
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

func (s *State) ensureBatch(n int, c *Config) {
	if len(s.xb) >= n*c.Dim {
		return
	}
	s.xb, s.xb2, s.q = make([]float32, n*c.Dim), make([]float32, n*c.Dim), make([]float32, n*c.Dim)
	s.hb, s.hb2 = make([]float32, n*c.HiddenDim), make([]float32, n*c.HiddenDim)
}

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
	return m.LayersBatch(s, x, pos, 1)
}

// LayersBatch runs the state's layers on the hidden states of n consecutive
// tokens (x is n x Dim, updated in place) at positions pos .. pos+n-1. The
// result is bit-identical to n calls of Layers (which is this with n = 1);
// batching only lets each weight matrix be streamed once for all n tokens.
func (m *Model) LayersBatch(s *State, x []float32, pos, n int) error {
	c := &m.W.Config
	if n < 1 || pos < 0 || pos+n > c.SeqLen {
		return fmt.Errorf("positions [%d, %d) are outside the context of %d", pos, pos+n, c.SeqLen)
	}
	if len(x) != n*c.Dim {
		return fmt.Errorf("hidden states hold %d values, %d tokens of width %d need %d", len(x), n, c.Dim, n*c.Dim)
	}
	// Attention reads positions [0, pos]: all of them must have been computed
	// in this session. Rewinding (pos < next) is allowed and drops the rest.
	if pos > s.next {
		return fmt.Errorf("position %d skips ahead: only positions [0, %d) are cached", pos, s.next)
	}
	s.ensureBatch(n, c)
	for l := s.First; l < s.Last; l++ {
		m.layer(s, l, x, pos, n)
	}
	s.next = pos + n
	return nil
}

func (m *Model) layer(s *State, l int, x []float32, pos, n int) {
	c := &m.W.Config
	w := &m.W.Layers[l]
	d, kvDim := c.Dim, c.KVDim()
	keys := s.keys[l-s.First][pos*kvDim : (pos+n)*kvDim]
	vals := s.vals[l-s.First][pos*kvDim : (pos+n)*kvDim]
	xb, xb2, q := s.xb[:n*d], s.xb2[:n*d], s.q[:n*d]
	hb, hb2 := s.hb[:n*c.HiddenDim], s.hb2[:n*c.HiddenDim]

	for t := range n {
		kernels.RMSNorm(xb[t*d:(t+1)*d], x[t*d:(t+1)*d], m.attnNorm[l], c.NormEps)
	}
	// One parallel region for the three projections of the same input.
	kernels.MatMuls([]kernels.Product{{Out: q, W: &w.Wq}, {Out: keys, W: &w.Wk}, {Out: vals, W: &w.Wv}}, xb, n)
	for t := range n {
		m.rope(q[t*d:(t+1)*d], pos+t)
		m.rope(keys[t*kvDim:(t+1)*kvDim], pos+t)
	}
	m.attentionBatch(s, l, q, xb, pos, n)
	kernels.MatMul(xb2, &w.Wo, xb, n)
	kernels.Axpy(x, 1, xb2)

	for t := range n {
		kernels.RMSNorm(xb[t*d:(t+1)*d], x[t*d:(t+1)*d], m.ffnNorm[l], c.NormEps)
	}
	kernels.MatMuls([]kernels.Product{{Out: hb, W: &w.W1}, {Out: hb2, W: &w.W3}}, xb, n)
	kernels.SwiGLU(hb, hb2)
	kernels.MatMul(xb2, &w.W2, hb, n)
	kernels.Axpy(x, 1, xb2)
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

// attentionBatch computes attention for the n tokens at positions pos ..
// pos+n-1 (queries q, n x Dim) into out, every (token, head) pair a separate
// item spread over the kernels' threads. Causal: token t attends to
// positions up to pos+t, all cached by now. Each head's arithmetic is the
// same whichever thread runs it, so the result does not depend on the
// thread count.
func (m *Model) attentionBatch(s *State, l int, q, out []float32, pos, n int) {
	c := &m.W.Config
	d, heads := c.Dim, c.NHeads
	span := pos + n // the most positions one item attends to
	workers := kernels.Threads()
	if len(s.att) < workers*span {
		s.att = make([]float32, workers*span)
	}
	kernels.Parallel(n*heads, workers, func(worker, i int) {
		t, h := i/heads, i%heads
		att := s.att[worker*span : (worker+1)*span]
		m.attendHead(s, l, h, q[t*d:(t+1)*d], out[t*d:(t+1)*d], pos+t, att)
	})
}

// attendHead computes grouped-query attention of head h of query q (one
// token, all heads) over cached positions 0..pos of layer l, writing the
// head's output into its part of out. att is scratch of at least pos+1.
func (m *Model) attendHead(s *State, l, h int, q, out []float32, pos int, att []float32) {
	c := &m.W.Config
	hd, kvDim := c.HeadDim(), c.KVDim()
	group := c.NHeads / c.NKVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	keys, vals := s.keys[l-s.First], s.vals[l-s.First]
	att = att[:pos+1]
	qh := q[h*hd : (h+1)*hd]
	kvOff := (h / group) * hd
	// Scores: the dot products of qh with this head's keys at positions
	// 0..pos (rows kvDim apart), then the weighted sum of the values.
	kernels.DotRows(att, qh, keys[kvOff:], kvDim)
	for t := range att {
		att[t] *= scale
	}
	kernels.Softmax(att)
	oh := out[h*hd : (h+1)*hd]
	clear(oh)
	kernels.AxpyRows(oh, att, vals[kvOff:], kvDim)
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
