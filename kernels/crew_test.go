package kernels

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seamlm/seam/tensor"
)

// crewSteps runs, through crew c (nil: the package functions), the kind of
// sequence a forward pass makes: products of one vector (split by ranges)
// and of several (chunks, and the integer tile's), quantized and f32, one product and three
// sharing an input, and Parallel calls; it returns every output.
func crewSteps(t *testing.T, c *Crew) [][]float32 {
	t.Helper()
	q := goldenTensor(tensor.Q4_0, 768, 512, 11)
	k := goldenTensor(tensor.Q8_0, 256, 512, 12)
	f := goldenTensor(tensor.F32, 300, 512, 13)
	x := make([]float32, 40*512)
	for i := range x {
		x[i] = float32(i%17)*0.07 - 0.5
	}
	var outs [][]float32
	out := func(n int) []float32 {
		o := make([]float32, n)
		outs = append(outs, o)
		return o
	}
	// 40 vectors: their quantizing and packing for the integer tile are
	// spread over the threads too, in the crew.
	for _, n := range []int{1, 3, 40} {
		c.MatMuls([]Product{{Out: out(n * q.Rows), W: q}, {Out: out(n * k.Rows), W: k}, {Out: out(n * f.Rows), W: f}}, x[:n*512], n)
		c.MatMul(out(n*q.Rows), q, x[:n*512], n)
		items := out(40)
		c.Parallel(len(items), 4, func(_, i int) { items[i] = float32(i * i) })
		c.MatMul(out(n*f.Rows), f, x[:n*512], n)
	}
	return outs
}

// settleHelpers waits until every helper has taken what its mailbox held
// (a plain call's job, left there when the caller did every piece itself)
// and, with parked, until every helper is parked.
func settleHelpers(t *testing.T, parked bool) []*helper {
	t.Helper()
	hs := pool.ensure(1)
	deadline := time.Now().Add(10 * time.Second)
	for i, h := range hs {
		for h.slot.Load() != nil || (parked && !h.parked.Load()) {
			if time.Now().After(deadline) {
				t.Fatalf("helper %d: mailbox full %v, parked %v after 10 s", i, h.slot.Load() != nil, h.parked.Load())
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return hs
}

// A crew's products and Parallel calls give exactly the package functions'
// results, at every thread count (more members than a Parallel call
// allows workers included), and a crew leaves the helpers free for plain
// calls once it ends.
func TestCrewMatchesPackageCalls(t *testing.T) {
	defer SetThreads(0)
	SetThreads(1)
	want := crewSteps(t, nil)
	for _, th := range []int{1, 2, 3, 8} {
		SetThreads(th)
		for round := range 20 {
			c := BeginCrew()
			if (c == nil) != (th == 1) {
				t.Fatalf("threads %d: BeginCrew returned %v", th, c)
			}
			got := crewSteps(t, c)
			c.End()
			for i := range want {
				for r := range want[i] {
					if !sameBits(got[i][r], want[i][r]) {
						t.Fatalf("threads %d, round %d, output %d, value %d: %v in a crew, %v alone", th, round, i, r, got[i][r], want[i][r])
					}
				}
			}
		}
		plain := crewSteps(t, nil)
		for i := range want {
			for r := range want[i] {
				if !sameBits(plain[i][r], want[i][r]) {
					t.Fatalf("threads %d, after the crews: output %d, value %d: %v, want %v", th, i, r, plain[i][r], want[i][r])
				}
			}
		}
	}
}

// Members really share a crew's steps: two items of a Parallel call in a
// crew of two threads wait for each other, which only two goroutines
// running them at once can satisfy. Worker numbers stay below the call's
// bound with more members than it allows.
func TestCrewMembersWorkTogether(t *testing.T) {
	defer SetThreads(0)
	// Members must not leave for want of steps while the machine is busy
	// with other tests: no item would then wait for its partner in vain.
	saved := workerSpin.Load()
	defer workerSpin.Store(saved)
	workerSpin.Store(int64(2 * time.Second))
	SetThreads(2)
	settleHelpers(t, false) // else the crew may find every mailbox full
	c := BeginCrew()
	defer c.End()
	for step := range 50 {
		var arrived atomic.Int32
		met := true
		c.Parallel(2, 2, func(w, _ int) {
			arrived.Add(1)
			deadline := time.Now().Add(5 * time.Second)
			for arrived.Load() < 2 {
				if time.Now().After(deadline) {
					met = false
					return
				}
			}
		})
		if !met {
			t.Fatalf("step %d: no member took the crew's second item within 5 s", step)
		}
	}
	SetThreads(4)
	settleHelpers(t, false)
	c4 := BeginCrew()
	defer c4.End()
	for step := range 50 {
		var busy [2]atomic.Int32
		c4.Parallel(16, 2, func(w, _ int) {
			if w < 0 || w >= 2 {
				t.Errorf("step %d: worker %d outside [0, 2)", step, w)
				return
			}
			if busy[w].Add(1) != 1 {
				t.Errorf("step %d: worker %d used by two calls at once", step, w)
			}
			// Long enough, yielding, for the other members to arrive.
			for end := time.Now().Add(100 * time.Microsecond); time.Now().Before(end); {
				runtime.Gosched()
			}
			busy[w].Add(-1)
		})
	}
}

// A crew whose helpers never come (every mailbox full) still finishes
// every step on its caller, and a helper that takes the crew after it
// ended leaves it at once; the crew is recycled only then.
func TestCrewWithoutMembers(t *testing.T) {
	defer SetThreads(0)
	SetThreads(1)
	want := crewSteps(t, nil)
	SetThreads(2)
	// Parked helpers keep what is put in their mailboxes until woken.
	saved := workerSpin.Load()
	defer workerSpin.Store(saved)
	workerSpin.Store(0)
	helpers := settleHelpers(t, true)
	time.Sleep(time.Millisecond) // a stale wake-up pending is taken by now
	blocker := newJob()
	for _, h := range helpers {
		blocker.refs.Add(1)
		h.slot.Store(blocker)
	}
	t.Cleanup(func() { // also when the test fails
		for _, h := range helpers {
			if h.slot.CompareAndSwap(blocker, nil) {
				blocker.unref()
			}
		}
	})
	c := BeginCrew()
	got := crewSteps(t, c)
	c.End()
	for i := range want {
		for r := range want[i] {
			if !sameBits(got[i][r], want[i][r]) {
				t.Fatalf("output %d, value %d: %v with no member, %v alone", i, r, got[i][r], want[i][r])
			}
		}
	}
	if c.joined.Load() != 0 {
		t.Fatalf("%d members counted with every mailbox full", c.joined.Load())
	}

	// A crew handed to a helper that takes it only after it ended.
	c = BeginCrew() // passed over: every mailbox still holds the blocker
	carrier := c.carrier
	carrier.refs.Add(1)
	c.joined.Add(1)
	if !helpers[0].slot.CompareAndSwap(blocker, carrier) {
		t.Fatal("helper 0's mailbox no longer holds the blocker")
	}
	c.End()
	helpers[0].wake <- struct{}{}
	blocker.unref() // helper 0's hold, given up by the swap
	for i, h := range helpers[1:] {
		if h.slot.Load() != blocker {
			t.Fatalf("helper %d took the job left in its mailbox without a wake-up", i+1)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.ended.Load() { // recycle clears it
		if time.Now().After(deadline) {
			t.Fatal("a crew taken after its end was not recycled within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
