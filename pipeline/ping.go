package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seamlm/seam/wire"
)

// DialError is a failure to reach or handshake with one stage.
type DialError struct {
	Index int // 0-based, in layer order
	Addr  string
	Err   error
}

func (e *DialError) Error() string {
	// auth's errors begin with the address already: say it once.
	msg := strings.TrimPrefix(e.Err.Error(), e.Addr+": ")
	return fmt.Sprintf("stage %d (%s): %s", e.Index+1, e.Addr, msg)
}
func (e *DialError) Unwrap() error { return e.Err }

// ErrNoPing: the stage speaks a protocol generation without Ping frames,
// so the head can tell only that its connection is open.
var ErrNoPing = errors.New("the stage's protocol generation has no ping")

// forget drops the waiter of an abandoned request.
func (c *Chain) forget(req uint64) {
	c.mu.Lock()
	delete(c.waiters, req)
	c.mu.Unlock()
}

func pingAnswer(sc *stageConn, f *wire.Frame) event {
	st, err := f.StageStats()
	if err != nil {
		return event{err: fmt.Errorf("%v: ping answer: %w", sc, err)}
	}
	return event{stats: st}
}

// Ping asks stage i (0-based) for its stats and measures the round trip. A
// stage that does not answer within timeout is reported, but the chain is
// not failed for it: requests have their own timeout.
func (c *Chain) Ping(ctx context.Context, i int, timeout time.Duration) (wire.StageStats, time.Duration, error) {
	sc := c.stages[i]
	if sc.gen < wire.PingGeneration {
		return wire.StageStats{}, 0, fmt.Errorf("%v: %w", sc, ErrNoPing)
	}
	req, ch := c.expect()
	t0 := time.Now()
	if err := c.send(sc, func(fr *wire.Framer) error { return fr.WritePing(req, nil) }); err != nil {
		c.forget(req)
		return wire.StageStats{}, 0, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case ev := <-ch:
		return ev.stats, time.Since(t0), ev.err
	case <-t.C:
		c.forget(req)
		return wire.StageStats{}, 0, fmt.Errorf("%v did not answer a ping within %v", sc, timeout)
	case <-ctx.Done():
		c.forget(req)
		return wire.StageStats{}, 0, ctx.Err()
	}
}

// Err is the chain's failure, or nil while it is usable.
func (c *Chain) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}

// stageInfo is what the head learned of stage i at the handshake.
func (c *Chain) stageInfo(i int) (addr, name string, layers wire.LayerRange) {
	sc := c.stages[i]
	return sc.addr, sc.name, sc.layers
}

// silentStages pings every stage when a reply is overdue and returns an
// error naming those that do not answer within a quarter of the timeout (at
// most 2 s), or nil when all answer: a reply that never comes is stuck at a
// stage that has gone silent, and the error must say which.
func (c *Chain) silentStages() error {
	d := min(c.opts.Timeout/4, 2*time.Second)
	type answer struct {
		i   int
		err error
	}
	answers := make(chan answer, len(c.stages)) // buffered: a late answer never blocks
	for i := range c.stages {
		go func() {
			_, _, err := c.Ping(context.Background(), i, d)
			answers <- answer{i, err}
		}()
	}
	silent := make([]string, len(c.stages))
	for _, sc := range c.stages { // until it answers; a ping stuck in sending never does
		silent[sc.index] = fmt.Sprintf("%v did not answer a ping within %v", sc, d)
	}
	t := time.NewTimer(d + d/4)
	defer t.Stop()
wait:
	for range c.stages {
		select {
		case a := <-answers:
			silent[a.i] = ""
			if a.err != nil && !errors.Is(a.err, ErrNoPing) {
				silent[a.i] = a.err.Error()
			}
		case <-t.C:
			break wait
		}
	}
	var named []string
	for _, s := range silent {
		if s != "" {
			named = append(named, s)
		}
	}
	if len(named) == 0 {
		return nil
	}
	return errors.New(strings.Join(named, "; "))
}

// learnLimits asks every stage that speaks generation 4 or later for its
// prefill limit, so that the head sends a longer prompt in several frames
// rather than have it refused.
func (c *Chain) learnLimits(ctx context.Context) error {
	for i, sc := range c.stages {
		if sc.gen < wire.RefusalsGeneration {
			continue
		}
		st, _, err := c.Ping(ctx, i, c.opts.Timeout)
		if err != nil {
			return fmt.Errorf("asking for its limits: %w", err)
		}
		if st.MaxPrefill > 0 {
			c.maxPrefill = min(c.maxPrefill, int(st.MaxPrefill))
		}
	}
	return nil
}
