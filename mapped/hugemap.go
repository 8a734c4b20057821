package mapped

import (
	"unsafe"

	mmap "github.com/edsrzf/mmap-go"
)

// mapHuge maps n bytes of private anonymous memory starting on a
// SlabBytes boundary, advised as transparent huge pages: m is the whole
// mapping (SlabBytes more than n, for the alignment), to unmap; base its
// aligned n bytes.
func mapHuge(n int) (m mmap.MMap, base []byte, err error) {
	m, err = mmap.MapRegion(nil, n+SlabBytes, mmap.COPY, mmap.ANON, 0) // COPY: private, which huge pages need
	if err != nil {
		return nil, nil, err
	}
	addr := uintptr(unsafe.Pointer(&m[0]))
	off := int((SlabBytes - addr%SlabBytes) % SlabBytes)
	base = m[off : off+n : off+n]
	adviseHuge(base)
	return m, base, nil
}
