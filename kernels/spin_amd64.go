//go:build amd64 && !purego

package kernels

// spinPause executes the PAUSE instruction n times: the delay between two
// polls of spinUntil. PAUSE tells the core that it is spinning, so a poll
// costs less power and, when the polled line changes, no pipeline flush.
func spinPause(n int)
