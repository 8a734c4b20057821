package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/batch"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
)

// ErrUnavailable marks a failure of the engine rather than of the request:
// a stage that is down, disconnected or silent. The error's text names it.
var ErrUnavailable = errors.New("model unavailable")

// Topology is what the head knows of the stages and the wire between them.
type Topology = pipeline.Topology

// StageStatus is one stage's state, as the head last saw it.
type StageStatus = pipeline.StageStatus

// Boundary is the wire between two neighbours in the chain.
type Boundary = pipeline.Boundary

// Engine runs the model for the scheduler: the whole model in this process
// (NewLocal) or a chain of stages (Pipeline).
type Engine interface {
	// NewSession opens a session: a KV cache on every stage.
	NewSession(ctx context.Context) (generate.Session, error)
	// Ready returns nil when every stage answers now, else an error naming
	// the first that does not.
	Ready(ctx context.Context) error
	// Topology describes the stages and the wire for status pages and
	// metrics, as last seen; Refresh asks the stages now first.
	Topology() Topology
	Refresh(ctx context.Context)
}

// Pipeline is an Engine over a supervised chain of stages. Every failure it
// reports wraps ErrUnavailable.
func Pipeline(sup *pipeline.Supervisor) Engine { return pipelineEngine{sup} }

type pipelineEngine struct{ sup *pipeline.Supervisor }

func (p pipelineEngine) NewSession(ctx context.Context) (generate.Session, error) {
	s, err := p.sup.NewSession(ctx)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return pipelineSession{s}, nil
}

func (p pipelineEngine) Ready(ctx context.Context) error { return p.sup.Ready(ctx) }
func (p pipelineEngine) Topology() Topology              { return p.sup.Topology() }
func (p pipelineEngine) Refresh(ctx context.Context)     { p.sup.Refresh(ctx) }

// pipelineSession marks a chain's errors as the engine's, not the request's.
type pipelineSession struct{ s *pipeline.Session }

func (ps pipelineSession) Forward(ctx context.Context, tokens []int, pos int, all bool) ([][]float32, error) {
	out, err := ps.s.Forward(ctx, tokens, pos, all)
	return out, unavailable(ctx, err)
}

func (ps pipelineSession) ForwardArgmax(ctx context.Context, tokens []int, pos int) (int, error) {
	id, err := ps.s.ForwardArgmax(ctx, tokens, pos)
	return id, unavailable(ctx, err)
}

func (ps pipelineSession) Close() error { return ps.s.Close() }

// unavailable wraps err with ErrUnavailable, unless the request itself was
// cancelled.
func unavailable(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Local is an Engine holding the whole model in this process. Its sessions
// share a batcher (package batch): every active session's tokens run as one
// step, each weight matrix streamed once per step, each session's results
// bit-identical to running it alone. Their KV caches take blocks from one
// pool as they fill, under an optional byte budget.
type Local struct {
	m       *model.Model
	b       *batch.Batcher
	pool    *model.KVPool
	started time.Time

	sessions atomic.Int64

	mu      sync.Mutex
	lastPos uint64
	lastNs  int64
	perTok  time.Duration
}

// LocalOptions configure NewLocalWith.
type LocalOptions struct {
	Chunk     int   // prompt tokens per session per step (batch.DefaultChunk)
	KVBudget  int64 // bytes of KV cache over all sessions (0: unbounded)
	F16KV     bool  // keys and values stored as f16
	MaxTokens int   // tokens per step (batch.DefaultMaxTokens)
}

// NewLocal returns an engine over m, which must hold every layer, with the
// default options.
func NewLocal(m *model.Model) (*Local, error) { return NewLocalWith(m, LocalOptions{}) }

// NewLocalWith returns an engine over m with o.
func NewLocalWith(m *model.Model, o LocalOptions) (*Local, error) {
	if !m.W.HasEmbedding() || !m.W.HasHead() {
		return nil, fmt.Errorf("a local engine needs the whole model; this part holds layers [%d, %d)", m.W.First, m.W.Last)
	}
	newPool := model.NewKVPool
	if o.F16KV {
		newPool = model.NewKVPoolF16
	}
	pool, err := newPool(o.KVBudget, 0)
	if err != nil {
		return nil, err
	}
	b, err := batch.New(batch.Config{Model: m, Chunk: o.Chunk, MaxTokens: o.MaxTokens})
	if err != nil {
		return nil, err
	}
	return &Local{m: m, b: b, pool: pool, started: time.Now()}, nil
}

// Close stops the batcher; sessions in flight fail.
func (l *Local) Close() error { return l.b.Close() }

// Batcher is the engine's batcher (for its statistics).
func (l *Local) Batcher() *batch.Batcher { return l.b }

// KVPool is the pool of the sessions' KV caches.
func (l *Local) KVPool() *model.KVPool { return l.pool }

// NewSession implements Engine.
func (l *Local) NewSession(ctx context.Context) (generate.Session, error) {
	s, err := l.b.NewSession(l.pool)
	if err != nil {
		return nil, err
	}
	l.sessions.Add(1)
	return &localSession{Session: s, e: l}, nil
}

// Ready implements Engine: the model is in this process.
func (l *Local) Ready(ctx context.Context) error { return nil }

// Refresh implements Engine: the counters are always current.
func (l *Local) Refresh(context.Context) {}

// Topology implements Engine: one in-process stage holding every layer, and
// no wire.
func (l *Local) Topology() Topology {
	c := l.m.Config()
	st := l.b.Stats()
	pos, ns := st.Tokens, int64(st.Busy)
	l.mu.Lock()
	if pos > l.lastPos {
		l.perTok = time.Duration((ns - l.lastNs) / int64(pos-l.lastPos))
		l.lastPos, l.lastNs = pos, ns
	}
	perTok := l.perTok
	l.mu.Unlock()
	n := l.sessions.Load()
	return Topology{Stages: []StageStatus{{
		Addr: "in-process", Name: "local", First: 0, Last: c.NLayers, Up: true,
		ComputeSeconds: float64(ns) / 1e9, Positions: pos, ComputePerToken: perTok,
		Sessions: int(n), KVBytes: uint64(l.pool.Used()),
	}}}
}

type localSession struct {
	*batch.Session
	e      *Local
	closed atomic.Bool
}

func (s *localSession) Close() error {
	if !s.closed.Swap(true) {
		s.e.sessions.Add(-1)
	}
	return s.Session.Close()
}
