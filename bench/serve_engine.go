package bench

import (
	"context"
	"fmt"
	"github.com/seamlm/seam/codec"
	"log/slog"
	"time"

	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/scheduler"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// ServeSetup is what ServeCurve serves: the whole model in this process
// (Split 0), or Split in-process stages on loopback over Link.
type ServeSetup struct {
	Split int
	// Encoding is the activation encoding between the stages (0: f32);
	// lowrank needs Codecs at every boundary of the split.
	Encoding wire.EncodingID
	Codecs   map[int]*codec.Codec
	Link     link.Config
	Chunk    int  // prompt tokens per session per batched step
	F16KV    bool // f16 KV caches
	Logger   *slog.Logger
}

// ServeCurve runs Serve at each stream count of counts on one engine built
// for w, after a warm-up run of one short stream that is not reported.
func ServeCurve(ctx context.Context, w *model.Weights, id wire.Digest, setup ServeSetup, counts []int, o ServeOptions) ([]ServeResult, error) {
	e, err := newServeEngine(ctx, w, id, setup, &o)
	if err != nil {
		return nil, err
	}
	defer e.close()
	o.Engine, o.Vocab = e.engine, w.Config.VocabSize
	warm := o
	warm.Streams, warm.Output, warm.Progress, warm.LongPrompt = 1, min(8, o.Output), nil, 0
	if _, err := Serve(ctx, warm); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	var out []ServeResult
	for _, n := range counts {
		// With a long prompt, each count runs without it and with it, in
		// alternating order from one count to the next.
		runs := []int{0}
		if o.LongPrompt > 0 {
			runs = []int{0, o.LongPrompt}
			if len(out)%4 == 2 {
				runs = []int{o.LongPrompt, 0}
			}
		}
		for _, long := range runs {
			p := o
			p.Streams, p.LongPrompt = n, long
			r, err := Serve(ctx, p)
			if err != nil {
				return out, fmt.Errorf("%d streams: %w", n, err)
			}
			progress(o.Progress, "%s", r)
			out = append(out, r)
		}
	}
	return out, nil
}

type serveEngine struct {
	engine scheduler.Engine
	close  func()
}

func newServeEngine(ctx context.Context, w *model.Weights, id wire.Digest, setup ServeSetup, o *ServeOptions) (*serveEngine, error) {
	if setup.Logger == nil {
		setup.Logger = slog.New(slog.DiscardHandler)
	}
	if setup.Split == 0 {
		m, err := model.New(w)
		if err != nil {
			return nil, err
		}
		l, err := scheduler.NewLocalWith(m, scheduler.LocalOptions{Chunk: setup.Chunk, F16KV: setup.F16KV})
		if err != nil {
			return nil, err
		}
		o.Busy = func() []time.Duration { return []time.Duration{l.Batcher().Stats().Busy} }
		per := WeightBytes(w)
		o.Steps = func() (uint64, int64) { return l.Batcher().Stats().Steps, per }
		return &serveEngine{engine: l, close: func() { l.Close() }}, nil
	}
	ranges, err := stage.BalancedRanges(w, setup.Split)
	if err != nil {
		return nil, err
	}
	if setup.Encoding == wire.EncodingLowRank {
		for _, r := range ranges[1:] {
			if _, ok := setup.Codecs[r[0]]; !ok {
				return nil, fmt.Errorf("--wire lowrank: the split's boundary at layer %d has no codec attached (the balanced ranges are %v)", r[0], ranges)
			}
		}
	}
	local, err := stage.StartLocal(w, ranges, stage.Config{Identity: id, Link: setup.Link, Timeout: time.Minute, Logger: setup.Logger, MaxSessions: 256}, setup.Codecs)
	if err != nil {
		return nil, err
	}
	sup, err := pipeline.Supervise(ctx, pipeline.Singles(local.Addrs), pipeline.Options{Identity: id, Config: w.Config, Timeout: time.Minute, Link: setup.Link, Logger: setup.Logger,
		Encoding: setup.Encoding, Codecs: codec.Digests(setup.Codecs)},
		pipeline.SupervisorOptions{Poll: time.Hour, Logger: setup.Logger})
	if err != nil {
		local.Close()
		return nil, err
	}
	o.Busy = func() []time.Duration {
		var out []time.Duration
		for _, s := range local.Servers() {
			out = append(out, time.Duration(s.Stats().ComputeNanos))
		}
		return out
	}
	return &serveEngine{engine: scheduler.Pipeline(sup), close: func() { sup.Close(); local.Close() }}, nil
}
