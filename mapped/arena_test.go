package mapped

import (
	"bytes"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"
)

func TestArenaCopies(t *testing.T) {
	var src [][]byte
	for _, n := range []int{0, 1, 63, 64, 65, 3 << 20, 7} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		src = append(src, b)
	}
	sizes := make([]int, len(src))
	for i, b := range src {
		sizes[i] = len(b)
	}
	a, got, err := NewArena(sizes)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i, b := range got {
		if !bytes.Equal(b, make([]byte, len(b))) {
			t.Fatalf("buffer %d is not zeroed", i)
		}
		copy(b, src[i])
	}
	if err := a.Seal(); err != nil {
		t.Fatal(err)
	}
	var end uintptr
	for i, b := range got {
		if !bytes.Equal(b, src[i]) {
			t.Fatalf("copy %d differs from its source", i)
		}
		if len(b) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(&b[0]))
		if p%arenaAlign != 0 {
			t.Errorf("copy %d starts %d bytes past a cache line", i, p%arenaAlign)
		}
		if p < end {
			t.Errorf("copy %d at %#x overlaps the one before, which ends at %#x", i, p, end)
		}
		end = p + uintptr(len(b))
		if cap(b) != len(b) {
			t.Errorf("copy %d has room for %d bytes past its %d: an append would write into the next", i, cap(b)-len(b), len(b))
		}
	}
	if a.Bytes() < 3<<20+200 || a.Bytes() > 3<<20+7*arenaAlign {
		t.Errorf("arena of %d bytes for %d bytes of copies", a.Bytes(), 3<<20+200)
	}
}

// A write into a sealed arena faults, as a write into the file's
// read-only mapping did.
func TestArenaReadOnly(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no mprotect")
	}
	a, got, err := NewArena([]int{7})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	copy(got[0], "weights")
	if err := a.Seal(); err != nil {
		t.Fatal(err)
	}
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	faulted := func() (f bool) {
		defer func() { f = recover() != nil }()
		got[0][0] = 'W'
		return false
	}()
	if !faulted {
		t.Fatal("a write into the arena did not fault")
	}
	if string(got[0]) != "weights" {
		t.Fatalf("arena holds %q", got[0])
	}
}

func TestArenaRefusals(t *testing.T) {
	for _, sizes := range [][]int{{-1}, {1, math.MaxInt - 8}} {
		if a, _, err := NewArena(sizes); err == nil {
			a.Close()
			t.Errorf("NewArena(%v) accepted", sizes)
		}
	}
}

func TestArenaHugePages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge pages are asked for on Linux only")
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v): arenas use 4 KiB pages", strings.TrimSpace(string(mode)), err)
	}
	a, got, err := NewArena([]int{6 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := range got[0] {
		got[0][i] = 1
	}
	addr := uintptr(unsafe.Pointer(&got[0][0]))
	if addr%SlabBytes != 0 {
		t.Fatalf("arena at %#x: not on a 2 MiB boundary", addr)
	}
	kb := smapsField(t, addr, "AnonHugePages:")
	t.Logf("THP mode %q: the arena at %#x has %d kB in huge pages", strings.TrimSpace(string(mode)), addr, kb)
	if kb < 6<<10 {
		t.Fatalf("the arena at %#x has %d kB of AnonHugePages, want %d", addr, kb, 6<<10)
	}
}
