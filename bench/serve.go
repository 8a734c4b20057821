package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/scheduler"
)

// ServeOptions configure Serve: Streams concurrent greedy generations, each
// a prompt of Prompt tokens and Output generated tokens, on Engine.
type ServeOptions struct {
	Engine  scheduler.Engine
	Vocab   int
	Streams int
	Prompt  int // prompt tokens per stream
	Output  int // generated tokens per stream
	// Busy, when set, returns each stage's cumulative compute time, for
	// the stages' utilisation (busy time over the run's wall time).
	Busy func() []time.Duration
	// Steps, when set, returns the batched steps run so far and the weight
	// bytes one step streams, for the GB/s of weights streamed.
	Steps func() (steps uint64, bytesPerStep int64)
	// LongPrompt, when > 0, adds one more stream once the first stream is
	// half way through its output: a prompt of LongPrompt tokens and one
	// generated token, arriving mid-load. It is left out of the figures but
	// its time to first token (LongTTFT), so that they show what the
	// others suffer from it.
	LongPrompt int
	// Timeout bounds the whole run (default 10 minutes).
	Timeout  time.Duration
	Progress io.Writer
}

// ServeResult is what Serve measured. JSON names are stable: scripts and
// docs/benchmarks.md read them.
type ServeResult struct {
	Streams int     `json:"streams"`
	Prompt  int     `json:"prompt_tokens"`
	Output  int     `json:"output_tokens"`
	Seconds float64 `json:"seconds"` // wall time from the first request to the last token
	// TokS is the generated tokens of every stream over Seconds.
	TokS float64 `json:"tok_s"`
	// StreamTokS is the median over streams of a stream's generated tokens
	// over its own time from request to last token.
	StreamTokS float64 `json:"stream_tok_s"`
	TTFTp50    float64 `json:"ttft_p50_ms"` // request to first generated token
	TTFTp99    float64 `json:"ttft_p99_ms"`
	ITLp50     float64 `json:"itl_p50_ms"` // between consecutive generated tokens, all streams
	ITLp99     float64 `json:"itl_p99_ms"`
	// ITLWorstP99 is the largest of the streams' own p99 inter-token
	// latencies, and ITLWorstRatio it over ITLp50: fairness.
	ITLWorstP99   float64   `json:"itl_worst_stream_p99_ms"`
	ITLWorstRatio float64   `json:"itl_worst_stream_p99_over_p50"`
	Utilisation   []float64 `json:"stage_utilisation"` // busy fraction per stage
	Steps         uint64    `json:"steps,omitempty"`   // batched steps in the run
	GBs           float64   `json:"weights_gb_s,omitempty"`
	// PrefillTokS is every stream's prompt tokens over the time from the
	// first request to the last stream's first token: the prompt rate
	// with all streams prefilling at once.
	PrefillTokS float64 `json:"prefill_tok_s"`
	LongPrompt  int     `json:"long_prompt_tokens,omitempty"` // the prompt that arrived mid-load
	LongTTFT    float64 `json:"long_prompt_ttft_ms,omitempty"`
}

// String is a human summary.
func (r ServeResult) String() string {
	util := make([]string, len(r.Utilisation))
	for i, u := range r.Utilisation {
		util[i] = fmt.Sprintf("%.0f%%", 100*u)
	}
	s := fmt.Sprintf("%d streams x (%d prompt + %d generated): %.1f tok/s aggregate, %.1f tok/s per stream (median); TTFT p50 %.1f ms p99 %.1f ms; inter-token p50 %.1f ms p99 %.1f ms (worst stream's p99 %.1f ms, %.2fx); stage busy %s",
		r.Streams, r.Prompt, r.Output, r.TokS, r.StreamTokS, r.TTFTp50, r.TTFTp99, r.ITLp50, r.ITLp99, r.ITLWorstP99, r.ITLWorstRatio, strings.Join(util, " "))
	if r.Steps > 0 {
		s += fmt.Sprintf("; %d steps, %.1f GB/s of weights", r.Steps, r.GBs)
	}
	if r.LongPrompt > 0 {
		s += fmt.Sprintf("; a %d-token prompt arrived mid-load, first token after %.1f ms", r.LongPrompt, r.LongTTFT)
	}
	return s
}

// stream is one generation's timings.
type stream struct {
	start, first, last time.Time
	gaps               []time.Duration
	err                error
}

// Serve runs the streams at once and measures them. Each stream's prompt is
// its own (token ids offset by the stream's index), so no two sessions
// compute the same thing.
func Serve(ctx context.Context, o ServeOptions) (ServeResult, error) {
	if o.Streams < 1 || o.Prompt < 1 || o.Output < 1 {
		return ServeResult{}, fmt.Errorf("streams %d, prompt %d, output %d: want each at least 1", o.Streams, o.Prompt, o.Output)
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	progress(o.Progress, "serve: %d streams of %d prompt + %d generated tokens", o.Streams, o.Prompt, o.Output)
	var busy0 []time.Duration
	if o.Busy != nil {
		busy0 = o.Busy()
	}
	var steps0 uint64
	if o.Steps != nil {
		steps0, _ = o.Steps()
	}
	streams := make([]stream, o.Streams)
	var wg sync.WaitGroup
	half := make(chan struct{})
	var halfOnce sync.Once
	t0 := time.Now()
	for i := range streams {
		wg.Go(func() {
			var mark func(int)
			if i == 0 {
				mark = func(k int) {
					if k >= o.Output/2 {
						halfOnce.Do(func() { close(half) })
					}
				}
			}
			streams[i] = runStream(ctx, o, i, o.Prompt, o.Output, mark)
			halfOnce.Do(func() { close(half) })
		})
	}
	var long stream
	if o.LongPrompt > 0 {
		wg.Go(func() {
			<-half
			long = runStream(ctx, o, o.Streams, o.LongPrompt, 1, nil)
		})
	}
	wg.Wait()
	if long.err != nil {
		return ServeResult{}, fmt.Errorf("the %d-token prompt: %w", o.LongPrompt, long.err)
	}
	wall := time.Since(t0)
	for i, s := range streams {
		if s.err != nil {
			return ServeResult{}, fmt.Errorf("stream %d: %w", i+1, s.err)
		}
	}
	r := summarize(o, streams, wall)
	if o.LongPrompt > 0 {
		r.LongPrompt, r.LongTTFT = o.LongPrompt, ms(long.first.Sub(long.start))
	}
	if o.Busy != nil {
		for i, b := range o.Busy() {
			if i < len(busy0) {
				r.Utilisation = append(r.Utilisation, min(1, (b-busy0[i]).Seconds()/wall.Seconds()))
			}
		}
	}
	if o.Steps != nil {
		steps, per := o.Steps()
		r.Steps = steps - steps0
		r.GBs = float64(r.Steps) * float64(per) / wall.Seconds() / 1e9
	}
	return r, nil
}

// runStream prefills one stream's prompt of prompt tokens and decodes
// greedily to output tokens, calling mark (when set) after each.
func runStream(ctx context.Context, o ServeOptions, i, promptLen, output int, mark func(int)) (s stream) {
	s.start = time.Now()
	sess, err := o.Engine.NewSession(ctx)
	if err != nil {
		s.err = err
		return s
	}
	defer sess.Close()
	prompt := make([]int, promptLen)
	for p := range prompt {
		prompt[p] = 1 + (i*7919+p*31)%(o.Vocab-1)
	}
	next, err := forwardArgmax(ctx, sess, prompt, 0)
	if err != nil {
		s.err = err
		return s
	}
	s.first = time.Now()
	last := s.first
	for k := 1; k < output; k++ {
		if next, err = forwardArgmax(ctx, sess, []int{next}, promptLen+k-1); err != nil {
			s.err = fmt.Errorf("token %d: %w", k+1, err)
			return s
		}
		now := time.Now()
		s.gaps = append(s.gaps, now.Sub(last))
		last = now
		if mark != nil {
			mark(k)
		}
	}
	s.last = last
	return s
}

func forwardArgmax(ctx context.Context, s generate.Session, tokens []int, pos int) (int, error) {
	if a, ok := s.(generate.ArgmaxSession); ok {
		return a.ForwardArgmax(ctx, tokens, pos)
	}
	l, err := s.Forward(ctx, tokens, pos, false)
	if err != nil {
		return 0, err
	}
	return sample.Argmax(l[0]), nil
}

func summarize(o ServeOptions, streams []stream, wall time.Duration) ServeResult {
	r := ServeResult{Streams: o.Streams, Prompt: o.Prompt, Output: o.Output, Seconds: wall.Seconds()}
	r.TokS = float64(o.Streams*o.Output) / wall.Seconds()
	var ttft, gaps, rates []float64
	var worst float64
	var firstStart, lastFirst time.Time
	for _, s := range streams {
		if s.first.After(lastFirst) {
			lastFirst = s.first
		}
		if firstStart.IsZero() || s.start.Before(firstStart) {
			firstStart = s.start
		}
		ttft = append(ttft, ms(s.first.Sub(s.start)))
		rates = append(rates, float64(o.Output)/s.last.Sub(s.start).Seconds())
		var own []float64
		for _, g := range s.gaps {
			own = append(own, ms(g))
		}
		gaps = append(gaps, own...)
		if len(own) > 0 {
			worst = max(worst, quantile(own, 0.99))
		}
	}
	r.TTFTp50, r.TTFTp99 = quantile(ttft, 0.5), quantile(ttft, 0.99)
	if len(streams) > 0 {
		if d := lastFirst.Sub(firstStart); d > 0 {
			r.PrefillTokS = float64(o.Streams*o.Prompt) / d.Seconds()
		}
	}
	r.StreamTokS = quantile(rates, 0.5)
	if len(gaps) > 0 {
		r.ITLp50, r.ITLp99 = quantile(gaps, 0.5), quantile(gaps, 0.99)
		r.ITLWorstP99 = worst
		if r.ITLp50 > 0 {
			r.ITLWorstRatio = worst / r.ITLp50
		}
	}
	return r
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// quantile is the q-quantile of v by the nearest rank.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(len(s)-1, i))]
}
