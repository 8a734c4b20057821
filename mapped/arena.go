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

// Arena holds several buffers in one private anonymous mapping, aligned to
// 2 MiB and advised as transparent huge pages; weights are copied in, then
// the arena is sealed read-only.
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

// NewArena maps an arena holding len(sizes) zeroed buffers of those
// sizes, each starting on a 64-byte boundary, writable until Seal. A
// caller copying mapped weights in can release each source as soon as it
// is copied, so that the process never holds both.
func NewArena(sizes []int) (*Arena, [][]byte, error) {
	total := 0
	for i, n := range sizes {
		start := (total + arenaAlign - 1) &^ (arenaAlign - 1)
		if n < 0 || n > math.MaxInt-SlabBytes-start {
			return nil, nil, fmt.Errorf("arena: buffer %d of %d bytes: not a size an arena can hold after %d bytes", i, n, start)
		}
		total = start + n
	}
	out := make([][]byte, len(sizes))
	if total == 0 {
		return &Arena{}, out, nil
	}
	m, base, err := mapHuge(total)
	if err != nil {
		return nil, nil, fmt.Errorf("arena: mapping %d bytes: %w", total, err)
	}
	pos := 0
	for i, n := range sizes {
		pos = (pos + arenaAlign - 1) &^ (arenaAlign - 1)
		out[i] = base[pos : pos+n : pos+n]
		pos += n
	}
	return &Arena{m: m, bytes: int64(total)}, out, nil
}

// Seal makes the arena read-only, as a file's mapping is: a stray write
// then faults instead of changing what every later token reads.
func (a *Arena) Seal() error {
	if a == nil || a.m == nil {
		return nil
	}
	if err := protectRead(a.m); err != nil {
		return fmt.Errorf("arena: making %d bytes read-only: %w", a.bytes, err)
	}
	return nil
}

// Bytes is the size of the buffers, alignment gaps included.
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

// Close unmaps the arena. Its buffers must not be used afterwards.
func (a *Arena) Close() error {
	if a == nil || a.m == nil {
		return nil
	}
	err := a.m.Unmap()
	a.m = nil
	return err
}
