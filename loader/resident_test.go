package loader

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/tensor"
)

// Without Mapped, the held layers and the head are copies in one arena:
// byte for byte the file's tensors, each on a cache line, the layers
// outside the range and the embedding still views of the file; and the
// logits are the mapped model's, bit for bit. On the llama2.c checkpoint
// (f32), the GGUF of the same model, and a Q8G llama2.c checkpoint
// (whose scales are a second buffer).
func TestResident(t *testing.T) {
	for _, name := range []string{testmodels.Stories260K, testmodels.Stories260KGGUF, testmodels.Stories260KQ8} {
		path := testmodels.Path(t, name)
		for _, r := range [][2]int{{0, 0}, {2, 4}} {
			file, err := Open(path, Options{NoTokenizer: true, First: r[0], Last: r[1], Mapped: true})
			if err != nil {
				t.Fatal(err)
			}
			mem, err := Open(path, Options{NoTokenizer: true, First: r[0], Last: r[1]})
			if err != nil {
				t.Fatal(err)
			}
			a := mem.closer.(closers)[0].(*mapped.Arena)
			if mem.Resident != a.Bytes() || mem.Resident == 0 || file.Resident != 0 {
				t.Errorf("%s layers %v: Resident %d copied (arena %d bytes), %d mapped; want the arena's size and 0", name, r, mem.Resident, a.Bytes(), file.Resident)
			}
			fw, mw := file.Weights, mem.Weights
			var copied int64
			for i := range mw.Layers {
				ft, mt := fw.Layers[i].Tensors(), mw.Layers[i].Tensors()
				for k := range mt {
					inRange := i >= mw.First && i < mw.Last
					copied += checkCopy(t, a, name, r, mt[k], ft[k], inRange)
				}
			}
			if mw.HasHead() {
				copied += checkCopy(t, a, name, r, &mw.FinalNorm, &fw.FinalNorm, true)
				copied += checkCopy(t, a, name, r, &mw.Output, &fw.Output, true)
			}
			if mw.HasEmbedding() {
				checkCopy(t, a, name, r, &mw.Embedding, &fw.Embedding, false)
			}
			if a.Bytes() < copied || a.Bytes() > copied+copied/8+1<<16 {
				t.Errorf("%s layers %v: arena of %d bytes for %d bytes of tensors", name, r, a.Bytes(), copied)
			}
			if r == [2]int{0, 0} {
				toks := []int{1, 403, 407, 261, 378, 1}
				testmodels.SameBits(t, name+": resident against mapped", testmodels.Logits(t, mw, toks), testmodels.Logits(t, fw, toks))
			}
			mem.Close()
			file.Close()
		}
	}
}

// checkCopy checks that mt (the resident model's) holds ft's bytes, and is
// in the arena (aligned) exactly when want; it returns the bytes copied.
func checkCopy(t *testing.T, a *mapped.Arena, name string, r [2]int, mt, ft *tensor.Tensor, want bool) int64 {
	t.Helper()
	var n int64
	for _, b := range [][2][]byte{{mt.Data, ft.Data}, {mt.Scales, ft.Scales}} {
		m, f := b[0], b[1]
		if len(m) == 0 && len(f) == 0 {
			continue
		}
		if !bytes.Equal(m, f) {
			t.Errorf("%s layers %v: %s differs from the file's", name, r, mt.Name)
			continue
		}
		if got := a.Contains(m); got != want {
			t.Errorf("%s layers %v: %s in the arena %v, want %v", name, r, mt.Name, got, want)
		}
		if want && uintptr(unsafe.Pointer(&m[0]))%64 != 0 {
			t.Errorf("%s layers %v: %s's copy starts %d bytes past a cache line", name, r, mt.Name, uintptr(unsafe.Pointer(&m[0]))%64)
		}
		if want {
			n += int64(len(m))
		}
	}
	return n
}
