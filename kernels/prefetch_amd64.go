//go:build amd64 && !purego

package kernels

import "unsafe"

// prefetch asks for the cache lines of [p, p+n) to be brought into the
// caches (PREFETCHT0 every 64 bytes). It never faults.
//
//go:noescape
func prefetch(p unsafe.Pointer, n int)
