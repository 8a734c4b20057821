package pipeline

import (
	"testing"
	"time"
)

// The hang watch judges a stage only on silence it saw itself: after its
// own ticks stopped for seconds (the head starved of CPU), the stage gets a
// full threshold from the first tick back, and a stage that stays silent
// after that is still declared hung.
func TestWatchClockDiscountsItsOwnStarvation(t *testing.T) {
	const hang, tick = 400 * time.Millisecond, 50 * time.Millisecond
	t0 := time.Unix(1000, 0)
	w := watchClock{every: tick, last: t0}
	heard, oldest := t0, t0 // the request went out, the stage last spoke, at t0
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	for _, d := range []time.Duration{50, 100, 150, 200} {
		now := at(d * time.Millisecond)
		if late := w.tick(now); late != 0 {
			t.Fatalf("tick at +%v: late by %v, want in time", d*time.Millisecond, late)
		}
		if q := w.quiet(now, heard, oldest); q != d*time.Millisecond {
			t.Fatalf("tick at +%v: quiet %v, want %v", d*time.Millisecond, q, d*time.Millisecond)
		}
	}
	// The watch does not run for 7.4 s; its first tick back is at +7.6 s.
	back := at(7600 * time.Millisecond)
	if late, want := w.tick(back), 7400*time.Millisecond-tick; late != want {
		t.Fatalf("tick after a 7.4 s gap: late by %v, want %v", late, want)
	}
	if q := w.quiet(back, heard, oldest); q != 0 {
		t.Fatalf("quiet right after the watch's own 7.4 s gap: %v, want 0 (the gap is not the stage's)", q)
	}
	// Back to regular ticks, the stage still silent: declared hung once it
	// has been silent for the threshold as the watch saw it, not before.
	for d := tick; d <= hang+tick; d += tick {
		now := back.Add(d)
		if late := w.tick(now); late != 0 {
			t.Fatalf("regular tick at back+%v: late by %v", d, late)
		}
		q := w.quiet(now, heard, oldest)
		if q != d {
			t.Fatalf("back+%v: quiet %v, want %v", d, q, d)
		}
		if hung := q > hang; hung != (d > hang) {
			t.Fatalf("back+%v: hung %v with quiet %v and threshold %v", d, hung, q, hang)
		}
	}
	// A frame heard after the gap counts from itself.
	heard = back.Add(500 * time.Millisecond)
	now := back.Add(600 * time.Millisecond)
	w.tick(now)
	if q := w.quiet(now, heard, oldest); q != 100*time.Millisecond {
		t.Fatalf("quiet 100 ms after a frame: %v", q)
	}
	// A late tick of less than four ticks' gap is jitter, not starvation.
	w.tick(now.Add(4 * tick))
	if q := w.quiet(now.Add(4*tick), heard, oldest); q != 300*time.Millisecond {
		t.Fatalf("quiet after a 200 ms tick: %v, want 300ms (a delay of four ticks is not starvation)", q)
	}
}
