package mapped

import (
	"fmt"
	"math"
	"unsafe"

	mmap "github.com/edsrzf/mmap-go"
)

// arenaAlign is where each copy in an Arena starts: a cache line, so that
// the kernels' loads of a row never straddle one more line than they must.
const arenaAlign = 64

// Arena holds copies of several buffers in one private anonymous mapping,
// aligned to 2 MiB and advised as transparent huge pages, then made
// read-only.
//
// Why: a forward pass streams every weight matrix once per token. Read
// from the model file's mapping, each 4 KiB page costs a TLB miss and a
// page walk per token (a 110 M-parameter model is some 35,000 pages), which
// in a virtual machine walks two sets of tables. From 2 MiB pages the same
// bytes are 70 walks: f32 decode ran 14-19 % faster on the development VM,
// quantized 0-9 % (docs/performance.md, weights in huge pages).
type Arena struct {
	m     mmap.MMap
	bytes int64
}

// NewArena copies bufs into a new arena and returns the copies, in order,
// each starting on a 64-byte boundary. The sources are not touched
// afterwards; releasing them (Release) is the caller's choice.
func NewArena(bufs [][]byte) (*Arena, [][]byte, error) {
	total := 0
	for i, b := range bufs {
		start := (total + arenaAlign - 1) &^ (arenaAlign - 1)
		if len(b) > math.MaxInt-SlabBytes-start {
			return nil, nil, fmt.Errorf("arena: buffer %d of %d bytes overflows the arena's size after %d bytes", i, len(b), start)
		}
		total = start + len(b)
	}
	if total == 0 {
		return &Arena{}, make([][]byte, len(bufs)), nil
	}
	m, err := mmap.MapRegion(nil, total+SlabBytes, mmap.COPY, mmap.ANON, 0) // COPY: private, which huge pages need
	if err != nil {
		return nil, nil, fmt.Errorf("arena: mapping %d bytes: %w", total, err)
	}
	addr := uintptr(unsafe.Pointer(&m[0]))
	off := int((SlabBytes - addr%SlabBytes) % SlabBytes)
	base := m[off : off+total : off+total]
	adviseHuge(base)
	out := make([][]byte, len(bufs))
	pos := 0
	for i, b := range bufs {
		pos = (pos + arenaAlign - 1) &^ (arenaAlign - 1)
		out[i] = base[pos : pos+len(b) : pos+len(b)]
		copy(out[i], b)
		pos += len(b)
	}
	// Read-only from here, as the file's mapping was: a stray write faults
	// instead of changing the weights every later token uses.
	if err := protectRead(m); err != nil {
		_ = m.Unmap()
		return nil, nil, fmt.Errorf("arena: making %d bytes read-only: %w", total, err)
	}
	return &Arena{m: m, bytes: int64(total)}, out, nil
}

// Bytes is the size of the copies, alignment gaps included.
func (a *Arena) Bytes() int64 { return a.bytes }

// Contains reports whether b is memory of the arena.
func (a *Arena) Contains(b []byte) bool {
	if a == nil || len(a.m) == 0 || len(b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(&a.m[0]))
	p := uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p-lo < uintptr(len(a.m))
}

// Close unmaps the arena. The copies must not be used afterwards.
func (a *Arena) Close() error {
	if a == nil || a.m == nil {
		return nil
	}
	err := a.m.Unmap()
	a.m = nil
	return err
}
