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
