package bench

import (
	"fmt"
	"time"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/model"
)

// PrefillOptions configure Prefill.
type PrefillOptions struct {
	SpeedOptions
	Tokens int // prompt length; 0 means 128
	Reps   int // timed repetitions; 0 means 5
	Warmup int // repetitions run first and not timed; 0 means 1, < 0 none
}

// Prefill times prompt processing: Tokens token ids (1, then a fixed
// pseudo-random sequence) go through every layer as one batch from position
// 0 (LayersBatch, what a session does with a prompt), then the final norm and
// classifier run on the last one. Each repetition starts from an empty KV
// cache; warm-up repetitions are not timed, nor is model loading.
func Prefill(w *model.Weights, opts PrefillOptions) (Speed, error) {
	if opts.Tokens == 0 {
		opts.Tokens = 128
	}
	if opts.Reps == 0 {
		opts.Reps = 5
	}
	if opts.Warmup == 0 {
		opts.Warmup = 1
	}
	warm := max(opts.Warmup, 0)
	c := &w.Config
	if opts.Tokens < 1 || opts.Tokens > c.SeqLen {
		return Speed{}, fmt.Errorf("prompt of %d tokens: want 1 to the context length %d", opts.Tokens, c.SeqLen)
	}
	if opts.Reps < 1 {
		return Speed{}, fmt.Errorf("repetitions %d: want at least 1", opts.Reps)
	}
	m, s, err := wholeModel(w)
	if err != nil {
		return Speed{}, err
	}
	defer s.Release() // its KV blocks back to their allocator now, not when collected
	restore := setThreads(opts.Threads)
	defer restore()
	res := Speed{Mode: "prefill", Threads: kernels.Threads(), SIMD: kernels.SIMD(), WeightBytes: WeightBytes(w)}
	if res.BandwidthGBs, err = bandwidth(opts.SpeedOptions, res.Threads); err != nil {
		return Speed{}, err
	}
	tokens := PromptTokens(opts.Tokens, c.VocabSize)
	x := make([]float32, len(tokens)*c.Dim)
	logits := make([]float32, c.VocabSize)
	run := func() error {
		s.Reset()
		for i, tok := range tokens {
			if err := m.Embed(tok, x[i*c.Dim:(i+1)*c.Dim]); err != nil {
				return err
			}
		}
		if err := m.LayersBatch(s, x, 0, len(tokens)); err != nil {
			return err
		}
		return m.Head(x[(len(tokens)-1)*c.Dim:], logits)
	}
	progress(opts.Progress, "prefill: %d tokens, %d warm-up and %d timed repetitions, %d threads", opts.Tokens, warm, opts.Reps, res.Threads)
	for range warm {
		if err := run(); err != nil {
			return Speed{}, err
		}
	}
	start := time.Now()
	for range opts.Reps {
		if err := run(); err != nil {
			return Speed{}, err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.Tokens = opts.Tokens * opts.Reps
	res.TokS = float64(res.Tokens) / res.Seconds
	res.GBs = float64(opts.Reps) / res.Seconds * float64(res.WeightBytes) / 1e9
	res.Fraction = res.GBs / res.BandwidthGBs
	return res, nil
}

// PromptTokens is the benchmark prompt: token 1 (BOS in llama vocabularies),
// then ids from a fixed linear congruential sequence over the vocabulary.
func PromptTokens(n, vocab int) []int {
	t := make([]int, n)
	state := uint32(12345)
	for i := range t {
		if i == 0 {
			t[i] = 1 % vocab
			continue
		}
		state = state*1664525 + 1013904223
		t[i] = int(state>>8) % vocab
	}
	return t
}
