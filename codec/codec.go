// Package codec compresses the hidden states Seam sends between pipeline
// stages. A Codec is fitted per split boundary on captured activations: it
// rotates a hidden state (width d, float32) into the PCA basis of those
// activations, quantizes each principal component with the number of bits its
// variance earns under reverse water-filling, and sends nothing for the
// components that earn no bits. The file format and the payload layout are
// specified byte by byte in docs/codec.md.
//
// Everything a Codec computes is bit-reproducible: Fit gives byte-identical
// output for the same samples on any machine, and Encode gives the same
// payload for the same input everywhere. Float arithmetic that must not be
// contracted into fused multiply-adds (which Go may do on arm64, ppc64, s390x
// and amd64 with GOAMD64=v3) is written with explicit conversions such as
// float32(a*b), which the Go specification says round and so block fusion.
package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/seamlm/seam/codec/entropy"
	"github.com/seamlm/seam/tensor"
)

const (
	// MaxWidth bounds the hidden-state width a codec file may declare.
	MaxWidth = 65536
	// MaxBits is the most bits one component may get.
	MaxBits = 8
	// GainBits is the per-token overhead of the optional gain: one IEEE
	// binary16 value at the start of every payload.
	GainBits = 16
)

// Provenance records what a codec was fitted for. The caller supplies it; it
// is part of the file and so of the digest.
type Provenance struct {
	Model     [32]byte // identity digest of the model weights
	Boundary  uint32   // layers run before the hidden state is captured
	CalibData [32]byte // digest of the calibration data (token stream)
}

// Stats are the fit's measurements, stored in the file.
type Stats struct {
	FitSamples     uint64 // rows the mean, basis and clips were fitted on
	HoldoutSamples uint64 // rows held out for HeldoutMSE
	// HasMSE says HeldoutMSE and HeldoutVar were measured (HoldoutSamples > 0).
	HasMSE bool
	// HeldoutMSE is the mean over held-out rows and over the d elements of the
	// squared reconstruction error (x - Decode(Encode(x)))^2.
	HeldoutMSE float64
	// HeldoutVar is the same mean of (x - mean)^2: HeldoutMSE/HeldoutVar is
	// the fraction of the held-out variance the codec loses.
	HeldoutVar float64
	// HasKL says HeldoutKL was measured; the caller measures it with the model
	// and records it with SetHeldoutKL.
	HasKL     bool
	HeldoutKL float64 // mean KL(p_exact || p_codec) over held-out tokens, nats
	// MeanBytes is, for an entropy-coded codec (version 2), the mean size of
	// a one-token stream over the held-out rows (the fit rows when none were
	// held out); 0 otherwise.
	MeanBytes float64
}

// Codec is one fitted boundary codec. It is immutable except for the
// provenance setters, which must not run concurrently with anything else;
// every other method is safe for concurrent use.
type Codec struct {
	d, k    int
	gain    bool
	bits    []uint8   // k, each 1..MaxBits
	mean    []float32 // d
	comps   []float32 // k x d row-major, unit rows
	clips   []float32 // k, each > 0
	version int       // file format version, 1 or 2
	scheme  int       // schemeFixed, schemeEntropy or schemeTrellis (version 2)
	// ec and tables are an entropy-coded codec's quantizers and tables; a
	// trellis-coded one has its quantizers in tc and two tables per
	// component (union 0, union 1).
	ec     []ecQuant
	tc     []tcQuant
	tables []*entropy.Table
	// steps are a trellis-coded codec's base steps, and cls its token
	// classes (docs/codec.md §11.8), nil without them. With them tc holds
	// every class's k quantizers and tables every class's 2k tables, class
	// by class, each step the base step times the class's multiplier.
	steps []float32
	cls   *tokenClasses
	// compsT is comps transposed (d x k), and encW and decW the two as
	// tensors for the kernels (version 2).
	compsT     []float32
	encW, decW *tensor.Tensor
	scr        sync.Pool // *scratch for version 2 batches
	// weights are the components' sensitivities when the fit was for the
	// output (FitOptions.Sensitivity); nil for a fit for the activations.
	weights []float32

	// Per-component quantizer constants derived from bits and clips.
	q []quant

	payloadBytes int
	prov         Provenance
	stats        Stats
	digest       [32]byte

	pool sync.Pool // *Encoder scratch for (*Codec).Encode
}

// quant holds one component's uniform midrise quantizer: 2^b levels over
// [-clip, clip], cell j = [-clip + j*step, -clip + (j+1)*step), reconstructed
// at its centre.
type quant struct {
	levels   int     // 2^b
	half     float32 // 2^(b-1): index offset of the origin
	invStep  float32 // 2^(b-1)/clip, rounded once in float32
	halfStep float32 // clip * 2^-b, exact: half the cell width
}

func newQuant(b uint8, clip float32) quant {
	levels := 1 << b
	half := float32(levels / 2)
	return quant{
		levels:   levels,
		half:     half,
		invStep:  half / clip,
		halfStep: float32(math.Ldexp(float64(clip), -int(b))),
	}
}

// index maps a coefficient to its cell. NaN and values below the range go to
// cell 0, values above to the last cell, so any input encodes deterministically.
func (q *quant) index(y float32) int {
	t := float32(y*q.invStep) + q.half
	if !(t > 0) {
		return 0
	}
	if t >= float32(q.levels) {
		return q.levels - 1
	}
	return int(t)
}

// value is the reconstruction of cell j: (2j+1-2^b) * clip * 2^-b.
func (q *quant) value(j int) float32 {
	return float32(2*j+1-q.levels) * q.halfStep
}

// Params are the parts of a codec, for building one without Fit (tests,
// synthetic benchmarks, tools that convert other formats).
type Params struct {
	Mean       []float32 // d
	Components []float32 // k x d row-major; each row a unit vector
	Bits       []uint8   // k, each 1..MaxBits
	Clips      []float32 // k, each finite and > 0
	Gain       bool      // send a per-token gain (see docs/codec.md)
}

// New builds a codec from its parts after validating them as a codec file's
// reader would. The slices are copied.
func New(p Params) (*Codec, error) {
	d, k := len(p.Mean), len(p.Bits)
	if err := checkShape(d, k); err != nil {
		return nil, err
	}
	if len(p.Components) != k*d {
		return nil, fmt.Errorf("codec: components hold %d values, k=%d x d=%d needs %d", len(p.Components), k, d, k*d)
	}
	if len(p.Clips) != k {
		return nil, fmt.Errorf("codec: %d clips for k=%d components", len(p.Clips), k)
	}
	c := &Codec{
		d: d, k: k, gain: p.Gain, version: 1,
		bits:  append([]uint8(nil), p.Bits...),
		mean:  append([]float32(nil), p.Mean...),
		comps: append([]float32(nil), p.Components...),
		clips: append([]float32(nil), p.Clips...),
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.derive()
	c.seal()
	return c, nil
}

func checkShape(d, k int) error {
	if d < 1 || d > MaxWidth {
		return fmt.Errorf("codec: width d=%d outside [1, %d]", d, MaxWidth)
	}
	if k < 0 || k > d {
		return fmt.Errorf("codec: kept components k=%d outside [0, d=%d]", k, d)
	}
	if _, _, err := fileSize(d, k); err != nil {
		return fmt.Errorf("codec: d=%d k=%d: %w", d, k, err)
	}
	return nil
}

// validate checks every stored value: bit counts, finiteness, unit rows,
// positive clips. Errors name the field and index.
func (c *Codec) validate() error {
	for i, b := range c.bits {
		if b < 1 || b > MaxBits {
			return fmt.Errorf("codec: bits[%d]=%d outside [1, %d] (components with 0 bits are not stored)", i, b, MaxBits)
		}
	}
	if err := c.validateComponents(); err != nil {
		return err
	}
	for i, v := range c.clips {
		if !finite32(v) || !(v > 0) {
			return fmt.Errorf("codec: clips[%d]=%v is not finite and positive", i, v)
		}
	}
	return nil
}

// validateComponents checks the mean and the unit rows of the basis.
func (c *Codec) validateComponents() error {
	for j, v := range c.mean {
		if !finite32(v) {
			return fmt.Errorf("codec: mean[%d]=%v is not finite", j, v)
		}
	}
	for i := 0; i < c.k; i++ {
		row := c.comps[i*c.d : (i+1)*c.d]
		var n2 float64
		for j, v := range row {
			if !finite32(v) {
				return fmt.Errorf("codec: components[%d][%d]=%v is not finite", i, j, v)
			}
			n2 += float64(float64(v) * float64(v))
		}
		// A float32-rounded unit vector has |norm^2 - 1| <= 2^-23 plus the
		// float64 summation error; 1e-4 only rejects rows that are not unit.
		if math.Abs(n2-1) > 1e-4 {
			return fmt.Errorf("codec: components[%d] has squared norm %v, want 1", i, n2)
		}
	}
	return nil
}

// derive fills the quantizer constants and the payload size.
func (c *Codec) derive() {
	c.pool.New = func() any { return c.NewEncoder() }
	c.buildTensors()
	if c.scheme != schemeFixed {
		c.payloadBytes = c.maxStream(1)
		return
	}
	c.q = make([]quant, c.k)
	total := 0
	if c.gain {
		total = GainBits
	}
	for i, b := range c.bits {
		c.q[i] = newQuant(b, c.clips[i])
		total += int(b)
	}
	c.payloadBytes = (total + 7) / 8
}

func finite32(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

func finite64(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Width is d, the hidden-state width.
func (c *Codec) Width() int { return c.d }

// Kept is k, the number of components sent.
func (c *Codec) Kept() int { return c.k }

// Bits returns a copy of the per-component bit allocation (k values).
func (c *Codec) Bits() []uint8 { return append([]uint8(nil), c.bits...) }

// Mean returns a copy of the mean (d values).
func (c *Codec) Mean() []float32 { return append([]float32(nil), c.mean...) }

// Components returns a copy of the kept basis, k x d row-major.
func (c *Codec) Components() []float32 { return append([]float32(nil), c.comps...) }

// Clips returns a copy of the per-component clip ranges.
func (c *Codec) Clips() []float32 { return append([]float32(nil), c.clips...) }

// Weights returns a copy of the kept components' sensitivities, the weights
// the bits were allocated with, or nil for a codec fitted for the activations.
func (c *Codec) Weights() []float32 { return append([]float32(nil), c.weights...) }

// Gain says whether payloads carry a per-token gain.
func (c *Codec) Gain() bool { return c.gain }

// PayloadBytes is the size of one token's encoded payload.
func (c *Codec) PayloadBytes() int { return c.payloadBytes }

// Provenance returns the recorded provenance.
func (c *Codec) Provenance() Provenance { return c.prov }

// Stats returns the recorded fit measurements.
func (c *Codec) Stats() Stats { return c.stats }

// Digest is the BLAKE3 digest of the codec file: the identity both ends of a
// connection compare. It changes when provenance or stats are set.
func (c *Codec) Digest() [32]byte { return c.digest }

// ShortID is the first 4 bytes of Digest read little-endian; every frame
// carries it.
func (c *Codec) ShortID() uint32 { return binary.LittleEndian.Uint32(c.digest[:4]) }

// SetProvenance records the provenance and updates the digest.
func (c *Codec) SetProvenance(p Provenance) {
	c.prov = p
	c.seal()
}

// SetHeldoutKL records the held-out KL divergence the caller measured with
// the model, in nats per token, and updates the digest. It must be finite and
// non-negative (clamp rounding noise below zero to zero before calling).
func (c *Codec) SetHeldoutKL(kl float64) error {
	if !finite64(kl) || kl < 0 {
		return fmt.Errorf("codec: held-out KL %v is not finite and non-negative", kl)
	}
	c.stats.HasKL = true
	c.stats.HeldoutKL = kl
	c.seal()
	return nil
}
