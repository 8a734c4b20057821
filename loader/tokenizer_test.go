package loader

import (
	"slices"
	"strings"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
)

// TestTokenizerPathFormats: --tokenizer takes a llama2.c tokenizer.bin, a
// GGUF file or a tokenizer.json folder; a vocabulary larger than the model's
// is refused.
func TestTokenizerPathFormats(t *testing.T) {
	ckpt := testmodels.Path(t, testmodels.Stories260K)
	bin, err := Open(ckpt, Options{TokenizerPath: testmodels.Path(t, testmodels.Tok512)})
	if err != nil {
		t.Fatal(err)
	}
	defer bin.Close()
	fromGGUF, err := Open(ckpt, Options{TokenizerPath: testmodels.Path(t, testmodels.Stories260KGGUF)})
	if err != nil {
		t.Fatal(err)
	}
	defer fromGGUF.Close()
	// Both spell the same vocabulary; the GGUF one follows llama.cpp and the
	// text has no special-token spelling, so the ids agree.
	text := "Once upon a time, Lily saw a big dog."
	if a, b := bin.Tokenizer.Encode(text, true, false), fromGGUF.Tokenizer.Encode(text, true, false); !slices.Equal(a, b) {
		t.Errorf("tokenizer.bin %v, GGUF %v", a, b)
	}
	_, err = Open(ckpt, Options{TokenizerPath: testmodels.TokenizerDir(t, testmodels.Llama2)})
	if err == nil || !strings.Contains(err.Error(), "32000 tokens, more than the model's vocabulary of 512") {
		t.Errorf("a 32000-token tokenizer for a 512-token model: %v", err)
	}
}
