//go:build race

package codec_test

// raceEnabled: the race detector's sync.Pool drops a quarter of what is put
// back (to shake out races), so allocation counts mean nothing under it.
const raceEnabled = true
