package cluster

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/model"
)

// ProbeOptions bound a speed probe.
type ProbeOptions struct {
	Rounds int // timed repetitions of the decode and classifier measurements (default 25), averaged
	// Batch is the prompt length of the prefill measurement (default 128,
	// the length plans are scored on).
	Batch int
	// Pause is how long the probe idles before each timed round (default
	// 10 ms; negative: none). A stage of a chain computes its part of each
	// step after waiting, idle, for the other stages. On the 2-vCPU virtual
	// machine this was measured on, decode steps that followed a 5-10 ms
	// sleep took 1.2-1.4 ms per layer on average against 0.71 back to
	// back, with a long tail of slow wake-ups, and a two-stage chain's
	// stages computed at 1.35-1.4 ms per layer: a probe of back-to-back
	// steps predicted chains almost twice as fast as they ran
	// (docs/cluster.md, "What it predicts").
	Pause time.Duration
	// PrefillPause is the idle time before each of the 3 timed prefill
	// rounds (default 300 ms; negative: Pause). A prompt reaches a stage
	// that has been idle for longer than a decode step: there, a 64-token
	// batch after 0.1-2 s of idling took 0.19-0.24 ms per token and layer,
	// against 0.14 after 10 ms, and the testbed chain's prefills ran at
	// 0.23.
	PrefillPause time.Duration
}

const (
	defaultPause        = 10 * time.Millisecond
	defaultPrefillPause = 300 * time.Millisecond
	prefillRounds       = 3
)

// ProbeSpeed measures this machine's compute on the model's own weights
// and shapes: the held layers run for one token and for a batch, per layer,
// and the classifier (or, on a part without one, a matrix-vector product of
// the embedding, which has the classifier's shape). w must hold at least
// one layer; hold several (about 100 MB of them) so that the weights
// stream from memory as in real decoding, not from a cache that one layer
// would fit in. Each timed round follows an idle pause, as a stage's turn
// in a chain does (ProbeOptions.Pause, PrefillPause), and each figure is
// the mean of the rounds: a chain's throughput is set by its steps' mean,
// slow wake-ups included. It takes about 1.5 s for a 100M-parameter model,
// most of it idle.
func ProbeSpeed(w *model.Weights, opt ProbeOptions) (Speed, error) {
	if opt.Rounds <= 0 {
		opt.Rounds = 25
	}
	if opt.Batch <= 0 {
		opt.Batch = 128
	}
	switch {
	case opt.Pause == 0:
		opt.Pause = defaultPause
	case opt.Pause < 0:
		opt.Pause = 0
	}
	switch {
	case opt.PrefillPause == 0:
		opt.PrefillPause = defaultPrefillPause
	case opt.PrefillPause < 0:
		opt.PrefillPause = opt.Pause
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
	decode, err := mean(opt.Rounds, func() error {
		fill()
		st.Reset()
		if err := m.LayersBatch(st, x[:4*c.Dim], 0, 4); err != nil {
			return err
		}
		time.Sleep(opt.Pause)
		t0 := time.Now()
		err := m.LayersBatch(st, x[:c.Dim], 4, 1)
		return elapsed(t0, err)
	})
	if err != nil {
		return Speed{}, err
	}
	prefill, err := mean(min(opt.Rounds, prefillRounds), func() error {
		fill()
		st.Reset()
		time.Sleep(opt.PrefillPause)
		t0 := time.Now()
		err := m.LayersBatch(st, x, 0, opt.Batch)
		return elapsed(t0, err)
	})
	if err != nil {
		return Speed{}, err
	}
	logits := make([]float32, c.VocabSize)
	head, err := mean(opt.Rounds, func() error {
		fill()
		time.Sleep(opt.Pause)
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

// mean runs f once to warm up and rounds times timed, and returns the
// mean timing.
func mean(rounds int, f func() error) (time.Duration, error) {
	var sum time.Duration
	for i := 0; i <= rounds; i++ {
		err := f()
		e, ok := err.(elapsedErr)
		if !ok {
			return 0, fmt.Errorf("speed probe: %w", err)
		}
		if i > 0 {
			sum += e.d
		}
	}
	return sum / time.Duration(rounds), nil
}
