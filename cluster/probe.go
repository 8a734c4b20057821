package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/model"
)

// ProbeOptions bound a speed probe.
type ProbeOptions struct {
	Rounds int // timed repetitions of each measurement (default 5); the median is kept
	Batch  int // prompt tokens per prefill measurement (default 64)
}

// ProbeSpeed measures this machine's compute on the model's own weights
// and shapes: the held layers run for one token and for a batch, per layer,
// and the classifier (or, on a part without one, a matrix-vector product of
// the embedding, which has the classifier's shape). w must hold at least
// one layer; hold several (about 100 MB of them) so that the weights
// stream from memory as in real decoding, not from a cache that one layer
// would fit in. It takes under a second for a 100M-parameter model.
func ProbeSpeed(w *model.Weights, opt ProbeOptions) (Speed, error) {
	if opt.Rounds <= 0 {
		opt.Rounds = 5
	}
	if opt.Batch <= 0 {
		opt.Batch = 64
	}
	c := w.Config
	opt.Batch = min(opt.Batch, c.SeqLen)
	m, err := model.New(w)
	if err != nil {
		return Speed{}, fmt.Errorf("speed probe: %w", err)
	}
	layers := time.Duration(w.Last - w.First)
	st, err := m.NewState(w.First, w.Last)
	if err != nil {
		return Speed{}, fmt.Errorf("speed probe: %w", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, opt.Batch*c.Dim)
	fill := func() {
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
	}
	// Decode: one token after a short cached prefix, as in generation.
	decode, err := median(opt.Rounds, func() error {
		fill()
		st.Reset()
		if err := m.LayersBatch(st, x[:4*c.Dim], 0, 4); err != nil {
			return err
		}
		t0 := time.Now()
		err := m.LayersBatch(st, x[:c.Dim], 4, 1)
		return elapsed(t0, err)
	})
	if err != nil {
		return Speed{}, err
	}
	prefill, err := median(opt.Rounds, func() error {
		fill()
		st.Reset()
		t0 := time.Now()
		err := m.LayersBatch(st, x, 0, opt.Batch)
		return elapsed(t0, err)
	})
	if err != nil {
		return Speed{}, err
	}
	head, err := median(opt.Rounds, func() error {
		fill()
		logits := make([]float32, c.VocabSize)
		t0 := time.Now()
		switch {
		case w.HasHead():
			if err := m.Head(x[:c.Dim], logits); err != nil {
				return err
			}
		case w.HasEmbedding():
			kernels.MatVec(logits, &w.Embedding, x[:c.Dim])
		default:
			return fmt.Errorf("the probed part holds neither the classifier nor the embedding")
		}
		return elapsed(t0, nil)
	})
	if err != nil {
		return Speed{}, err
	}
	return Speed{DecodeLayer: decode / layers, PrefillLayer: prefill / layers / time.Duration(opt.Batch), Head: head}, nil
}

// elapsedErr carries a timing out of a probe round.
type elapsedErr struct{ d time.Duration }

func (e elapsedErr) Error() string { return "timing" }

func elapsed(t0 time.Time, err error) error {
	if err != nil {
		return err
	}
	return elapsedErr{max(time.Since(t0), time.Nanosecond)}
}

// median runs f once to warm up and rounds times timed, and returns the
// median timing.
func median(rounds int, f func() error) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i <= rounds; i++ {
		err := f()
		e, ok := err.(elapsedErr)
		if !ok {
			return 0, fmt.Errorf("speed probe: %w", err)
		}
		if i > 0 {
			ds = append(ds, e.d)
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}
