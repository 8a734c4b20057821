package mapped

import (
	"fmt"
	"sync"
	"unsafe"

	mmap "github.com/edsrzf/mmap-go"
)

// DefaultIdle is the bytes of free, resident blocks a Blocks keeps in
// slabs that still hold blocks in use, when the blocks in use are fewer,
// before it releases more to the kernel.
const DefaultIdle = 64 << 20

// SlabBytes is the size and alignment of the anonymous mappings a Blocks
// allocator carves: one transparent huge page on x86-64 and arm64 Linux.
const SlabBytes = 2 << 20

// Blocks hands out fixed-size blocks of zeroed memory from slabs of
// anonymous memory outside the Go heap, and takes them back for reuse.
//
// It exists for memory that a computation fills as it goes, such as KV
// caches: a block of fresh 4 KiB pages costs one page fault per page on its
// first write, and on the virtual machines measured a fault took 5 to 12
// µs, 6 to 9 % of a decode step. A slab is advised as a huge page where
// the kernel allows it (one fault per 2 MiB), and a block given back is
// reused without faulting at all.
//
// Blocks given back are cleared at once, so no data outlives its user in
// the free list. A slab whose blocks are all free is unmapped, except one
// kept for the next request. Free blocks in slabs still in use stay
// resident, ready for reuse, while they amount to no more than DefaultIdle
// or the bytes of the blocks then in use, whichever is more; past that a
// block given back is also released to the kernel (MADV_DONTNEED, which
// splits a huge page). So the slabs' resident memory stays within the
// blocks in use plus the larger of DefaultIdle and the most ever in use
// (a KV budget bounds both), however the blocks of ended users are
// scattered over the slabs, and a server's ordinary churn (blocks freed
// and soon taken again) releases nothing. A Blocks is safe for concurrent
// use.
type Blocks struct {
	size    int // bytes per block, a multiple of 64
	perSlab int
	slab    int // bytes per slab, a multiple of SlabBytes

	mu      sync.Mutex
	slabs   map[uintptr]*slab // by base address
	partial []*slab           // slabs with at least one free block
	empty   int               // slabs with no block in use
	out     int               // blocks in use
	idle    int64             // bytes of free blocks that are resident
	idleMax int64             // DefaultIdle; tests lower it
}

type slab struct {
	m         mmap.MMap // the mapping, SlabBytes more than the slab for alignment
	base      []byte    // the aligned slab within m
	free      []int32   // indices of the blocks not in use
	busy      []uint64  // a bit per block in use: Put refuses a block twice
	released  []uint64  // a bit per free block whose pages are not resident
	used      int
	inPartial bool
}

// NewBlocks returns an allocator of blocks of size bytes, rounded up to a
// multiple of 64 so that every block starts on a cache line.
func NewBlocks(size int) (*Blocks, error) {
	if size < 1 || size > 1<<34 {
		return nil, fmt.Errorf("block of %d bytes: want 1 to 16 GiB", size)
	}
	size = (size + 63) &^ 63
	per := max(1, SlabBytes/size)
	slabBytes := (per*size + SlabBytes - 1) / SlabBytes * SlabBytes
	return &Blocks{size: size, perSlab: per, slab: slabBytes, slabs: map[uintptr]*slab{}, idleMax: DefaultIdle}, nil
}

// Size is the bytes of each block.
func (a *Blocks) Size() int { return a.size }

// InUse is the number of blocks handed out and not given back.
func (a *Blocks) InUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out
}

// Slabs is the number of slabs mapped now, and the bytes they span.
func (a *Blocks) Slabs() (n int, bytes int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.slabs), int64(len(a.slabs)) * int64(a.slab)
}

// Idle is the bytes of free blocks kept resident for reuse.
func (a *Blocks) Idle() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.idle
}

// Get returns a zeroed block of Size bytes, mapping a new slab when no
// block is free. It fails only when the mapping does.
func (a *Blocks) Get() ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.partial) == 0 {
		s, err := a.newSlab()
		if err != nil {
			return nil, err
		}
		a.partial = append(a.partial, s)
		s.inPartial = true
		a.empty++
	}
	s := a.partial[len(a.partial)-1]
	i := int(s.free[len(s.free)-1])
	s.free = s.free[:len(s.free)-1]
	s.busy[i/64] |= 1 << (i % 64)
	if s.released[i/64]&(1<<(i%64)) != 0 {
		s.released[i/64] &^= 1 << (i % 64)
	} else {
		a.idle -= int64(a.size)
	}
	if s.used == 0 {
		a.empty--
	}
	s.used++
	a.out++
	if len(s.free) == 0 {
		a.partial = a.partial[:len(a.partial)-1]
		s.inPartial = false
	}
	return s.base[i*a.size : (i+1)*a.size : (i+1)*a.size], nil
}

// Put gives back a block that Get returned. It panics on any other slice,
// and on a block given back twice: either is a programming error that
// would otherwise hand one block to two users.
func (a *Blocks) Put(b []byte) {
	if len(b) != a.size {
		panic(fmt.Sprintf("mapped.Blocks.Put: a block of %d bytes, want %d", len(b), a.size))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// A slab of several blocks is one SlabBytes-aligned SlabBytes; a
	// larger slab holds one block, at its base.
	addr := uintptr(unsafe.Pointer(&b[0]))
	if a.perSlab > 1 {
		addr &^= SlabBytes - 1
	}
	s := a.slabs[addr]
	if s == nil {
		panic("mapped.Blocks.Put: a block this allocator did not hand out")
	}
	off := uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&s.base[0]))
	i := int(off) / a.size
	if off%uintptr(a.size) != 0 || s.busy[i/64]&(1<<(i%64)) == 0 {
		panic("mapped.Blocks.Put: a block given back twice, or not one Get returned")
	}
	s.busy[i/64] &^= 1 << (i % 64)
	clear(b)
	if a.idle+int64(a.size) > max(a.idleMax, int64(a.out)*int64(a.size)) {
		Release(b) // cleared first: Release drops only the whole pages inside b
		s.released[i/64] |= 1 << (i % 64)
	} else {
		a.idle += int64(a.size)
	}
	s.free = append(s.free, int32(i))
	s.used--
	a.out--
	if !s.inPartial {
		a.partial = append(a.partial, s)
		s.inPartial = true
	}
	if s.used > 0 {
		return
	}
	a.empty++
	if a.empty > 1 {
		a.unmap(s)
	}
}

func (a *Blocks) newSlab() (*slab, error) {
	m, base, err := mapHuge(a.slab)
	if err != nil {
		return nil, fmt.Errorf("mapping a slab of %d bytes for blocks of %d: %w", a.slab, a.size, err)
	}
	s := &slab{m: m, base: base}
	s.busy = make([]uint64, (a.perSlab+63)/64)
	s.released = make([]uint64, (a.perSlab+63)/64)
	for i := a.perSlab - 1; i >= 0; i-- {
		s.free = append(s.free, int32(i))
		s.released[i/64] |= 1 << (i % 64) // never touched: not resident
	}
	a.slabs[uintptr(unsafe.Pointer(&s.base[0]))] = s
	return s, nil
}

// unmap drops an empty slab.
func (a *Blocks) unmap(s *slab) {
	for i, p := range a.partial {
		if p == s {
			a.partial = append(a.partial[:i], a.partial[i+1:]...)
			break
		}
	}
	delete(a.slabs, uintptr(unsafe.Pointer(&s.base[0])))
	a.empty--
	for _, i := range s.free {
		if s.released[i/64]&(1<<(i%64)) == 0 {
			a.idle -= int64(a.size)
		}
	}
	_ = s.m.Unmap() // the memory is unreachable now; a failure would only leak it
}
