package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/tokenizer"
)

func TestTemplateCmd(t *testing.T) {
	dir := testmodels.TokenizerDir(t, testmodels.Qwen3)
	msgs := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(msgs, []byte(`[{"role": "user", "content": "Hi <|im_start|>"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := seam(t, "template", "--tokenizer", dir, "--messages", msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>user\nHi <|im_start|><|im_end|>\n<|im_start|>assistant\n"
	if out != want {
		t.Fatalf("text %q, want %q", out, want)
	}
	out, err = seam(t, "template", "--tokenizer", dir, "--messages", msgs, "--json", "--no-generation-prompt")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Text     string
		IDs      []int
		Literal  [][2]int
		Template string
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Text != strings.TrimSuffix(want, "<|im_start|>assistant\n") || got.Template != "model" ||
		len(got.Literal) != 1 || got.Text[got.Literal[0][0]:got.Literal[0][1]] != "Hi <|im_start|>" {
		t.Fatalf("json %+v", got)
	}
	// The template's <|im_start|> is the control token; the content's is text.
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := tok.EncodeWith("<|im_start|>", tokenizer.EncodeOptions{})
	if len(start) != 1 {
		t.Fatalf("<|im_start|> encodes as %v", start)
	}
	n := 0
	for _, id := range got.IDs {
		if id == start[0] {
			n++
		}
	}
	if n != 1 || len(got.IDs) < 10 {
		t.Fatalf("ids %v hold <|im_start|> (%d) %d times, want once", got.IDs, start[0], n)
	}
	if _, err := seam(t, "template", "--tokenizer", dir, "--messages", filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Fatal("missing messages file: no error")
	}
}
