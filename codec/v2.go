package codec

import (
	"fmt"
	"math"
	"slices"

	"github.com/seamlm/seam/codec/entropy"
	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/tensor"
)

// Version 2 (docs/codec.md §11) changes three things against version 1:
//
//   - the projections run through the kernels' float order (docs/kernels.md
//     §2), so that all the tokens of a frame are projected as one matrix
//     product (kernels.MatMul) with the same bits as one at a time;
//   - a codec may be fitted for the model's output: it then stores the
//     sensitivity its bits were allocated with;
//   - a codec may entropy-code its coefficients (schemeEntropy): a uniform
//     midtread quantizer per component, its cell indices coded with a static
//     arithmetic coder (package entropy) against per-component tables stored
//     in the file, all the tokens of a frame in one stream;
//   - or trellis-code them (schemeTrellis, trellis.go): the cells chosen by
//     a search over a state machine, entropy-coded the same way with two
//     tables per component.
const (
	schemeFixed   = 0 // bits per component, midrise quantizer, packed bits
	schemeEntropy = 1 // step per component, midtread quantizer, entropy-coded
	schemeTrellis = 2 // step per component, trellis-coded quantizer, entropy-coded
)

// EntropyPrecision is the precision of the entropy tables of a fitted codec:
// probabilities are multiples of 2^-15, so a cell never seen in calibration
// still costs at most 15 bits.
const EntropyPrecision = 15

// MaxCells bounds a component's alphabet: indices -MaxIndex..MaxIndex.
const (
	MaxIndex = (entropy.MaxSymbols - 1) / 2
	MaxCells = 2*MaxIndex + 1
)

// buildTensors views the kept components as a k x d f32 tensor (encoding)
// and their transpose as a d x k one (decoding), for the kernels. The
// components do not change once a codec is built, so a second call (the fit
// builds them before its clips, derive again) keeps the first views.
func (c *Codec) buildTensors() {
	if c.version < 2 || c.k == 0 || c.encW != nil {
		return
	}
	c.compsT = make([]float32, c.d*c.k)
	for i := 0; i < c.k; i++ {
		for j := 0; j < c.d; j++ {
			c.compsT[j*c.k+i] = c.comps[i*c.d+j]
		}
	}
	c.encW = &tensor.Tensor{Name: "codec components", Type: tensor.F32, Rows: c.k, Cols: c.d, Data: tensor.BytesOfF32(c.comps)}
	c.decW = &tensor.Tensor{Name: "codec components transposed", Type: tensor.F32, Rows: c.d, Cols: c.k, Data: tensor.BytesOfF32(c.compsT)}
}

// projectBatch writes the coefficients of n tokens (version 2): y[t*k+i] =
// kernels' dot of component i with x[t] - mean.
func (c *Codec) projectBatch(y, xc, xs []float32, n int) {
	for t := 0; t < n; t++ {
		center(xc[t*c.d:(t+1)*c.d], xs[t*c.d:(t+1)*c.d], c.mean)
	}
	if c.k > 0 {
		kernels.MatMul(y[:n*c.k], c.encW, xc[:n*c.d], n)
	}
}

// reconstructBatch writes n tokens from their levels v (n x k), version 2:
// out[t*d+j] = (dot of row j of the transpose with v[t]) + mean[j].
func (c *Codec) reconstructBatch(out, v []float32, n int) {
	if c.k > 0 {
		kernels.MatMul(out[:n*c.d], c.decW, v[:n*c.k], n)
	} else {
		clear(out[:n*c.d])
	}
	for t := 0; t < n; t++ {
		row := out[t*c.d : (t+1)*c.d]
		for j, m := range c.mean {
			row[j] += m
		}
	}
}

// ecQuant is one component's midtread quantizer: cell q = round(y / step),
// clamped to [-qmax, qmax], reconstructed at q * step.
type ecQuant struct {
	step    float32
	invStep float32 // 1/step, rounded once in float32
	qmax    int
}

func newECQuant(step float32, qmax int) ecQuant {
	return ecQuant{step: step, invStep: 1 / step, qmax: qmax}
}

// index is the cell of y: the nearest multiple of step (halves away from
// zero), clamped; NaN goes to 0.
func (q *ecQuant) index(y float32) int {
	t := float32(y * q.invStep)
	switch {
	case !(t == t):
		return 0
	case t >= float32(q.qmax):
		return q.qmax
	case t <= -float32(q.qmax):
		return -q.qmax
	}
	return int(math.Round(float64(t)))
}

func (q *ecQuant) value(j int) float32 { return float32(float32(j) * q.step) }

// Variable says whether the codec's payload length depends on the values
// (an entropy-coded codec); PayloadBytes is then the most one token can take.
func (c *Codec) Variable() bool { return c.scheme != schemeFixed }

// Trellis says whether the codec is trellis-coded (docs/codec.md §11.7).
func (c *Codec) Trellis() bool { return c.scheme == schemeTrellis }

// classQuants are the trellis quantizers and tables of class cl (0 without
// token classes).
func (c *Codec) classQuants(cl int) ([]tcQuant, []*entropy.Table) {
	return c.tc[cl*c.k : (cl+1)*c.k], c.tables[2*cl*c.k : 2*(cl+1)*c.k]
}

// Version is the codec file's format version, 1 or 2.
func (c *Codec) Version() int { return c.version }

// Steps returns a copy of an entropy-coded codec's quantizer steps (nil for
// a codec with fixed bits).
func (c *Codec) Steps() []float32 {
	out := make([]float32, c.k)
	switch c.scheme {
	case schemeEntropy:
		for i := range out {
			out[i] = c.ec[i].step
		}
	case schemeTrellis:
		copy(out, c.steps)
	default:
		return nil
	}
	return out
}

// ClassMultipliers returns a copy of the step multipliers of a codec with
// token classes (docs/codec.md §11.8), one per class; nil without them.
func (c *Codec) ClassMultipliers() []float32 {
	if c.cls == nil {
		return nil
	}
	return append([]float32(nil), c.cls.mults...)
}

// symbolsPerToken is how many symbols an entropy-coded token takes: one a
// component, and its class first when the codec has token classes.
func (c *Codec) symbolsPerToken() int {
	if c.cls != nil {
		return c.k + 1
	}
	return c.k
}

// MeanPayloadBytes is the mean payload of one token: PayloadBytes for fixed
// bits, and for an entropy-coded codec the mean size of one-token streams
// over the held-out rows (the fit rows if none), as measured by the fit.
func (c *Codec) MeanPayloadBytes() float64 {
	if c.scheme != schemeFixed {
		return c.stats.MeanBytes
	}
	return float64(c.payloadBytes)
}

// scratch is what one batch encode or decode of version 2 needs.
type scratch struct {
	xc, y  []float32
	enc    entropy.Encoder
	dec    entropy.Decoder
	vit    viterbi // trellis search
	unions []uint8 // one token's unions and cells (trellis)
	cells  []int
}

func (s *scratch) grow(c *Codec, n int) {
	s.xc = grow32(s.xc, n*c.d)
	s.y = grow32(s.y, n*max(c.k, 1))
	if c.scheme == schemeTrellis && cap(s.cells) < c.k {
		s.unions, s.cells = make([]uint8, c.k), make([]int, c.k)
	}
}

func grow32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func (c *Codec) getScratch() *scratch {
	if s, ok := c.scr.Get().(*scratch); ok {
		return s
	}
	return &scratch{}
}

// AppendTokens appends the payload of the len(xs)/d tokens in xs: for fixed
// bits their payloads back to back, for an entropy-coded codec one stream.
// Non-finite inputs are not refused here (see Wire). It is safe for
// concurrent use.
func (c *Codec) AppendTokens(dst []byte, xs []float32) ([]byte, error) {
	if len(xs)%c.d != 0 || len(xs) == 0 {
		return dst, fmt.Errorf("codec: encode: %d values are not a positive whole number of width-%d tokens", len(xs), c.d)
	}
	n := len(xs) / c.d
	start := len(dst)
	if c.version < 2 {
		dst = slices.Grow(dst, n*c.payloadBytes)[:start+n*c.payloadBytes]
		e, _ := c.pool.Get().(*Encoder)
		if e == nil {
			e = c.NewEncoder()
		}
		err := e.EncodeBatch(dst[start:], xs)
		c.pool.Put(e)
		if err != nil {
			return dst[:start], err
		}
		return dst, nil
	}
	s := c.getScratch()
	defer c.scr.Put(s)
	s.grow(c, n)
	c.projectBatch(s.y, s.xc, xs, n)
	if c.scheme == schemeFixed {
		p := c.payloadBytes
		dst = slices.Grow(dst, n*p)[:start+n*p]
		for t := 0; t < n; t++ {
			c.pack(dst[start+t*p:start+(t+1)*p], s.y[t*c.k:(t+1)*c.k], 0, 0) // version 2 has no gain
		}
		return dst, nil
	}
	s.enc.Reset()
	for t := 0; t < n; t++ {
		y := s.y[t*c.k : (t+1)*c.k]
		if c.scheme == schemeTrellis {
			cl := 0
			if c.cls != nil {
				cl = c.cls.classOf(y)
				s.enc.Encode(c.cls.table, cl)
			}
			qs, tables := c.classQuants(cl)
			unions, cells := s.unions[:c.k], s.cells[:c.k]
			codecTrellis.search(&s.vit, qs, y, unions, cells)
			encodeTrellis(&s.enc, tables, qs, unions, cells)
			continue
		}
		for i, v := range y {
			q := &c.ec[i]
			s.enc.Encode(c.tables[i], q.index(v)+q.qmax)
		}
	}
	out, err := s.enc.Finish(dst)
	if err != nil {
		return dst, fmt.Errorf("codec: encode: %w", err)
	}
	return out, nil
}

// DecodeTokens reconstructs len(dst)/d tokens from src, the payload
// AppendTokens wrote for them. It rejects a payload of the wrong length,
// nonzero padding bits and, for an entropy-coded codec, any stream the
// encoder would not have produced (so no two payloads decode to the same
// tokens). It is safe for concurrent use.
func (c *Codec) DecodeTokens(dst []float32, src []byte) error {
	if len(dst)%c.d != 0 || len(dst) == 0 {
		return fmt.Errorf("codec: decode: %d values are not a positive whole number of width-%d tokens", len(dst), c.d)
	}
	n := len(dst) / c.d
	if c.version < 2 {
		return c.decodeBatch1(dst, src)
	}
	s := c.getScratch()
	defer c.scr.Put(s)
	s.grow(c, n)
	v := s.y[:n*c.k]
	if c.scheme == schemeFixed {
		p := c.payloadBytes
		if len(src) != n*p {
			return fmt.Errorf("codec: decode: payload has %d bytes, %d tokens of %d bytes need %d", len(src), n, p, n*p)
		}
		for t := 0; t < n; t++ {
			if err := c.unpackFixed(v[t*c.k:(t+1)*c.k], src[t*p:(t+1)*p]); err != nil {
				return fmt.Errorf("token %d: %w", t, err)
			}
		}
	} else {
		if max := c.maxStream(n); len(src) > max {
			return fmt.Errorf("codec: decode: stream of %d bytes for %d tokens; codec %08x writes at most %d", len(src), n, c.ShortID(), max)
		}
		s.dec.Reset(src)
		for t := 0; t < n; t++ {
			if c.scheme == schemeTrellis {
				cl := 0
				if c.cls != nil {
					cl = s.dec.Decode(c.cls.table)
				}
				qs, tables := c.classQuants(cl)
				codecTrellis.decode(&s.dec, tables, qs, v[t*c.k:(t+1)*c.k])
				continue
			}
			for i := 0; i < c.k; i++ {
				q := &c.ec[i]
				v[t*c.k+i] = q.value(s.dec.Decode(c.tables[i]) - q.qmax)
			}
		}
		if err := s.dec.Finish(); err != nil {
			return fmt.Errorf("codec: decode: %d tokens: %w", n, err)
		}
	}
	c.reconstructBatch(dst, v, n)
	return nil
}

// unpackFixed reads one token's levels.
func (c *Codec) unpackFixed(v []float32, src []byte) error {
	r := bitReader{src: src}
	for i := range v {
		v[i] = c.q[i].value(int(r.read(uint(c.bits[i]))))
	}
	if r.acc != 0 {
		return fmt.Errorf("codec: decode: padding bits of the last payload byte are %#x, want 0", r.acc)
	}
	return nil
}

// maxStream is MaxPayload for an entropy-coded codec, 0 when it overflows.
func (c *Codec) maxStream(n int) int {
	m, err := c.MaxPayload(n)
	if err != nil {
		return 0
	}
	return m
}

// MaxPayload is the most bytes the payload of n tokens can take: exactly
// n x PayloadBytes for fixed bits. It fails when the size overflows.
func (c *Codec) MaxPayload(n int) (int, error) {
	if c.scheme == schemeFixed {
		return tensor.MulSize(n, c.payloadBytes)
	}
	syms, err := tensor.MulSize(n, c.symbolsPerToken())
	if err != nil {
		return 0, err
	}
	return entropy.MaxBytes(syms, EntropyPrecision)
}
