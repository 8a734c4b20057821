package eval

import (
	"errors"
	"fmt"
	"math"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/wire"
)

// Result is what one activation encoding costs at a boundary, teacher-forced,
// against the whole model.
type Result struct {
	// Wire names the encoding: f32, f16, q8, q5, q4, lowrank, ...
	Wire string `json:"wire"`
	// Rank is the number of principal components a learned codec sends; the
	// width for plain encodings, which send every value.
	Rank int `json:"rank"`
	// BytesPerToken is the activation payload one token takes on the wire.
	// It does not count the 52-byte frame header (one per frame: per token
	// when decoding, per prompt when prefilling).
	BytesPerToken float64 `json:"bytes_per_token"`
	// PrefillBytesPerToken is, for an encoding whose payload size depends on
	// the values (entropy-coded), the mean payload per token when each
	// sequence is one frame (a prefill); BytesPerToken is then the mean of
	// one-token frames (decode steps), measured on the same positions.
	PrefillBytesPerToken float64 `json:"prefill_bytes_per_token,omitempty"`
	// EncodeUS and DecodeUS are the encoding's compute per token, in µs, one
	// token per frame (a decode step); PrefillEncodeUS and PrefillDecodeUS
	// with a whole sequence per frame (a prefill). MeasureCost fills them
	// (Compare does not: held-out KL searches call it many times); UpperUS
	// and LowerUS are what the stages' own compute per token costs beside
	// them.
	EncodeUS        float64 `json:"encode_us"`
	DecodeUS        float64 `json:"decode_us"`
	PrefillEncodeUS float64 `json:"prefill_encode_us"`
	PrefillDecodeUS float64 `json:"prefill_decode_us"`
	// UpperUS and LowerUS repeat the Report's, so that each JSON result
	// carries what its costs compare with.
	UpperUS float64 `json:"upper_us"`
	LowerUS float64 `json:"lower_us"`
	// Perplexity is exp of the mean negative log-likelihood of the next token
	// with the model split at the boundary and activations passed through
	// the encoding.
	Perplexity float64 `json:"perplexity"`
	// PPLDeltaPct is 100 * (Perplexity - whole) / whole: the perplexity
	// change in percent against the whole model.
	PPLDeltaPct float64 `json:"ppl_delta_pct"`
	// KL is the mean over positions of KL(p_whole || p_split), in nats.
	KL float64 `json:"kl"`
	// Top1 is the fraction of positions whose most likely next token (first
	// maximum of the logits) is the whole model's.
	Top1 float64 `json:"top1"`
}

// Report is a comparison of encodings at one boundary.
type Report struct {
	Boundary int
	// Positions is the number of positions scored: every token of every
	// sequence that has a next token (all but the last of each).
	Positions int
	// Perplexity is the whole model's on the same positions.
	Perplexity float64
	Results    []Result // one per encoding, in the order given
	// UpperUS and LowerUS are the compute per token, in µs, of one decode
	// step through layers [0, boundary) and through layers [boundary, n)
	// plus the head: what each side of the boundary spends on its own,
	// beside which an encoding's EncodeUS and DecodeUS are paid.
	UpperUS float64 `json:"upper_us"`
	LowerUS float64 `json:"lower_us"`
}

// Ranked is implemented by encodings that send fewer components than the
// width, such as *codec.Wire.
type Ranked interface{ Rank() int }

// Compare splits the model at boundary and measures, teacher-forced, what
// each encoding does to the next-token distributions. For every sequence it
// runs the whole model for the reference logits; runs layers [0, boundary);
// then for each encoding encodes every position's hidden state to bytes and
// decodes it back exactly as a pipeline stage and its successor would
// (all encodings are per token, so one frame per sequence gives the bytes a
// prefill or a run of decode steps would), runs layers [boundary, n_layers)
// and the head on the result, and compares with the reference. Each pass
// over a sequence runs as one batch (model.LayersBatch, bit-identical to
// token by token).
//
// f32 passes activations unchanged, so its results are exactly the whole
// model's: KL 0, delta 0, top-1 1 (the parity rule; the forward pass by
// layer range is bit-identical to the whole).
//
// The model must hold every layer. Sequences of one token score nothing.
// Memory: one sequence's reference logits (length x vocab float32) per
// goroutine.
func Compare(m *model.Model, seqs [][]int, boundary int, encs []wire.Encoding, progress Progress) (*Report, error) {
	if err := checkBoundary(m, boundary); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	if err := checkSeqs(m, seqs); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	if len(encs) == 0 {
		return nil, errors.New("compare: no encodings to compare")
	}
	cfg := m.Config()
	rep := &Report{Boundary: boundary, Results: make([]Result, len(encs))}
	for i, e := range encs {
		size, err := e.PayloadSize(1, cfg.Dim)
		if err != nil {
			return nil, fmt.Errorf("compare: encoding %s at width %d: %w", e.Name(), cfg.Dim, err)
		}
		rank := cfg.Dim
		if r, ok := e.(Ranked); ok {
			rank = r.Rank()
		}
		rep.Results[i] = Result{Wire: e.Name(), Rank: rank, BytesPerToken: float64(size)}
		if wire.IsVariable(e) {
			rep.Results[i].BytesPerToken = 0 // measured below
		}
	}
	sums := make([]seqSums, len(seqs))
	err := forEach(len(seqs), progress,
		func() (*comparer, error) { return newComparer(m, boundary, encs) },
		func(c *comparer, i int) error {
			s, err := c.run(seqs[i])
			if err != nil {
				return fmt.Errorf("sequence %d: %w", i, err)
			}
			sums[i] = s
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("compare at boundary %d: %w", boundary, err)
	}
	// Sum in sequence order, so the result does not depend on scheduling.
	total := seqSums{nll: make([]float64, len(encs)), kl: make([]float64, len(encs)), top1: make([]int, len(encs)),
		tokenBytes: make([]int, len(encs)), frameBytes: make([]int, len(encs))}
	for _, s := range sums {
		total.positions += s.positions
		total.refNLL += s.refNLL
		for e := range encs {
			total.nll[e] += s.nll[e]
			total.kl[e] += s.kl[e]
			total.top1[e] += s.top1[e]
			total.tokenBytes[e] += s.tokenBytes[e]
			total.frameBytes[e] += s.frameBytes[e]
		}
	}
	if total.positions == 0 {
		return nil, errors.New("compare: no position to score (every sequence needs at least two tokens)")
	}
	np := float64(total.positions)
	rep.Positions = total.positions
	rep.Perplexity = math.Exp(total.refNLL / np)
	for e := range encs {
		r := &rep.Results[e]
		r.Perplexity = math.Exp(total.nll[e] / np)
		r.PPLDeltaPct = 100 * (r.Perplexity - rep.Perplexity) / rep.Perplexity
		r.KL = total.kl[e] / np
		r.Top1 = float64(total.top1[e]) / np
		if wire.IsVariable(encs[e]) {
			r.BytesPerToken = float64(total.tokenBytes[e]) / np
			r.PrefillBytesPerToken = float64(total.frameBytes[e]) / np
		}
	}
	return rep, nil
}

// seqSums are one sequence's sums over its positions.
type seqSums struct {
	positions int
	refNLL    float64
	nll, kl   []float64 // per encoding
	top1      []int
	// tokenBytes and frameBytes are a variable encoding's payload bytes,
	// one token per frame and one sequence per frame.
	tokenBytes, frameBytes []int
}

// comparer holds one goroutine's KV caches and buffers.
type comparer struct {
	m          *model.Model
	encs       []wire.Encoding
	whole      *model.State
	upper      *model.State // layers [0, boundary)
	lower      *model.State // layers [boundary, n)
	ref        []float32    // positions x vocab: the whole model's logits
	refLogZ    []float64    // positions: log-sum-exp of ref rows
	wholeX     []float32    // positions x dim: the whole model's states
	hidden     []float32    // positions x dim: states entering the boundary
	decoded    []float32    // positions x dim: after the encoding
	payload    []byte
	logits     []float32
	dim, vocab int
}

func newComparer(m *model.Model, boundary int, encs []wire.Encoding) (*comparer, error) {
	cfg := m.Config()
	c := &comparer{m: m, encs: encs, dim: cfg.Dim, vocab: cfg.VocabSize, logits: make([]float32, cfg.VocabSize)}
	var err error
	if c.whole, err = m.NewState(0, cfg.NLayers); err != nil {
		return nil, fmt.Errorf("the model must hold every layer: %w", err)
	}
	if c.upper, err = m.NewState(0, boundary); err != nil {
		return nil, err
	}
	if c.lower, err = m.NewState(boundary, cfg.NLayers); err != nil {
		return nil, err
	}
	return c, nil
}

// grow returns s resized to n, reusing its storage when it has room.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// run scores one sequence: positions 0..len-2, each predicting the next token.
func (c *comparer) run(seq []int) (seqSums, error) {
	ne := len(c.encs)
	s := seqSums{nll: make([]float64, ne), kl: make([]float64, ne), top1: make([]int, ne), tokenBytes: make([]int, ne), frameBytes: make([]int, ne)}
	P := len(seq) - 1
	if P < 1 {
		return s, nil
	}
	s.positions = P
	if err := c.reference(seq[:P]); err != nil {
		return s, err
	}
	for p := range P {
		s.refNLL += c.refLogZ[p] - float64(c.ref[p*c.vocab+seq[p+1]])
	}
	c.decoded = grow(c.decoded, P*c.dim)
	for e, enc := range c.encs {
		size, err := enc.PayloadSize(P, c.dim)
		if err != nil {
			return s, fmt.Errorf("%s: %w", enc.Name(), err)
		}
		if ve, ok := enc.(wire.VariableEncoding); ok {
			// One token per frame for the decode steps' size, then the
			// sequence as one frame (a prefill), whose reconstruction is
			// scored: both are the same values, token by token.
			for p := range P {
				if c.payload, err = ve.AppendEncode(c.payload[:0], c.hidden[p*c.dim:(p+1)*c.dim], 1, c.dim); err != nil {
					return s, fmt.Errorf("%s encode: %w", enc.Name(), err)
				}
				s.tokenBytes[e] += len(c.payload)
			}
			if c.payload, err = ve.AppendEncode(c.payload[:0], c.hidden, P, c.dim); err != nil {
				return s, fmt.Errorf("%s encode: %w", enc.Name(), err)
			}
			s.frameBytes[e] += len(c.payload)
		} else {
			c.payload = grow(c.payload, size)
			if err := enc.Encode(c.payload, c.hidden, P, c.dim); err != nil {
				return s, fmt.Errorf("%s encode: %w", enc.Name(), err)
			}
		}
		if err := enc.Decode(c.decoded, c.payload, P, c.dim); err != nil {
			return s, fmt.Errorf("%s decode: %w", enc.Name(), err)
		}
		c.lower.Reset()
		if err := c.m.LayersBatch(c.lower, c.decoded, 0, P); err != nil {
			return s, fmt.Errorf("%s: %w", enc.Name(), err)
		}
		for p := range P {
			x := c.decoded[p*c.dim : (p+1)*c.dim]
			if err := c.m.Head(x, c.logits); err != nil {
				return s, fmt.Errorf("%s: position %d: %w", enc.Name(), p, err)
			}
			ref := c.ref[p*c.vocab : (p+1)*c.vocab]
			logZ := logSumExp(c.logits)
			s.nll[e] += logZ - float64(c.logits[seq[p+1]])
			s.kl[e] += kl(ref, c.refLogZ[p], c.logits, logZ)
			if sample.Argmax(c.logits) == sample.Argmax(ref) {
				s.top1[e]++
			}
		}
	}
	return s, nil
}

// reference runs the whole model over toks for the reference logits, and
// layers [0, boundary) for the hidden states that cross the boundary, each
// as one batch.
func (c *comparer) reference(toks []int) error {
	P := len(toks)
	c.ref = grow(c.ref, P*c.vocab)
	c.refLogZ = grow(c.refLogZ, P)
	c.hidden = grow(c.hidden, P*c.dim)
	c.wholeX = grow(c.wholeX, P*c.dim)
	c.whole.Reset()
	c.upper.Reset()
	if err := embedAll(c.m, toks, c.hidden); err != nil {
		return err
	}
	copy(c.wholeX, c.hidden)
	if err := c.m.LayersBatch(c.whole, c.wholeX, 0, P); err != nil {
		return fmt.Errorf("whole model: %w", err)
	}
	for p := range P {
		ref := c.ref[p*c.vocab : (p+1)*c.vocab]
		if err := c.m.Head(c.wholeX[p*c.dim:(p+1)*c.dim], ref); err != nil {
			return fmt.Errorf("whole model: position %d: %w", p, err)
		}
		c.refLogZ[p] = logSumExp(ref)
	}
	return c.m.LayersBatch(c.upper, c.hidden, 0, P)
}

// logSumExp is log(sum exp(x)) in float64, shifted by the maximum.
func logSumExp(x []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(sum)
}

// kl is KL(p || q) = sum_i p_i (log p_i - log q_i) for p = softmax(a) and
// q = softmax(b), given their log-sum-exps. When a and b are equal bit for
// bit (and so are their log-sum-exps) every term is exactly 0.
func kl(a []float32, logZa float64, b []float32, logZb float64) float64 {
	var sum float64
	for i, v := range a {
		lp := float64(v) - logZa
		lq := float64(b[i]) - logZb
		sum += math.Exp(lp) * (lp - lq)
	}
	return sum
}
