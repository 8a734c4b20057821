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
	// Norm weights and biases viewed as f32 once, not per token; per layer,
	// nil when the layer is not held or the config has no such tensor.
	attnNorm, ffnNorm [][]float32
	bq, bk, bv        [][]float32
	qNorm, kNorm      [][]float32
	finalNorm         []float32
}

// New prepares a model for the forward pass. The weights must be valid.
func New(w *Weights) (*Model, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	n := w.Config.NLayers
	m := &Model{W: w, attnNorm: make([][]float32, n), ffnNorm: make([][]float32, n),
		bq: make([][]float32, n), bk: make([][]float32, n), bv: make([][]float32, n),
		qNorm: make([][]float32, n), kNorm: make([][]float32, n)}
	c := &w.Config
	for l := w.First; l < w.Last; l++ {
		L := &w.Layers[l]
		m.attnNorm[l] = tensor.AsF32(L.AttnNorm.Data)
		m.ffnNorm[l] = tensor.AsF32(L.FFNNorm.Data)
		if c.QKVBias {
			m.bq[l], m.bk[l], m.bv[l] = tensor.AsF32(L.Bq.Data), tensor.AsF32(L.Bk.Data), tensor.AsF32(L.Bv.Data)
		}
		if c.QKNorm {
			m.qNorm[l], m.kNorm[l] = tensor.AsF32(L.QNorm.Data), tensor.AsF32(L.KNorm.Data)
		}
	}
	if w.HasHead() {
		m.finalNorm = tensor.AsF32(w.FinalNorm.Data)
	}
	var factors []float32
	if c.RopeFreqs {
		factors = tensor.AsF32(w.Layers[w.First].RopeFreqs.Data)
	}
	m.ropeCos, m.ropeSin = RopeTable(c, factors)
	return m, nil
}

// Config returns the model configuration.
func (m *Model) Config() *Config { return &m.W.Config }

// State is one session's KV cache for a layer range, plus scratch buffers
// sized for the largest batch run so far.
type State struct {
	First, Last int
	next        int         // positions [0, next) are cached
	keys, vals  [][]float32 // per held layer: SeqLen x KVDim
	xb, xb2     []float32   // batch x Dim
	q, ao       []float32   // batch x QDim: queries, attention output
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
	s.xb, s.xb2 = make([]float32, n*c.Dim), make([]float32, n*c.Dim)
	s.q, s.ao = make([]float32, n*c.QDim()), make([]float32, n*c.QDim())
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
	d, qDim, kvDim := c.Dim, c.QDim(), c.KVDim()
	keys := s.keys[l-s.First][pos*kvDim : (pos+n)*kvDim]
	vals := s.vals[l-s.First][pos*kvDim : (pos+n)*kvDim]
	xb, xb2, q, ao := s.xb[:n*d], s.xb2[:n*d], s.q[:n*qDim], s.ao[:n*qDim]
	hb, hb2 := s.hb[:n*c.HiddenDim], s.hb2[:n*c.HiddenDim]

	for t := range n {
		kernels.RMSNorm(xb[t*d:(t+1)*d], x[t*d:(t+1)*d], m.attnNorm[l], c.NormEps)
	}
	// One parallel region for the three projections of the same input.
	kernels.MatMuls([]kernels.Product{{Out: q, W: &w.Wq}, {Out: keys, W: &w.Wk}, {Out: vals, W: &w.Wv}}, xb, n)
	if c.QKVBias {
		addBias(q, m.bq[l])
		addBias(keys, m.bk[l])
		addBias(vals, m.bv[l])
	}
	if c.QKNorm {
		m.normHeads(q, m.qNorm[l])
		m.normHeads(keys, m.kNorm[l])
	}
	for t := range n {
		m.rope(q[t*qDim:(t+1)*qDim], pos+t)
		m.rope(keys[t*kvDim:(t+1)*kvDim], pos+t)
	}
	m.attentionBatch(s, l, q, ao, pos, n)
	kernels.MatMul(xb2, &w.Wo, ao, n)
	kernels.Axpy(x, 1, xb2)

	for t := range n {
		kernels.RMSNorm(xb[t*d:(t+1)*d], x[t*d:(t+1)*d], m.ffnNorm[l], c.NormEps)
	}
	kernels.MatMuls([]kernels.Product{{Out: hb, W: &w.W1}, {Out: hb2, W: &w.W3}}, xb, n)
	kernels.SwiGLU(hb, hb2)
	kernels.MatMul(xb2, &w.W2, hb, n)
	kernels.Axpy(x, 1, xb2)
}

// addBias adds bias to every row of v (rows of len(bias) values, one per token).
func addBias(v, bias []float32) {
	for t := 0; t+len(bias) <= len(v); t += len(bias) {
		kernels.Axpy(v[t:t+len(bias)], 1, bias)
	}
}

// normHeads RMS-normalises every head of v (all tokens' heads side by side,
// head_dim values each) in place, with one weight vector shared by all heads
// (Qwen 3's q_norm and k_norm).
func (m *Model) normHeads(v, weight []float32) {
	hd := len(weight)
	for h := 0; h+hd <= len(v); h += hd {
		kernels.RMSNorm(v[h:h+hd], v[h:h+hd], weight, m.W.Config.NormEps)
	}
}

// attentionBatch computes attention for the n tokens at positions pos ..
// pos+n-1 (queries q, n x QDim) into out, every (token, head) pair a separate
// item spread over the kernels' threads. Causal: token t attends to
// positions up to pos+t, all cached by now. Each head's arithmetic is the
// same whichever thread runs it, so the result does not depend on the
// thread count.
func (m *Model) attentionBatch(s *State, l int, q, out []float32, pos, n int) {
	c := &m.W.Config
	qDim, heads := c.QDim(), c.NHeads
	span := pos + n // the most positions one item attends to
	workers := kernels.Threads()
	if len(s.att) < workers*span {
		s.att = make([]float32, workers*span)
	}
	kernels.Parallel(n*heads, workers, func(worker, i int) {
		t, h := i/heads, i%heads
		att := s.att[worker*span : (worker+1)*span]
		m.attendHead(s, l, h, q[t*qDim:(t+1)*qDim], out[t*qDim:(t+1)*qDim], pos+t, att)
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
