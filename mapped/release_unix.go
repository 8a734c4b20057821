//go:build unix

package mapped

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Release tells the kernel that the pages of b, a slice of a mapped file,
// are not needed for now. Their memory stops counting as this process's
// resident memory (the data stays in the page cache and is read back on the
// next access). Streaming importers call it after each tensor so that their
// peak resident size is about one tensor, whatever the file's size.
func Release(b []byte) {
	if len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	addr := uintptr(unsafe.Pointer(&b[0]))
	// Only whole pages inside b: skip up to the first page boundary, stop at the last.
	lo := int((page - addr%page) % page)
	hi := len(b) - int((addr+uintptr(len(b)))%page)
	if hi <= lo {
		return
	}
	_ = unix.Madvise(b[lo:hi], unix.MADV_DONTNEED) // advice only: a failure costs memory, not correctness
}
