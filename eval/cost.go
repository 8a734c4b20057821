package eval

import (
	"fmt"
	"time"

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
	out := make([]float32, P*d)
	for e, enc := range encs {
		size, err := enc.PayloadSize(P, d)
		if err != nil {
			return err
		}
		buf := make([]byte, size)
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
		r := &rep.Results[e]
		var perr error
		r.EncodeUS = fastest(P, func() {
			for p := 0; p < P && perr == nil; p++ {
				_, perr = frame(c.hidden[p*d:(p+1)*d], 1)
			}
		})
		payloads := make([][]byte, P)
		for p := 0; p < P && perr == nil; p++ {
			var b []byte
			if b, perr = frame(c.hidden[p*d:(p+1)*d], 1); perr == nil {
				payloads[p] = append([]byte(nil), b...)
			}
		}
		r.DecodeUS = fastest(P, func() {
			for p := 0; p < P && perr == nil; p++ {
				perr = enc.Decode(out[p*d:(p+1)*d], payloads[p], 1, d)
			}
		})
		var whole []byte
		r.PrefillEncodeUS = fastest(P, func() {
			if perr == nil {
				whole, perr = frame(c.hidden[:P*d], P)
			}
		})
		whole = append([]byte(nil), whole...)
		r.PrefillDecodeUS = fastest(P, func() {
			if perr == nil {
				perr = enc.Decode(out, whole, P, d)
			}
		})
		if perr != nil {
			return fmt.Errorf("timing %s: %w", enc.Name(), perr)
		}
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
