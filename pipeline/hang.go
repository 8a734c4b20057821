package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/seamlm/seam/wire"
)

// DefaultHang is Options.Hang's default: four heartbeats of a stage at its
// default (stage.DefaultHeartbeat), so that a loaded machine's late
// heartbeat is not taken for a hang, and a stopped stage is named within
// about 4.5 s.
const DefaultHang = 4 * time.Second

// HangError: a stage stayed silent past Options.Hang while a request
// waited. The stage's connection may still be open (a stopped process, a
// machine that froze, a link that drops everything).
type HangError struct {
	Index int    // 0-based, in layer order
	Stage string // the stage as the head names it
	Quiet time.Duration
	After time.Duration // the threshold, Options.Hang
}

func (e *HangError) Error() string {
	return fmt.Sprintf("%s hung: nothing heard from it for %v while a request waited (the head's --hang is %v)",
		e.Stage, e.Quiet.Round(time.Millisecond), e.After)
}

// LostError: the connection to a stage ended or failed.
type LostError struct {
	Index int
	Stage string
	Err   error
}

func (e *LostError) Error() string { return fmt.Sprintf("%s: connection lost: %v", e.Stage, e.Err) }
func (e *LostError) Unwrap() error { return e.Err }

// watch declares a stage hung when it has been silent for Options.Hang
// while some request waited, counting from the later of the stage's last
// frame and the oldest waiting request. Only the last stage answers a
// request; the others are pinged once they have been quiet for half the
// threshold, and answer at once when idle or send heartbeats while they
// compute. Stages of generation 1 cannot be pinged and are not watched.
func (c *Chain) watch() {
	hang := c.opts.Hang
	tick := max(hang/8, 5*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	clock := watchClock{every: tick, last: time.Now()}
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		now := time.Now()
		if late := clock.tick(now); late > 0 {
			c.log.Warn("hang watch ran late: the head was starved of CPU; stages get a full --hang from now before any is declared hung",
				"session", 0, "stage", "head", "late", late.String(), "hang", hang.String())
		}
		oldest, busy := c.oldestWaiter()
		if !busy {
			continue
		}
		for _, sc := range c.stages {
			if sc.gen < wire.PingGeneration {
				continue
			}
			quiet := clock.quiet(now, time.Unix(0, sc.heard.Load()), oldest)
			switch {
			case quiet > hang:
				err := &HangError{Index: sc.index, Stage: sc.String(), Quiet: quiet, After: hang}
				c.log.Error("stage hung", "session", 0, "stage", sc.index+1, "name", sc.name, "quiet", quiet.String(), "hang", hang.String())
				c.fail(err)
				return
			case quiet > hang/2 && now.Sub(time.Unix(0, sc.pinged.Load())) > hang/4:
				sc.pinged.Store(now.UnixNano())
				// Its answer, like any frame from the stage, counts as heard.
				go c.Ping(context.Background(), sc.index, hang)
			}
		}
	}
}

// watchClock is the hang watch's sense of time. A stage is judged only on
// silence the watch itself saw. When a tick comes more than four ticks
// after the one before (half the threshold, or 20 ms for thresholds under
// 40 ms), the head's process was starved of CPU: its goroutines, the
// readers of the stages' frames among them, did not run, so the silence
// before that tick proves nothing about the stages, and it counts from the
// tick instead. Four ticks, not one: a loaded machine delays timers by some
// milliseconds without starving anything. A head so starved that every
// tick comes that late cannot judge its stages at all, and logs each late
// tick. (A CI run once declared an idle stage hung after "7.48s" of silence
// with a 400 ms threshold: the watch had not run for seconds, and its first
// tick back saw the whole gap at once.)
type watchClock struct {
	every   time.Duration // the ticks' period
	last    time.Time     // the previous tick
	resumed time.Time     // the last tick that came late
}

// tick records a tick at now. When it came more than four ticks after the
// previous one it returns how late it came (the gap less one period);
// otherwise 0.
func (w *watchClock) tick(now time.Time) time.Duration {
	gap := now.Sub(w.last)
	w.last = now
	if gap <= 4*w.every {
		return 0
	}
	w.resumed = now
	return gap - w.every
}

// quiet is how long a stage last heard from at heard has been silent while
// a request sent at oldest waited, as the watch saw it.
func (w *watchClock) quiet(now, heard, oldest time.Time) time.Duration {
	return now.Sub(later(later(heard, oldest), w.resumed))
}

// oldestWaiter is when the longest-waiting request was sent.
func (c *Chain) oldestWaiter() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest time.Time
	for _, w := range c.waiters {
		if oldest.IsZero() || w.since.Before(oldest) {
			oldest = w.since
		}
	}
	return oldest, !oldest.IsZero()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
