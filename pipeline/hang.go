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
	t := time.NewTicker(max(hang/8, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		oldest, busy := c.oldestWaiter()
		if !busy {
			continue
		}
		now := time.Now()
		for _, sc := range c.stages {
			if sc.gen < wire.PingGeneration {
				continue
			}
			quiet := now.Sub(later(time.Unix(0, sc.heard.Load()), oldest))
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
