package loader

import (
	"fmt"

	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/model"
)

// copyPiece is how much of a tensor resident copies before releasing the
// source's pages.
const copyPiece = 4 << 20

// resident copies what every token streams, the held layers' tensors and
// the final norm and classifier, out of the file's mapping into one
// huge-page arena (mapped.NewArena), and releases the file's pages of
// them. The embedding stays mapped: a token reads one row of it.
//
// Every buffer copied views a file mapping (mapped.Release on Go memory
// would zero it): RoPE frequency factors, which a GGUF reader may compute
// into the heap, are left where they are (one small vector a layer).
func resident(path string, w *model.Weights) (*mapped.Arena, error) {
	ts := held(w)
	for i := w.First; i < w.Last; i++ {
		l := &w.Layers[i]
		ts = append(ts, &l.Bq, &l.Bk, &l.Bv, &l.QNorm, &l.KNorm) // empty unless the config has them
	}
	var bufs []*[]byte
	for _, t := range ts {
		for _, b := range []*[]byte{&t.Data, &t.Scales} {
			if len(*b) > 0 {
				bufs = append(bufs, b)
			}
		}
	}
	sizes := make([]int, len(bufs))
	for i, b := range bufs {
		sizes[i] = len(*b)
	}
	a, copies, err := mapped.NewArena(sizes)
	if err != nil {
		return nil, fmt.Errorf("%s: copying layers [%d, %d) into memory (--mmap serves them from the file instead): %w", path, w.First, w.Last, err)
	}
	// A few MiB at a time, each piece's file pages released once copied:
	// the process holds at most that much twice (a whole tensor at a time,
	// the f32 classifier of the stories110M shape, 98 MB, added as much to
	// the peak).
	for i, b := range bufs {
		src := *b
		for off := 0; off < len(src); off += copyPiece {
			end := min(off+copyPiece, len(src))
			copy(copies[i][off:end], src[off:end])
			mapped.Release(src[off:end])
		}
		*b = copies[i]
	}
	if err := a.Seal(); err != nil {
		a.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}
