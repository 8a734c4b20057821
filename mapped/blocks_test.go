package mapped

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// Blocks are whole, aligned, zeroed and disjoint, across slab boundaries.
func TestBlocksDisjoint(t *testing.T) {
	const size = 48 << 10 // a stories110M layer's 16 positions of keys
	a, err := NewBlocks(size)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size() != size {
		t.Fatalf("Size %d, want %d", a.Size(), size)
	}
	var got [][]byte
	for i := range 100 { // 42 to a slab: 3 slabs
		b, err := a.Get()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != size || cap(b) != size {
			t.Fatalf("block %d: len %d cap %d, want %d", i, len(b), cap(b), size)
		}
		if p := uintptr(unsafe.Pointer(&b[0])); p%64 != 0 {
			t.Fatalf("block %d at %#x: not on a cache line", i, p)
		}
		if !bytes.Equal(b, make([]byte, size)) {
			t.Fatalf("block %d is not zeroed", i)
		}
		for j := range b {
			b[j] = byte(i)
		}
		got = append(got, b)
	}
	for i, b := range got {
		if bytes.Count(b, []byte{byte(i)}) != size {
			t.Fatalf("block %d was overwritten: blocks overlap", i)
		}
	}
	if n, span := a.Slabs(); n != 3 || span != 3*SlabBytes {
		t.Fatalf("%d slabs spanning %d bytes, want 3 and %d", n, span, 3*SlabBytes)
	}
	if a.InUse() != 100 {
		t.Fatalf("InUse %d, want 100", a.InUse())
	}
	for _, b := range got {
		a.Put(b)
	}
	// Every slab is empty: all but one are unmapped.
	if n, _ := a.Slabs(); n != 1 || a.InUse() != 0 {
		t.Fatalf("after giving every block back: %d slabs, %d in use; want 1 and 0", n, a.InUse())
	}
}

// A block given back is cleared before anyone gets it again.
func TestBlocksClearedOnPut(t *testing.T) {
	a, err := NewBlocks(1000) // rounded up to 1024
	if err != nil {
		t.Fatal(err)
	}
	if a.Size() != 1024 {
		t.Fatalf("Size %d, want 1024 (1000 rounded to 64)", a.Size())
	}
	keep, _ := a.Get() // keeps the slab mapped
	b, _ := a.Get()
	for i := range b {
		b[i] = 0xa5
	}
	a.Put(b)
	if bytes.Count(b, []byte{0}) != len(b) {
		t.Fatal("Put did not clear the block")
	}
	c, _ := a.Get()
	if &c[0] != &b[0] {
		t.Fatal("the free block was not reused")
	}
	if bytes.Count(c, []byte{0}) != len(c) {
		t.Fatal("a reused block is not zeroed")
	}
	a.Put(c)
	a.Put(keep)
}

// Blocks larger than a slab take a slab each.
func TestBlocksLarge(t *testing.T) {
	a, err := NewBlocks(3 << 20)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := a.Get()
	y, _ := a.Get()
	if n, span := a.Slabs(); n != 2 || span != 2*(4<<20) {
		t.Fatalf("%d slabs spanning %d bytes, want 2 of 4 MiB", n, span)
	}
	x[len(x)-1], y[0] = 1, 2
	a.Put(x)
	a.Put(y)
	if n, _ := a.Slabs(); n != 1 || a.InUse() != 0 {
		t.Fatalf("%d slabs and %d in use after giving both back, want 1 and 0", n, a.InUse())
	}
}

func TestBlocksRefusals(t *testing.T) {
	for _, size := range []int{0, -1, 1<<34 + 1} {
		if _, err := NewBlocks(size); err == nil {
			t.Errorf("NewBlocks(%d) was accepted", size)
		}
	}
	a, _ := NewBlocks(4096)
	b, _ := a.Get()
	other, _ := NewBlocks(4096)
	o, _ := other.Get()
	cases := map[string]func(){
		"short":          func() { a.Put(b[:100]) },
		"foreign":        func() { a.Put(make([]byte, 4096)) },
		"other's block":  func() { a.Put(o) },
		"not at a start": func() { a.Put(unsafe.Slice(&b[64], 4096)) },
	}
	for name, f := range cases {
		if !panics(f) {
			t.Errorf("Put of a %s slice did not panic", name)
		}
	}
	keep, _ := a.Get()
	a.Put(b)
	if !panics(func() { a.Put(b) }) {
		t.Error("a second Put of one block did not panic")
	}
	a.Put(keep)
	other.Put(o)
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}

// Many goroutines taking and giving back blocks never share one.
func TestBlocksConcurrent(t *testing.T) {
	a, _ := NewBlocks(8 << 10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held [][]byte
			for i := range 600 {
				b, err := a.Get()
				if err != nil {
					t.Error(err)
					return
				}
				b[0], b[len(b)-1] = byte(g), byte(g)
				held = append(held, b)
				if i%3 == 2 {
					for _, h := range held[:2] {
						if h[0] != byte(g) || h[len(h)-1] != byte(g) {
							t.Errorf("goroutine %d: a held block changed: shared with another", g)
						}
						a.Put(h)
					}
					held = held[2:]
				}
			}
			for _, h := range held {
				a.Put(h)
			}
		}()
	}
	wg.Wait()
	if a.InUse() != 0 {
		t.Fatalf("InUse %d after every block came back", a.InUse())
	}
}

// Where the kernel gives transparent huge pages on request, a slab is one.
func TestBlocksHugePages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge pages are asked for on Linux only")
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v): slabs use 4 KiB pages", strings.TrimSpace(string(mode)), err)
	}
	a, _ := NewBlocks(48 << 10)
	b, _ := a.Get()
	for i := range b {
		b[i] = 1
	}
	addr := uintptr(unsafe.Pointer(&b[0])) &^ (SlabBytes - 1)
	kb := smapsField(t, addr, "AnonHugePages:")
	t.Logf("THP mode %q: the slab at %#x has %d kB in huge pages", strings.TrimSpace(string(mode)), addr, kb)
	if kb < 2048 {
		t.Fatalf("the slab at %#x has %d kB of AnonHugePages, want 2048", addr, kb)
	}
	a.Put(b)
}

// smapsField reads a field (in kB) of the mapping holding addr in
// /proc/self/smaps.
func smapsField(t *testing.T, addr uintptr, field string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			lo, hi, _ := strings.Cut(f[0], "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h
			continue
		}
		if in && len(f) >= 2 && f[0] == field {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	return 0
}

// Past the idle limit (the larger of idleMax and the bytes then in use),
// blocks given back leave memory: resident memory follows the blocks in
// use, however scattered over the slabs the free ones are, and a released
// block comes back zeroed.
func TestBlocksIdleLimit(t *testing.T) {
	const size = 64 << 10 // 32 to a slab
	a, _ := NewBlocks(size)
	a.idleMax = 4 * size
	var got [][]byte
	for range 128 { // 4 slabs
		b, _ := a.Get()
		for i := range b {
			b[i] = 0x5a
		}
		got = append(got, b)
	}
	before := a.resident(t)
	for i, b := range got {
		if i%4 != 0 { // every slab keeps a quarter of its blocks
			a.Put(b)
		}
	}
	// 96 given back: the first 64 stay idle (the 65th would make the idle
	// blocks outnumber the 64 then in use), the other 32 are released.
	if a.InUse() != 32 || a.Idle() != 64*size {
		t.Fatalf("%d in use, %d idle bytes; want 32 and 64 blocks' worth", a.InUse(), a.Idle())
	}
	released := 96 - int(a.Idle()/size)
	if runtime.GOOS == "linux" {
		after := a.resident(t)
		if drop := before - after; drop < released*64 {
			t.Fatalf("resident memory of the slabs fell by %d kB, want at least %d (%d blocks released)", drop, released*64, released)
		}
		t.Logf("slabs resident: %d kB with 128 blocks in use, %d kB with 32 (%d released, %d idle)", before, after, released, a.Idle()/size)
	}
	for range 96 { // the free blocks again, released or not: all zeroed
		b, _ := a.Get()
		if bytes.Count(b, []byte{0}) != len(b) {
			t.Fatal("a reused block is not zeroed")
		}
		got = append(got, b)
	}
	if a.Idle() != 0 || a.InUse() != 128 {
		t.Fatalf("after taking every free block: %d idle bytes, %d in use; want 0 and 128", a.Idle(), a.InUse())
	}
	for i, b := range got {
		if i >= 128 || i%4 == 0 {
			a.Put(b)
		}
	}
	// Only the slab kept for the next request holds idle blocks.
	if n, span := a.Slabs(); n != 1 || a.Idle() > span {
		t.Fatalf("all given back: %d slabs and %d idle bytes; want 1 and at most its %d", n, a.Idle(), span)
	}
}

// resident sums the resident kB of the slabs' mappings (Linux).
func (a *Blocks) resident(t *testing.T) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		return 0
	}
	a.mu.Lock()
	var bases []uintptr
	for base := range a.slabs {
		bases = append(bases, base)
	}
	a.mu.Unlock()
	kb := 0
	for _, base := range bases {
		kb += smapsField(t, base, "Rss:")
	}
	return kb
}
