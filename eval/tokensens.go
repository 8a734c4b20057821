package eval

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/seamlm/seam/model"
)

// TokenSensOptions bound TokenSensitivity's probes. Zero values take the
// defaults.
type TokenSensOptions struct {
	// Positions is how many positions are probed, the first ones of the
	// sequences in order (default 4096); the rest get 0, "not measured".
	Positions int
	// Draws is how many noise vectors probe each position (default 4).
	Draws int
	// Window is how many positions from the probed one on have their KL
	// counted (default 32): an error at one position reaches the later
	// ones through attention, most of it the next few.
	Window int
	// Noise is the probe's standard deviation per value, as a fraction of
	// the root mean square of the sequence's hidden states (default 0.1):
	// about the error a 25-byte codec leaves on stories260K, inside the
	// KL's quadratic regime.
	Noise float64
}

func (o TokenSensOptions) withDefaults() TokenSensOptions {
	if o.Positions <= 0 {
		o.Positions = 4096
	}
	if o.Draws <= 0 {
		o.Draws = 4
	}
	if o.Window <= 0 {
		o.Window = 32
	}
	if !(o.Noise > 0) {
		o.Noise = 0.1
	}
	return o
}

// TokenSensitivity measures, for each position of seqs (a capture's rows, in
// order), how much an error in its hidden state at the boundary moves the
// model's output: isotropic Gaussian noise is added to that position alone,
// the layers from the boundary run over it and the next Window-1 positions
// (their caches holding the exact states before it), and the KL(p_exact ‖
// p_probed) summed over those positions, divided by the noise's squared
// norm, averaged over Draws noise vectors, is the position's sensitivity.
// Positions past the first opts.Positions are 0 (not measured). The noise
// of a position is drawn from a generator seeded by its row index, and
// sequences run in parallel into their own rows, so the result is the same
// on every run. It is what codec.FitOptions.TokenSensitivity takes
// (docs/codec.md §11.8).
func TokenSensitivity(m *model.Model, seqs [][]int, boundary int, opts TokenSensOptions, progress Progress) ([]float64, error) {
	if err := checkBoundary(m, boundary); err != nil {
		return nil, fmt.Errorf("token sensitivity: %w", err)
	}
	if err := checkSeqs(m, seqs); err != nil {
		return nil, fmt.Errorf("token sensitivity: %w", err)
	}
	opts = opts.withDefaults()
	out := make([]float64, CountTokens(seqs))
	var probed [][]int // the sequences with probed positions, and their first rows
	first := make([]int, 0, len(seqs))
	left := opts.Positions
	for i, off := 0, 0; i < len(seqs) && left > 0; i++ {
		probed, first = append(probed, seqs[i]), append(first, off)
		off += len(seqs[i])
		left -= len(seqs[i])
	}
	if len(probed) == 0 {
		return nil, errors.New("token sensitivity: no sequence to probe")
	}
	err := forEach(len(probed), progress,
		func() (*tokenProber, error) { return newTokenProber(m, boundary) },
		func(p *tokenProber, i int) error {
			n := min(len(probed[i]), opts.Positions-first[i])
			if err := p.probe(probed[i], n, first[i], opts, out[first[i]:first[i]+n]); err != nil {
				return fmt.Errorf("sequence %d: %w", i, err)
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("token sensitivity at boundary %d: %w", boundary, err)
	}
	return out, nil
}

// tokenProber is one goroutine's model states and buffers.
type tokenProber struct {
	*comparer
	buf, logits []float32
}

func newTokenProber(m *model.Model, boundary int) (*tokenProber, error) {
	c, err := newComparer(m, boundary, nil)
	if err != nil {
		return nil, err
	}
	return &tokenProber{comparer: c, logits: make([]float32, c.vocab)}, nil
}

// probe measures the first n positions of seq into out; row is the capture
// row of its position 0 (the noise's seed).
func (p *tokenProber) probe(seq []int, n, row int, opts TokenSensOptions, out []float64) error {
	P, d, V := len(seq), p.dim, p.vocab
	if err := p.reference(seq); err != nil {
		return err
	}
	var ss float64
	for _, v := range p.hidden {
		ss += float64(v) * float64(v)
	}
	sigma := opts.Noise * math.Sqrt(ss/float64(len(p.hidden)))
	p.buf = grow(p.buf, opts.Window*d)
	p.lower.Reset()
	for pos := 0; pos < n; pos++ {
		W := min(opts.Window, P-pos)
		rng := rand.New(rand.NewPCG(uint64(row+pos), 0x5eed))
		var sum float64
		for range opts.Draws {
			buf := p.buf[:W*d]
			copy(buf, p.hidden[pos*d:(pos+W)*d])
			var norm2 float64
			for j := 0; j < d; j++ {
				e := sigma * rng.NormFloat64()
				buf[j] += float32(e)
				norm2 += e * e
			}
			// Positions before pos hold the exact states: LayersBatch
			// rewinds the cache to pos.
			if err := p.m.LayersBatch(p.lower, buf, pos, W); err != nil {
				return err
			}
			var kls float64
			for q := 0; q < W; q++ {
				if err := p.m.Head(buf[q*d:(q+1)*d], p.logits); err != nil {
					return err
				}
				kls += kl(p.ref[(pos+q)*V:(pos+q+1)*V], p.refLogZ[pos+q], p.logits, logSumExp(p.logits))
			}
			if norm2 > 0 {
				sum += max(kls, 0) / norm2
			}
		}
		out[pos] = sum / float64(opts.Draws)
		// The exact state at pos, for the probes after it.
		exact := p.buf[:d]
		copy(exact, p.hidden[pos*d:(pos+1)*d])
		if err := p.m.LayersBatch(p.lower, exact, pos, 1); err != nil {
			return err
		}
	}
	return nil
}
