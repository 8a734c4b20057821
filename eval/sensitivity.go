package eval

import (
	"errors"
	"fmt"
	"math"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/model"
)

// SensitivityStep is the size of the probe along each direction, in units of
// the direction's standard deviation: about the error a 3-bit quantizer
// leaves, small enough that the KL stays in its quadratic regime and large
// enough to stand well above float32 rounding in the logits.
const SensitivityStep = 0.125

// Sensitivity measures, for each direction of a codec fit's basis, how much
// an error along it moves the model's output: the mean KL(p_exact ‖
// p_probed) per position, divided by the squared size of the probe. The
// probe adds ±SensitivityStep standard deviations along the direction to the
// hidden state of every position of a sequence at once, with a sign drawn
// per position from a fixed hash, so that the cross terms between positions
// (which attention mixes) average out. Under the quadratic approximation of
// the KL the result is half the Fisher information along the direction, the
// weight that turns the direction's squared quantization error into output
// distortion.
//
// It is a deterministic function of its arguments on one machine; seqs are
// run in parallel and their sums added in sequence order.
func Sensitivity(m *model.Model, seqs [][]int, boundary int, b codec.Basis, progress Progress) ([]float64, error) {
	return sensitivityAt(m, seqs, boundary, b, SensitivityStep, progress)
}

// sensitivityAt is Sensitivity with a probe of step standard deviations.
func sensitivityAt(m *model.Model, seqs [][]int, boundary int, b codec.Basis, step float64, progress Progress) ([]float64, error) {
	if err := checkBoundary(m, boundary); err != nil {
		return nil, fmt.Errorf("sensitivity: %w", err)
	}
	if err := checkSeqs(m, seqs); err != nil {
		return nil, fmt.Errorf("sensitivity: %w", err)
	}
	cfg := m.Config()
	if b.Width != cfg.Dim {
		return nil, fmt.Errorf("sensitivity: basis of width %d for a model of width %d", b.Width, cfg.Dim)
	}
	n := len(b.Variances)
	if len(b.Components) != n*b.Width {
		return nil, fmt.Errorf("sensitivity: %d component values for %d directions of width %d", len(b.Components), n, b.Width)
	}
	perSeq := make([][]float64, len(seqs))
	positions := make([]int, len(seqs))
	err := forEach(len(seqs), progress,
		func() (*comparer, error) { return newComparer(m, boundary, nil) },
		func(c *comparer, i int) error {
			s, p, err := c.probe(seqs[i], b, step)
			if err != nil {
				return fmt.Errorf("sequence %d: %w", i, err)
			}
			perSeq[i], positions[i] = s, p
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("sensitivity at boundary %d: %w", boundary, err)
	}
	total := 0
	sums := make([]float64, n)
	for i, s := range perSeq {
		total += positions[i]
		for dir, v := range s {
			sums[dir] += v
		}
	}
	if total == 0 {
		return nil, errors.New("sensitivity: no position to score (every sequence needs at least two tokens)")
	}
	for dir := range sums {
		probe := step * step * b.Variances[dir]
		sums[dir] = max(sums[dir]/float64(total), 0) / probe
	}
	return sums, nil
}

// probe returns, for each direction, the KL summed over the sequence's
// positions with the hidden states probed along it, and the position count.
func (c *comparer) probe(seq []int, b codec.Basis, size float64) ([]float64, int, error) {
	P := len(seq) - 1
	out := make([]float64, len(b.Variances))
	if P < 1 {
		return out, 0, nil
	}
	if err := c.reference(seq[:P]); err != nil {
		return nil, 0, err
	}
	c.decoded = grow(c.decoded, P*c.dim)
	for dir, v := range b.Variances {
		u := b.Components[dir*c.dim : (dir+1)*c.dim]
		step := float32(size * math.Sqrt(v))
		copy(c.decoded, c.hidden)
		for p := range P {
			a := step
			if probeSign(dir, p) {
				a = -a
			}
			x := c.decoded[p*c.dim : (p+1)*c.dim]
			for j := range x {
				x[j] += float32(a * u[j])
			}
		}
		c.lower.Reset()
		if err := c.m.LayersBatch(c.lower, c.decoded, 0, P); err != nil {
			return nil, 0, err
		}
		for p := range P {
			if err := c.m.Head(c.decoded[p*c.dim:(p+1)*c.dim], c.logits); err != nil {
				return nil, 0, fmt.Errorf("position %d: %w", p, err)
			}
			out[dir] += kl(c.ref[p*c.vocab:(p+1)*c.vocab], c.refLogZ[p], c.logits, logSumExp(c.logits))
		}
	}
	return out, P, nil
}

// probeSign is a fixed pseudo-random sign for direction dir at position p
// (the parity of a 64-bit mix of the two).
func probeSign(dir, p int) bool {
	h := uint64(dir)*0x9E3779B97F4A7C15 ^ uint64(p)*0xC2B2AE3D27D4EB4F
	h ^= h >> 29
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 32
	return h&1 == 1
}
