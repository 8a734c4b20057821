package eval

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seamlm/seam/codec"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
)

// costTokens bounds the positions an encoding's cost is timed on, and
// stageTokens the decode steps the layers on each side are timed over
// (fewer: on a large model a step takes a good part of a second).
const (
	costTokens  = 256
	stageTokens = 32
)

// MeasureCost fills rep's compute costs (Result.EncodeUS and the rest,
// Report.UpperUS and LowerUS): on the longest sequence's hidden states (at
// most 256 positions), each encoding's encode and decode per token, one
// token per frame and the whole run as one frame, and, over its first 32
// positions, one decode step of the layers on each side of the boundary.
// Each figure is the fastest of three rounds after a warm-up round, so
// that other load on the machine counts as little as it can. encs must be
// the encodings rep was made with, in the same order.
func MeasureCost(m *model.Model, seqs [][]int, boundary int, encs []wire.Encoding, rep *Report) error {
	if len(encs) != len(rep.Results) {
		return fmt.Errorf("measure cost: %d encodings for %d results", len(encs), len(rep.Results))
	}
	var seq []int
	for _, s := range seqs {
		if len(s) > len(seq) {
			seq = s
		}
	}
	P := min(len(seq)-1, costTokens)
	if P < 1 {
		return nil
	}
	c, err := newComparer(m, boundary, encs)
	if err != nil {
		return err
	}
	if err := c.reference(seq[:P]); err != nil {
		return err
	}
	d := c.dim
	for e, enc := range encs {
		cost, err := TimeEncoding(enc, c.hidden[:P*d], P, d)
		if err != nil {
			return err
		}
		r := &rep.Results[e]
		r.EncodeUS, r.DecodeUS, r.PrefillEncodeUS, r.PrefillDecodeUS = cost.EncodeUS, cost.DecodeUS, cost.PrefillEncodeUS, cost.PrefillDecodeUS
	}
	x := make([]float32, d)
	logits := make([]float32, c.vocab)
	var serr error
	S := min(P, stageTokens)
	rep.UpperUS = fastest(S, func() {
		c.upper.Reset()
		for p := 0; p < S && serr == nil; p++ {
			copy(x, c.hidden[p*d:(p+1)*d]) // any state of the right width will do
			serr = m.LayersBatch(c.upper, x, p, 1)
		}
	})
	rep.LowerUS = fastest(S, func() {
		c.lower.Reset()
		for p := 0; p < S && serr == nil; p++ {
			copy(x, c.hidden[p*d:(p+1)*d])
			if serr = m.LayersBatch(c.lower, x, p, 1); serr == nil {
				serr = m.Head(x, logits)
			}
		}
	})
	for e := range rep.Results {
		rep.Results[e].UpperUS, rep.Results[e].LowerUS = rep.UpperUS, rep.LowerUS
	}
	return serr
}

// EncodingCost is an encoding's compute per token, in µs: encode and
// decode with one token per frame (a decode step), and with all the tokens
// in one frame (a prefill).
type EncodingCost struct {
	EncodeUS, DecodeUS, PrefillEncodeUS, PrefillDecodeUS float64
}

// TimeEncoding times enc on the n tokens of width d in x (at most
// costTokens of them are used): each token encoded in a frame of its own,
// those payloads decoded, then all the tokens as one frame, encoded and
// decoded. Each figure is the fastest of three rounds after a warm-up
// round. MeasureCost uses it for seam eval's figures, and CodecCost for
// the planner's.
func TimeEncoding(enc wire.Encoding, x []float32, n, d int) (EncodingCost, error) {
	n = min(n, costTokens)
	if n < 1 || len(x) < n*d {
		return EncodingCost{}, fmt.Errorf("timing %s: %d tokens of width %d in %d values", enc.Name(), n, d, len(x))
	}
	size, err := enc.PayloadSize(n, d)
	if err != nil {
		return EncodingCost{}, fmt.Errorf("timing %s: %w", enc.Name(), err)
	}
	buf := make([]byte, size)
	out := make([]float32, n*d)
	frame := func(x []float32, n int) ([]byte, error) {
		if ve, ok := enc.(wire.VariableEncoding); ok {
			return ve.AppendEncode(buf[:0], x, n, d)
		}
		sz, err := enc.PayloadSize(n, d)
		if err != nil {
			return nil, err
		}
		return buf[:sz], enc.Encode(buf[:sz], x, n, d)
	}
	var cost EncodingCost
	var perr error
	cost.EncodeUS = fastest(n, func() {
		for p := 0; p < n && perr == nil; p++ {
			_, perr = frame(x[p*d:(p+1)*d], 1)
		}
	})
	payloads := make([][]byte, n)
	for p := 0; p < n && perr == nil; p++ {
		var b []byte
		if b, perr = frame(x[p*d:(p+1)*d], 1); perr == nil {
			payloads[p] = append([]byte(nil), b...)
		}
	}
	cost.DecodeUS = fastest(n, func() {
		for p := 0; p < n && perr == nil; p++ {
			perr = enc.Decode(out[p*d:(p+1)*d], payloads[p], 1, d)
		}
	})
	var whole []byte
	cost.PrefillEncodeUS = fastest(n, func() {
		if perr == nil {
			whole, perr = frame(x[:n*d], n)
		}
	})
	whole = append([]byte(nil), whole...)
	cost.PrefillDecodeUS = fastest(n, func() {
		if perr == nil {
			perr = enc.Decode(out, whole, n, d)
		}
	})
	if perr != nil {
		return EncodingCost{}, fmt.Errorf("timing %s: %w", enc.Name(), perr)
	}
	return cost, nil
}

// CodecCost is TimeEncoding of a codec on this machine, on 256 synthetic
// tokens: the codec's mean plus its components with Gaussian coefficients
// that spread over its quantizer's cells about as calibration data's do
// (standard deviation 3 steps for an entropy- or trellis-coded codec, a
// third of the clip for fixed bits), from a fixed seed. The planner prices
// a lowrank boundary with it (cluster.CodecInfos): the codec's compute
// barely depends on the values, and the head that plans holds the codec
// but not the captures it was fitted on.
func CodecCost(c *codec.Codec) (EncodingCost, error) {
	d, k := c.Width(), c.Kept()
	spread := c.Steps()
	for i := range spread {
		spread[i] *= 3
	}
	if spread == nil {
		spread = c.Clips()
		for i := range spread {
			spread[i] /= 3
		}
	}
	mean, comps := c.Mean(), c.Components()
	rng := rand.New(rand.NewPCG(uint64(d), uint64(k)))
	x := make([]float32, costTokens*d)
	for t := range costTokens {
		row := x[t*d : (t+1)*d]
		copy(row, mean)
		for i := 0; i < k; i++ {
			y := float32(rng.NormFloat64()) * spread[i]
			for j, u := range comps[i*d : (i+1)*d] {
				row[j] += y * u
			}
		}
	}
	return TimeEncoding(codec.NewWire(c), x, costTokens, d)
}

// fastest runs f four times and returns the fastest of the last three, in
// µs per token for n tokens.
func fastest(n int, f func()) float64 {
	best := time.Duration(1<<63 - 1)
	for round := range 4 {
		t0 := time.Now()
		f()
		if dt := time.Since(t0); round > 0 && dt < best {
			best = dt
		}
	}
	return float64(best.Nanoseconds()) / 1e3 / float64(n)
}
