package kernels

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Parallel runs every item exactly once, with worker numbers below the
// bound and never two concurrent calls on one worker number; also while
// MatVec calls run on other goroutines.
func TestParallel(t *testing.T) {
	defer SetThreads(0)
	for _, th := range []int{1, 2, 3, 8} {
		SetThreads(th)
		for _, n := range []int{0, 1, 2, 7, 100} {
			for _, maxW := range []int{1, 2, 16} {
				counts := make([]atomic.Int32, n)
				busy := make([]atomic.Int32, maxW)
				Parallel(n, maxW, func(w, i int) {
					if w < 0 || w >= maxW {
						t.Errorf("worker %d outside [0, %d)", w, maxW)
						return
					}
					if busy[w].Add(1) != 1 {
						t.Errorf("worker %d used by two calls at once", w)
					}
					counts[i].Add(1)
					busy[w].Add(-1)
				})
				for i := range counts {
					if c := counts[i].Load(); c != 1 {
						t.Fatalf("threads %d, n %d: item %d ran %d times", th, n, i, c)
					}
				}
			}
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			var sum atomic.Int64
			for range 50 {
				Parallel(10, 4, func(_, i int) { sum.Add(int64(i)) })
			}
			if sum.Load() != 50*45 {
				t.Errorf("goroutine %d: sum %d", g, sum.Load())
			}
		})
	}
	wg.Wait()
}
