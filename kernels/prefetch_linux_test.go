//go:build linux

package kernels

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seamlm/seam/tensor"
)

// TestRowPrefetchPastTheEnd: the integer-dot row kernels ask for the
// memory rowPrefetch bytes past each row, so the last rows of a matrix ask
// for bytes past its end, and for up to startPrefetch bytes of its rows
// when they start. A matrix whose data ends where its mapping does, right
// before pages that may not be read, must still compute every row, with
// the bits of a copy on the heap, whether the prefetches are on or off, at
// one and two threads: 512 rows (split between 2 threads) and 4 rows
// (fewer bytes than startPrefetch).
func TestRowPrefetchPastTheEnd(t *testing.T) {
	for _, rows := range []int{512, 4} {
		testPrefetchPastTheEnd(t, rows)
	}
}

func testPrefetchPastTheEnd(t *testing.T, rows int) {
	page := os.Getpagesize()
	const cols = 256
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(i%13)*0.25 - 1.5
	}
	defer SetThreads(0)
	defer func(r, s int64) { rowPrefetch, startPrefetch = r, s }(rowPrefetch, startPrefetch)
	on, start := rowPrefetch, startPrefetch
	if on == 0 || start == 0 {
		t.Fatalf("rowPrefetch %d, startPrefetch %d: the kernels ask for nothing ahead", on, start)
	}
	for _, typ := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K, tensor.Q8G} {
		heap := benchTensor(typ, rows, cols)
		size := len(heap.Data)
		body := (size + page - 1) / page * page
		guard := (int(on) + heap.RowBytes() + page - 1) / page * page
		m, err := unix.Mmap(-1, 0, body+guard, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		if err := unix.Mprotect(m[body:], unix.PROT_NONE); err != nil {
			t.Fatal(err)
		}
		edge := *heap
		edge.Data = m[body-size : body]
		copy(edge.Data, heap.Data)
		want := make([]float32, rows)
		SetThreads(1)
		MatVec(want, heap, x)
		levelsCovered(t, func(level int) {
			for _, th := range []int{1, 2} {
				for _, pf := range [][2]int64{{0, 0}, {on, start}} {
					rowPrefetch, startPrefetch = pf[0], pf[1]
					SetThreads(th)
					got := make([]float32, rows)
					MatVec(got, &edge, x)
					for r := range got {
						if !sameBits(got[r], want[r]) {
							t.Fatalf("%s level %s, %d threads, prefetches %v: row %d = %v, want %v", typ, levelNames[level], th, pf, r, got[r], want[r])
						}
					}
				}
			}
		})
		t.Logf("%s: %d rows, %d bytes ending at a PROT_NONE page, prefetches (%d ahead, %d at the start) on and off", typ, rows, size, on, start)
	}
}
