package model

import (
	"fmt"
	"math"

	"github.com/seamlm/seam/kernels"
)

// RopeTable returns cos and sin of the rotation angle of every (position,
// pair): pair i of position p turns by p / linear * theta^(-2i/rope_dim) /
// factors[i] radians (linear = 1 and factors[i] = 1 when absent), computed in
// float64 and rounded once, so that every stage builds identical tables.
// factors, when given, has rope_dim/2 entries.
func RopeTable(c *Config, factors []float32) (cos, sin []float32) {
	pairs := c.RopeDim / 2
	freqs := make([]float64, pairs)
	for i := range freqs {
		freqs[i] = 1.0 / math.Pow(float64(c.RopeTheta), float64(2*i)/float64(c.RopeDim))
		if factors != nil {
			freqs[i] /= float64(factors[i])
		}
		if c.RopeLinear != 0 {
			freqs[i] /= float64(c.RopeLinear)
		}
	}
	cos = make([]float32, c.SeqLen*pairs)
	sin = make([]float32, c.SeqLen*pairs)
	for pos := 0; pos < c.SeqLen; pos++ {
		for i, f := range freqs {
			angle := float64(pos) * f
			cos[pos*pairs+i] = float32(math.Cos(angle))
			sin[pos*pairs+i] = float32(math.Sin(angle))
		}
	}
	return cos, sin
}

// rope rotates the first RopeDim dimensions of each head of v (one token) by
// the angles of position pos. The pairing is (2i, 2i+1), as llama2.c
// checkpoints and llama.cpp's "llama" GGUF files are laid out, or with
// RopeNeox (i, i + RopeDim/2), the layout of Hugging Face checkpoints that
// llama.cpp keeps for Qwen.
func (m *Model) rope(v []float32, pos int) {
	c := &m.W.Config
	hd, pairs := c.HeadDim(), c.RopeDim/2
	cos := m.ropeCos[pos*pairs : (pos+1)*pairs]
	sin := m.ropeSin[pos*pairs : (pos+1)*pairs]
	for h := 0; h+hd <= len(v); h += hd {
		if c.RopeNeox {
			kernels.RotateHalves(v[h:h+pairs], v[h+pairs:h+2*pairs], cos, sin)
		} else {
			kernels.RotatePairs(v[h:h+2*pairs], cos, sin)
		}
	}
}

// Llama3Scaling holds the parameters of Llama 3.1's RoPE frequency scaling
// (Hugging Face's rope_type "llama3"): frequencies whose wavelength exceeds
// OriginalContext/LowFreqFactor are divided by Factor, those shorter than
// OriginalContext/HighFreqFactor are kept, and those between are blended.
type Llama3Scaling struct {
	Factor          float64
	LowFreqFactor   float64
	HighFreqFactor  float64
	OriginalContext float64
}

// Llama3RopeFactors returns the rope_dim/2 divisors of the RoPE frequencies
// (llama.cpp's rope_freqs tensor) that s defines for base theta, computed in
// float64 and rounded once.
func Llama3RopeFactors(theta float32, ropeDim int, s Llama3Scaling) ([]float32, error) {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !(s.Factor > 0) || !finite(s.Factor):
		return nil, fmt.Errorf("llama3 rope scaling: factor %v is not positive and finite", s.Factor)
	case !(s.OriginalContext > 0) || !finite(s.OriginalContext):
		return nil, fmt.Errorf("llama3 rope scaling: original context %v is not positive and finite", s.OriginalContext)
	case !(s.LowFreqFactor > 0) || !finite(s.HighFreqFactor) || !(s.HighFreqFactor > s.LowFreqFactor):
		return nil, fmt.Errorf("llama3 rope scaling: low/high frequency factors %v, %v: want 0 < low < high, finite", s.LowFreqFactor, s.HighFreqFactor)
	case ropeDim < 2 || ropeDim%2 != 0 || !(theta > 0):
		return nil, fmt.Errorf("llama3 rope scaling: rope dim %d, theta %v", ropeDim, theta)
	}
	lowWavelen := s.OriginalContext / s.LowFreqFactor   // longer than this: divided by Factor
	highWavelen := s.OriginalContext / s.HighFreqFactor // shorter than this: unchanged
	out := make([]float32, ropeDim/2)
	for i := range out {
		freq := 1 / math.Pow(float64(theta), float64(2*i)/float64(ropeDim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = float32(s.Factor)
		default:
			smooth := (s.OriginalContext/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/s.Factor + smooth))
		}
	}
	return out, nil
}
