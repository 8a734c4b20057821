package mapped

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages over b (the kernel's
// "madvise" mode, a common default, gives them only where asked).
func adviseHuge(b []byte) {
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice only: without it b faults in 4 KiB pages
}
