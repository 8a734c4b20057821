//go:build race

package model_test

// raceEnabled: the race detector is on; it allocates, and sync.Pool drops
// some of what it is given, on purpose.
const raceEnabled = true
