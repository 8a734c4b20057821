//go:build !amd64 || purego

package kernels

import "unsafe"

// prefetch is a no-op without an instruction for it.
func prefetch(p unsafe.Pointer, n int) {}
