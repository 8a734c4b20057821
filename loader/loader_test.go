package loader

import (
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
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
