package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
)

// ErrDown: the chain of stages is down (a stage is unreachable, or the chain
// failed and is being re-dialled). The error's text names the cause.
var ErrDown = errors.New("the pipeline is down")

// SupervisorOptions configure a Supervisor beyond the chain's Options.
type SupervisorOptions struct {
	// Poll is how often every stage is pinged (for status and metrics) and
	// how soon a lost chain is re-dialled. Default 500 ms.
	Poll time.Duration
	// PingTimeout bounds a ping's answer (health checks). Default
	// min(Options.Timeout, 2 s).
	PingTimeout time.Duration
	Logger      *slog.Logger
	// Spare, when set, finds a stage to take over a position whose every
	// replica has failed (PoolSpares: a pool member the plan left out).
	Spare SpareFunc
}

// Supervisor keeps a chain of stages connected for a long-running head: it
// dials the stages at start, pings them, and when the chain fails (a stage
// died or hung) it closes it and re-dials until the stages are back.
//
// A position of the chain may have replicas: stages holding the same
// layers, tried in order (failover.go). When a position has more than one,
// a session whose chain fails moves to a new chain, with the next replica
// in place of the stage that failed, and replays its tokens through it.
// Without replicas, requests in flight on a failed chain fail with its
// error, naming the stage, and new sessions are refused with ErrDown until
// the chain is back.
type Supervisor struct {
	positions  [][]string // replicas of each position, in layer order
	replicated bool       // some position has more than one
	opts       Options
	sopts      SupervisorOptions
	log        *slog.Logger

	// failMu serialises re-dialling, so that the sessions of a failed
	// chain and the poll loop all end up on the one chain that replaces it.
	failMu    sync.Mutex
	active    []int // the replica in use at each position, under mu
	failovers atomic.Uint64

	mu      sync.Mutex
	chain   *Chain // nil while down
	downErr error  // why the chain is down
	status  []StageStatus
	encs    []string // encoding of each boundary between stages
	lastIDs uint64   // token-id bytes of chains before the current one
	head    Boundary // head -> stage 1, with its rates
	headAt  time.Time
	headPos uint64 // stage 1's positions at headAt
	closed  bool

	stop chan struct{}
	done chan struct{}
}

// Supervise dials the stages at positions (in layer order; each position
// lists its replicas, the first preferred) and keeps them connected until
// Close. The first dial must succeed, with whichever replicas answer.
func Supervise(ctx context.Context, positions [][]string, opts Options, sopts SupervisorOptions) (*Supervisor, error) {
	if sopts.Poll <= 0 {
		sopts.Poll = 500 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if sopts.PingTimeout <= 0 {
		sopts.PingTimeout = min(opts.Timeout, 2*time.Second)
	}
	if sopts.Logger == nil {
		sopts.Logger = slog.Default()
	}
	if opts.Hang == 0 {
		opts.Hang = DefaultHang
	}
	s := &Supervisor{positions: positions, opts: opts, sopts: sopts, log: sopts.Logger, stop: make(chan struct{}), done: make(chan struct{}),
		active: make([]int, len(positions))}
	for i, p := range positions {
		if len(p) == 0 {
			return nil, fmt.Errorf("stage %d has no address", i+1)
		}
		s.replicated = s.replicated || len(p) > 1 || sopts.Spare != nil
	}
	s.failMu.Lock()
	_, err := s.dial(ctx, replicaTries{})
	s.failMu.Unlock()
	if err != nil {
		return nil, err
	}
	s.poll(ctx)
	go s.run()
	return s, nil
}

// adopt makes c the current chain and records the stages it found.
func (s *Supervisor) adopt(c *Chain) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chain, s.downErr = c, nil
	s.status = make([]StageStatus, len(c.stages))
	s.encs = make([]string, len(c.stages))
	for i := range c.stages {
		addr, name, layers := c.stageInfo(i)
		s.status[i] = StageStatus{Index: i, Addr: addr, Name: name, First: int(layers.Start), Last: int(layers.End), Up: true}
		if i < len(s.positions) {
			s.status[i].Replicas = append([]string(nil), s.positions[i]...)
		}
		s.encs[i] = c.opts.Encoding.String()
	}
}

func (s *Supervisor) run() {
	defer close(s.done)
	backoff := s.sopts.Poll
	t := time.NewTimer(s.sopts.Poll)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-s.stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		next := s.sopts.Poll
		if !s.poll(ctx) {
			if _, err := s.recover(ctx, nil, nil); err == nil {
				backoff = s.sopts.Poll
			} else {
				next, backoff = backoff, min(2*backoff, 2*time.Second)
			}
		}
		cancel()
		t.Reset(next)
	}
}

// poll pings every stage of a live chain and records what they say. It
// returns false when there is no live chain.
func (s *Supervisor) poll(ctx context.Context) bool {
	s.mu.Lock()
	c := s.chain
	s.mu.Unlock()
	if c == nil {
		return false
	}
	if err := c.Err(); err != nil {
		s.lose(c, err)
		return false
	}
	s.pingAll(ctx, c, true)
	return true
}

func (s *Supervisor) pingAll(ctx context.Context, c *Chain, rates bool) {
	now := time.Now()
	for i := range c.stages {
		st, rtt, err := c.Ping(ctx, i, s.sopts.PingTimeout)
		s.record(i, now, st, rtt, err, rates)
	}
}

// Refresh pings every stage now, so that the next Topology shows what they
// hold at this moment (a metrics scrape calls it). Rates still come from the
// regular polls.
func (s *Supervisor) Refresh(ctx context.Context) {
	s.mu.Lock()
	c := s.chain
	s.mu.Unlock()
	if c != nil && c.Err() == nil {
		s.pingAll(ctx, c, false)
	}
}

// lose retires a failed chain: its connections are closed (so the stages
// free its sessions) and the supervisor goes down until a re-dial works.
func (s *Supervisor) lose(c *Chain, err error) {
	s.mu.Lock()
	if s.chain == c {
		s.chain, s.downErr = nil, err
		s.lastIDs += c.idBytes.Load()
		for i := range s.status {
			s.status[i].Up = false
			s.status[i].Err = "unknown: the chain failed; re-dialling"
		}
		var se *DialError
		if errors.As(err, &se) && se.Index < len(s.status) {
			s.status[se.Index].Err = err.Error()
		}
	}
	s.mu.Unlock()
	c.Close()
	s.log.Error("pipeline lost; re-dialling the stages", "session", 0, "stage", "head", "err", err)
}

// down records a failed dial in the stages' status.
func (s *Supervisor) down(err error) {
	s.mu.Lock()
	s.downErr = err
	var se *DialError
	for i := range s.status {
		switch {
		case !errors.As(err, &se):
			s.status[i].Up, s.status[i].Err = false, err.Error()
		case i < se.Index:
			s.status[i].Up, s.status[i].Err = true, ""
		case i == se.Index:
			s.status[i].Up, s.status[i].Err = false, err.Error()
		default:
			s.status[i].Up, s.status[i].Err = false, fmt.Sprintf("not tried: stage %d is down", se.Index+1)
		}
	}
	s.mu.Unlock()
	s.log.Warn("stages still down", "session", 0, "stage", "head", "err", err)
}

// readopt makes c, a re-dialled chain, the current one, keeping the last
// known compute figures for rates.
func (s *Supervisor) readopt(c *Chain) {
	old := s.snapshot()
	s.adopt(c)
	s.mu.Lock()
	for i := range s.status {
		if i < len(old) {
			s.status[i].ComputePerToken = old[i].ComputePerToken
		}
	}
	s.mu.Unlock()
}

// record stores stage i's answer to a ping.
func (s *Supervisor) record(i int, now time.Time, st wire.StageStats, rtt time.Duration, err error, rates bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.status) {
		return
	}
	p := &s.status[i]
	switch {
	case errors.Is(err, ErrNoPing):
		p.Up, p.Err = true, ""
		return
	case err != nil:
		p.Up, p.Err = false, err.Error()
		return
	}
	// Rates come from the regular polls only: a refresh between two polls
	// would make a window too short to mean anything.
	if b := p.base; rates && !p.at.IsZero() && st.Positions >= b.Positions && st.ComputeNanos >= b.ComputeNanos && st.DownBytes+st.ResultBytes >= b.DownBytes+b.ResultBytes {
		sent := float64(st.DownBytes + st.ResultBytes - b.DownBytes - b.ResultBytes)
		if dp := st.Positions - b.Positions; dp > 0 {
			p.ComputePerToken = time.Duration((st.ComputeNanos - b.ComputeNanos) / dp)
			p.BytesPerToken = sent / float64(dp)
		}
		if dt := now.Sub(p.at).Seconds(); dt > 0 {
			p.BytesPerSecond = sent / dt
		}
	}
	if rates {
		if i == 0 {
			s.headRates(now, st.Positions)
		}
		p.base, p.at = st, now
	}
	p.Up, p.Err, p.RTT = true, "", rtt
	p.ComputeSeconds, p.Positions = float64(st.ComputeNanos)/1e9, st.Positions
	p.DownBytes, p.ResultBytes, p.KVBytes = st.DownBytes, st.ResultBytes, st.KVBytes
	p.Sessions, p.MaxSessions = int(st.Sessions), int(st.MaxSessions)
	p.Refusals, p.MaxPrefill = st.Refusals, int(st.MaxPrefill)
}

// headRates updates the head -> stage 1 boundary's rates from the token-id
// bytes sent and the positions stage 1 computed since the last poll.
func (s *Supervisor) headRates(now time.Time, positions uint64) {
	ids := s.lastIDs
	if s.chain != nil {
		ids += s.chain.idBytes.Load()
	}
	if !s.headAt.IsZero() && ids >= s.head.Bytes && positions >= s.headPos {
		if dp := positions - s.headPos; dp > 0 {
			s.head.BytesPerToken = float64(ids-s.head.Bytes) / float64(dp)
		}
		if dt := now.Sub(s.headAt).Seconds(); dt > 0 {
			s.head.BytesPerSecond = float64(ids-s.head.Bytes) / dt
		}
	}
	s.head.Bytes, s.headAt, s.headPos = ids, now, positions
}

func (s *Supervisor) snapshot() []StageStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]StageStatus(nil), s.status...)
}

// NewSession opens a session on the current chain, or fails with ErrDown
// (and the reason) while the stages are down. With replicas, a chain that
// is down or fails while the session opens is replaced first.
func (s *Supervisor) NewSession(ctx context.Context) (*Session, error) {
	s.mu.Lock()
	c, down := s.chain, s.downErr
	s.mu.Unlock()
	if c == nil && s.replicated {
		c, down = s.failover(ctx, nil, down)
	}
	if c == nil {
		return nil, fmt.Errorf("%w: %w", ErrDown, down)
	}
	sess, err := c.NewSession(ctx)
	if err != nil && ctx.Err() == nil && c.Err() != nil && s.replicated {
		if c, _ = s.failover(ctx, c, c.Err()); c != nil {
			sess, err = c.NewSession(ctx)
		}
	}
	if err != nil && ctx.Err() == nil && c != nil {
		if cerr := c.Err(); cerr != nil {
			err = cerr
		}
	}
	if sess != nil {
		sess.sup = s
	}
	return sess, err
}

// Ready pings every stage now and returns nil when all answer, else an error
// naming the first that does not.
func (s *Supervisor) Ready(ctx context.Context) error {
	s.mu.Lock()
	c, down := s.chain, s.downErr
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("%w: %w", ErrDown, down)
	}
	if err := c.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrDown, err)
	}
	for i := range c.stages {
		if _, _, err := c.Ping(ctx, i, s.sopts.PingTimeout); err != nil && !errors.Is(err, ErrNoPing) {
			return err
		}
	}
	return nil
}

// Topology describes the stages and the boundaries as last seen.
func (s *Supervisor) Topology() Topology {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := Topology{Stages: append([]StageStatus(nil), s.status...), Failovers: s.failovers.Load()}
	if s.chain == nil && s.downErr != nil {
		t.Err = s.downErr.Error()
	}
	ids := s.lastIDs
	if s.chain != nil {
		ids += s.chain.idBytes.Load()
	}
	n := len(s.status)
	t.Boundaries = append(t.Boundaries, Boundary{From: "head", To: "stage 1", Encoding: "token ids", Bytes: ids,
		BytesPerToken: s.head.BytesPerToken, BytesPerSecond: s.head.BytesPerSecond})
	for i, st := range s.status {
		b := Boundary{From: fmt.Sprintf("stage %d", i+1), To: fmt.Sprintf("stage %d", i+2), Encoding: s.encs[i],
			Bytes: st.DownBytes, BytesPerToken: st.BytesPerToken, BytesPerSecond: st.BytesPerSecond}
		if i == n-1 {
			b.To, b.Encoding, b.Bytes = "head", "logits f32 / token ids", st.ResultBytes
		}
		t.Boundaries = append(t.Boundaries, b)
	}
	return t
}

// Close stops supervising and closes the chain.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	c := s.chain
	s.chain, s.downErr = nil, errors.New("shutting down")
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
	return nil
}

// Topology is what a head knows of its stages and the wire between them.
type Topology struct {
	Stages     []StageStatus
	Boundaries []Boundary // head -> stage 1, stage 1 -> stage 2, ..., stage n -> head
	Err        string     // why the chain is down, when it is
	Failovers  uint64     // sessions moved to a replica and replayed, since start
}

// StageStatus is one stage as the head last saw it. Counters are the
// stage's own, cumulative since it started; rates are over the last poll.
type StageStatus struct {
	Index           int // 0-based, in layer order
	Addr, Name      string
	Replicas        []string // every address of the position, Addr among them
	First, Last     int      // layers [First, Last)
	Up              bool
	Err             string        // why it is not up
	RTT             time.Duration // the last ping's round trip
	ComputeSeconds  float64
	Positions       uint64
	ComputePerToken time.Duration // compute time per position over the last poll with work
	DownBytes       uint64        // sent to the next stage
	ResultBytes     uint64        // results sent to heads
	BytesPerToken   float64       // sent per position, last poll with work
	BytesPerSecond  float64       // sent per second, last poll
	Sessions        int
	MaxSessions     int
	KVBytes         uint64
	// Refusals are the stage's counts of what it refused, by limit, and
	// MaxPrefill its prefill limit: from stages of generation 4 on, zero
	// before.
	Refusals   wire.Refusals
	MaxPrefill int

	at   time.Time       // the last regular poll: the base of the rates
	base wire.StageStats // what the stage said then
}

// Boundary is the wire between two neighbours of the chain.
type Boundary struct {
	From, To       string
	Encoding       string
	Bytes          uint64 // cumulative
	BytesPerToken  float64
	BytesPerSecond float64
}

// KVBytes is the KV cache one session takes on layers [first, last) of a
// model of shape c (keys and values, float32, the whole context).
func KVBytes(c *model.Config, first, last int) int64 {
	return int64(last-first) * int64(c.SeqLen) * int64(c.KVDim()) * 2 * 4
}
