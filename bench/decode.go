package bench

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// SpeedOptions are the knobs shared by Decode and Prefill.
type SpeedOptions struct {
	// Threads is the kernels' worker count (the caller's included); 0 means
	// every core (runtime.NumCPU). The read bandwidth is measured with the
	// same count.
	Threads int
	// Bandwidth, when > 0, is the read bandwidth in GB/s to compare with,
	// instead of measuring it (ReadBandwidth takes a few seconds).
	Bandwidth float64
	// Progress, if set, receives one line per phase (measuring, warming up).
	Progress io.Writer
}

// DecodeOptions configure Decode.
type DecodeOptions struct {
	SpeedOptions
	Steps  int // decode steps timed; 0 means 128
	Warmup int // decode steps run first and not timed; 0 means 8, < 0 none
}

// Speed is the result of Decode or Prefill. JSON names are stable: scripts
// and docs/performance.md read them.
type Speed struct {
	Mode    string `json:"mode"` // "decode" or "prefill"
	Threads int    `json:"threads"`
	SIMD    string `json:"simd"` // kernels.SIMD()
	// Tokens is how many tokens the timed part processed: decode steps, or
	// prompt tokens times repetitions.
	Tokens  int     `json:"tokens"`
	Seconds float64 `json:"seconds"` // timed wall-clock time
	TokS    float64 `json:"tok_s"`
	// WeightBytes is what one token streams: every held layer tensor plus
	// the final norm and classifier and one embedding row. KV-cache reads
	// are not counted.
	WeightBytes int64 `json:"weight_bytes"`
	// GBs is WeightBytes times forward passes per second, 1e9 bytes to the
	// GB: for decode, tok_s * weight_bytes; for prefill, where each batch
	// streams the weights once, batches per second * weight_bytes.
	GBs          float64 `json:"gb_s"`
	BandwidthGBs float64 `json:"bandwidth_gb_s"` // the machine's measured read bandwidth
	// Fraction is GBs / BandwidthGBs.
	Fraction float64 `json:"bandwidth_fraction"`
}

// String is the one-line human summary.
func (s Speed) String() string {
	return fmt.Sprintf("%s: %.2f tok/s, %.2f GB/s of weights (%.0f%% of %.1f GB/s read bandwidth), %d threads, %s; %d tokens in %.3f s",
		s.Mode, s.TokS, s.GBs, 100*s.Fraction, s.BandwidthGBs, s.Threads, s.SIMD, s.Tokens, s.Seconds)
}

// Decode times greedy decoding: token 1 at position 0, then each step feeds
// the argmax of the previous logits at the next position through every layer
// and the classifier (Embed, Layers, Head: what a whole-model session does
// per generated token). Warm-up steps run first and are not timed; model
// loading is the caller's and is never timed. Steps plus warm-up must fit
// in the context.
func Decode(w *model.Weights, opts DecodeOptions) (Speed, error) {
	if opts.Steps == 0 {
		opts.Steps = 128
	}
	if opts.Warmup == 0 {
		opts.Warmup = 8
	}
	warm := max(opts.Warmup, 0)
	if opts.Steps < 1 {
		return Speed{}, fmt.Errorf("decode steps %d: want at least 1", opts.Steps)
	}
	if need := 1 + warm + opts.Steps; need > w.Config.SeqLen {
		return Speed{}, fmt.Errorf("%d warm-up and %d timed steps need %d positions; the context holds %d", warm, opts.Steps, need, w.Config.SeqLen)
	}
	m, s, err := wholeModel(w)
	if err != nil {
		return Speed{}, err
	}
	defer s.Release() // its KV blocks back to their allocator now, not when collected
	restore := setThreads(opts.Threads)
	defer restore()
	res := Speed{Mode: "decode", Threads: kernels.Threads(), SIMD: kernels.SIMD(), WeightBytes: WeightBytes(w)}
	if res.BandwidthGBs, err = bandwidth(opts.SpeedOptions, res.Threads); err != nil {
		return Speed{}, err
	}
	c := &w.Config
	x, logits := make([]float32, c.Dim), make([]float32, c.VocabSize)
	tok, pos := 1, 0
	step := func() error {
		if err := decodeOne(m, s, tok, pos, x, logits); err != nil {
			return err
		}
		tok, pos = argmax(logits), pos+1
		return nil
	}
	progress(opts.Progress, "decode: %d warm-up steps, then %d timed, %d threads", warm, opts.Steps, res.Threads)
	for range warm {
		if err := step(); err != nil {
			return Speed{}, err
		}
	}
	start := time.Now()
	for range opts.Steps {
		if err := step(); err != nil {
			return Speed{}, err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.Tokens = opts.Steps
	res.TokS = float64(opts.Steps) / res.Seconds
	res.GBs = res.TokS * float64(res.WeightBytes) / 1e9
	res.Fraction = res.GBs / res.BandwidthGBs
	return res, nil
}

// wholeModel prepares a model and a state over every layer.
func wholeModel(w *model.Weights) (*model.Model, *model.State, error) {
	if !w.HasEmbedding() || !w.HasHead() {
		return nil, nil, errors.New("the benchmark needs the whole model, not a layer range")
	}
	m, err := model.New(w)
	if err != nil {
		return nil, nil, err
	}
	s, err := m.NewState(0, w.Config.NLayers)
	if err != nil {
		return nil, nil, err
	}
	return m, s, nil
}

// WeightBytes is what one forward pass of one token reads of the weights:
// every tensor of the held layers, the final norm and classifier when held,
// and one row of the embedding when held.
func WeightBytes(w *model.Weights) int64 {
	var n int64
	add := func(t *tensor.Tensor) { n += int64(len(t.Data) + len(t.Scales)) }
	for l := w.First; l < w.Last; l++ {
		for _, t := range w.Layers[l].Tensors() {
			add(t)
		}
	}
	if w.HasHead() {
		add(&w.FinalNorm)
		add(&w.Output)
	}
	if w.HasEmbedding() {
		n += int64(w.Embedding.RowBytes())
	}
	return n
}

// setThreads sets the kernels' worker count (0: every core) and returns a
// function restoring the previous one.
func setThreads(n int) func() {
	prev := kernels.Threads()
	if n <= 0 {
		n = runtime.NumCPU()
	}
	kernels.SetThreads(n)
	return func() { kernels.SetThreads(prev) }
}

func bandwidth(opts SpeedOptions, threads int) (float64, error) {
	if opts.Bandwidth > 0 {
		return opts.Bandwidth, nil
	}
	progress(opts.Progress, "measuring read bandwidth with %d threads", threads)
	return ReadBandwidth(threads, 0)
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
