package loader

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// alignLine is the alignment below which alignF32 copies a tensor: a
// cache line, the width of an AVX-512 load.
const alignLine = 64

// alignF32 copies the held f32 matrices and norms of w whose data does not
// start on a cache line into page-aligned memory (mapped.Copy), and returns
// what frees the copies.
//
// Why: a llama2.c checkpoint puts its first float at byte 28, and every
// tensor after it 28 bytes past a cache line, so each 64-byte load of a row
// straddles two lines. f32 decode of the stories110M shape read that way
// ran at 60-63 tok/s where the same bytes 64-byte aligned ran 79-82
// (2 threads, alternated 4 times, 2026-12-02); a GGUF file, whose tensors
// are aligned, ran the same from its mapping as from a copy. The embedding
// is left mapped: a token reads one row of it.
func alignF32(w *model.Weights) (*copies, error) {
	cs := &copies{}
	for _, t := range held(w) {
		if t.Type != tensor.F32 || len(t.Data) == 0 || uintptr(unsafe.Pointer(&t.Data[0]))%alignLine == 0 {
			continue
		}
		c, err := mapped.NewCopy(t.Data)
		if err != nil {
			cs.Close()
			return nil, fmt.Errorf("aligning tensor %s: %w", t.Name, err)
		}
		cs.closers = append(cs.closers, c)
		cs.bytes += int64(len(t.Data))
		t.Data = c.Bytes()
	}
	return cs, nil
}

// copies are the aligned copies of a model's tensors; Close frees them.
type copies struct {
	closers
	bytes int64
}

// closers closes each in turn.
type closers []interface{ Close() error }

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// held lists what a forward pass over w's range streams every token: the
// nine tensors of each held layer, and the final norm and classifier when
// the range ends the model.
func held(w *model.Weights) []*tensor.Tensor {
	var ts []*tensor.Tensor
	for i := w.First; i < w.Last; i++ {
		ts = append(ts, w.Layers[i].Tensors()...)
	}
	if w.HasHead() {
		ts = append(ts, &w.FinalNorm, &w.Output)
	}
	return ts
}
