package loader

import (
	"testing"
	"unsafe"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/tensor"
)

// The llama2.c checkpoint and the GGUF of the same model both rotate
// adjacent pairs under RoPE (GGUF converters permute Hugging Face's
// half-rotation away), so the two sources must give the same logits, bit for
// bit, with each source's own vocabulary encoding the same text.
func TestGGUFAndLlama2cAgree(t *testing.T) {
	bin, err := Open(testmodels.Path(t, testmodels.Stories260K), Options{TokenizerPath: testmodels.Path(t, testmodels.Tok512)})
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	gg, err := Open(testmodels.Path(t, testmodels.Stories260KGGUF), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gg.Close()
	text := "Once upon a time, Lily found a shiny red ball in the garden."
	a, b := bin.Tokenizer.Encode(text, true, false), gg.Tokenizer.Encode(text, true, false)
	if len(a) != len(b) {
		t.Fatalf("tokenizers disagree: %v vs %v", a, b)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("tokenizers disagree at %d: %v vs %v", i, a, b)
		}
	}
	testmodels.SameBits(t, "GGUF against llama2.c", testmodels.Logits(t, gg.Weights, b), testmodels.Logits(t, bin.Weights, a))
}

// A narrowed single-file model keeps the whole model's identity.
func TestRangeKeepsIdentity(t *testing.T) {
	path := testmodels.Path(t, testmodels.Stories260K)
	whole, err := Open(path, Options{NoTokenizer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	part, err := Open(path, Options{NoTokenizer: true, First: 2, Last: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close()
	a, err := whole.Identity()
	if err != nil {
		t.Fatal(err)
	}
	b, err := part.Identity()
	if err != nil || a != b {
		t.Fatalf("identity of layers [2,4): %x, %v; whole: %x", b, err, a)
	}
	if _, err := Open(path, Options{NoTokenizer: true, First: 3, Last: 9}); err == nil {
		t.Fatal("range beyond the model accepted")
	}
}

// A llama2.c checkpoint's f32 tensors start 28 bytes past a cache line;
// with --mmap the loader copies the held ones to aligned memory
// (alignF32), and only those: a stage holding layers [2, 4) copies their
// tensors and nothing of the other layers or the head. (Without --mmap
// every held tensor is copied into the arena, aligned: TestResident.)
func TestLlama2cTensorsAligned(t *testing.T) {
	path := testmodels.Path(t, testmodels.Stories260K)
	for _, r := range [][2]int{{0, 0}, {2, 4}} {
		m, err := Open(path, Options{NoTokenizer: true, First: r[0], Last: r[1], Mapped: true})
		if err != nil {
			t.Fatal(err)
		}
		w := m.Weights
		var held []*tensor.Tensor
		for i := w.First; i < w.Last; i++ {
			held = append(held, w.Layers[i].Tensors()...)
		}
		if w.HasHead() {
			held = append(held, &w.FinalNorm, &w.Output)
		}
		var want int64
		for _, x := range held {
			if a := uintptr(unsafe.Pointer(&x.Data[0])) % alignLine; a != 0 {
				t.Errorf("layers %v: %s starts %d bytes past a cache line", r, x.Name, a)
			}
			want += int64(len(x.Data))
		}
		cs := m.closer.(closers)[0].(*copies)
		if cs.bytes != want {
			t.Errorf("layers %v: %d bytes copied, want the held tensors' %d", r, cs.bytes, want)
		}
		if r[0] > 0 {
			if a := uintptr(unsafe.Pointer(&w.Layers[0].Wq.Data[0])) % alignLine; a != 28 {
				t.Errorf("layer 0 (not held) starts %d past a line, want 28: it was copied", a)
			}
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
