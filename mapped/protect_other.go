//go:build !unix

package mapped

// protectRead is a no-op where mprotect is not available.
func protectRead(b []byte) error { return nil }
