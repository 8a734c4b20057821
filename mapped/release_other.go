//go:build !unix

package mapped

// Release is a no-op where madvise is unavailable.
func Release(b []byte) {}
