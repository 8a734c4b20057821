//go:build unix

package mapped

import "golang.org/x/sys/unix"

// protectRead makes b read-only.
func protectRead(b []byte) error { return unix.Mprotect(b, unix.PROT_READ) }
