//go:build !amd64 || purego

package kernels

// loopsPerPause makes one unit of spinPause take about what one x86 PAUSE
// does on the Zen 5 that spinUntil's polling was tuned on (18 ns): an empty
// loop iteration takes about a cycle. With one iteration per unit, as
// before, spinPause(8) took 1.9 ns against PAUSE's 152 (2026-12-04, the
// purego build on that machine), so a helper polled for work for about
// 0.1 µs instead of 9.5 before yielding to the scheduler, and yielded that
// much more often.
const loopsPerPause = 64

// spinPause delays a polling loop by about n PAUSEs (the compiler keeps an
// empty loop).
func spinPause(n int) {
	for i := 0; i < n*loopsPerPause; i++ {
	}
}
