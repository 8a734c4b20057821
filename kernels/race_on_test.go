//go:build race

package kernels

// raceEnabled: the race detector is on, and sync.Pool drops some of what
// it is given, on purpose.
const raceEnabled = true
