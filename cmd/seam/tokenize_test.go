package main

import (
	"path/filepath"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
)

func TestTokenizeCmd(t *testing.T) {
	tok512 := testmodels.Path(t, testmodels.Tok512)
	llama3 := testmodels.TokenizerDir(t, testmodels.Llama3)
	cases := []struct {
		args []string
		want string
	}{
		// ids from llama2.c's run.c (tokenizer/llama2c_test.go).
		{[]string{"--tokenizer", tok512, "Once upon a time"}, "403 407 261 378\n"},
		// ids from @lenml/tokenizers on the llama3 tokenizer.json.
		{[]string{"--tokenizer", llama3, "--json", "Hello world", "<|begin_of_text|>hi  there\n\n  x"}, `{"ids":[9906,1917]}` + "\n" + `{"ids":[128000,6151,220,1070,271,220,865]}` + "\n"},
		{[]string{"--tokenizer", filepath.Join(llama3, "tokenizer.json"), "--decode", "9906 1917", "[128000, 9906]"}, "Hello world\nHello\n"},
		{[]string{"--tokenizer", llama3, "--decode", "--json", "9906,1917"}, `{"text":"Hello world"}` + "\n"},
		// llama.cpp's ids with parse_special=false (the corpus of
		// tokenizer/gguf_reference_test.go holds this string).
		{[]string{"--tokenizer", llama3, "--literal", "<|eot_id|>"}, "27 91 68 354 851 91 29\n"},
	}
	for _, c := range cases {
		out, err := seam(t, append([]string{"tokenize"}, c.args...)...)
		if err != nil {
			t.Errorf("seam tokenize %q: %v", c.args, err)
			continue
		}
		if out != c.want {
			t.Errorf("seam tokenize %q = %q, want %q", c.args, out, c.want)
		}
	}
	// A container imported from a GGUF file tokenizes as the file does.
	gg := testmodels.Path(t, testmodels.Stories260KGGUF)
	ctr := filepath.Join(t.TempDir(), "c")
	if _, err := seam(t, "import", gg, "--out", ctr); err != nil {
		t.Fatal(err)
	}
	fromGGUF, err1 := seam(t, "tokenize", "--tokenizer", gg, "Once upon a time<s> there")
	fromCtr, err2 := seam(t, "tokenize", "--tokenizer", ctr, "Once upon a time<s> there")
	if err1 != nil || err2 != nil || fromGGUF != fromCtr {
		t.Errorf("GGUF %q (%v), container %q (%v)", fromGGUF, err1, fromCtr, err2)
	}
	if _, err := seam(t, "tokenize", "--tokenizer", llama3, "--decode", "128256"); err == nil {
		t.Error("decoding an id outside the vocabulary was accepted")
	}
	if _, err := seam(t, "tokenize", "x"); err == nil {
		t.Error("tokenize without --tokenizer was accepted")
	}
}
