package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/gguf"
)

// tinyGGUFArgs make a 3-layer model small enough for a test.
var tinyGGUFArgs = []string{"--dim", "64", "--hidden", "96", "--heads", "4", "--kv-heads", "2", "--vocab", "300", "--seq-len", "32", "--layers", "3"}

// make-gguf writes a file that imports without --tokenizer, and open-range
// maps exactly the files of the requested range.
func TestBenchMakeGGUFImportOpenRange(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.gguf")
	out, err := seam(t, append([]string{"bench", "make-gguf", "--out", src}, tinyGGUFArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "largest tensor token_embd.weight (f16 300x64) 38400 bytes") {
		t.Errorf("make-gguf output does not name the largest tensor (300*64*2 bytes):\n%s", out)
	}
	if _, err := os.Stat(src + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left behind: %v", err)
	}
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.LlamaConfig()
	f.Close()
	if err != nil || cfg.NLayers != 3 || cfg.Dim != 64 || cfg.NKVHeads != 2 || cfg.VocabSize != 300 {
		t.Fatalf("written config %+v, %v; want 3 layers, dim 64, 2 kv heads, 300 tokens", cfg, err)
	}
	ctr := filepath.Join(dir, "c")
	if _, err := seam(t, "import", src, "--out", ctr); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		layers string
		want   string
	}{
		{"1:2", "layer-001.seg"},
		{"0:1", "embed.seg layer-000.seg"},
		{"2:3", "head.seg layer-002.seg"},
		{"0:3", "embed.seg head.seg layer-000.seg layer-001.seg layer-002.seg"},
	} {
		out, err := seam(t, "bench", "open-range", "--model", ctr, "--layers", c.layers, "--repeat", "3", "--limit", "0")
		if err != nil {
			t.Fatalf("%s: %v", c.layers, err)
		}
		if !strings.Contains(out, "Range.MappedFiles: "+c.want+"\n") || !strings.Contains(out, "expected files: "+c.want+" (") || !strings.Contains(out, "OK: ") {
			t.Errorf("%s: want mapped files %q, got:\n%s", c.layers, c.want, out)
		}
		if _, err := os.Stat("/proc/self/maps"); err == nil && !strings.Contains(out, "/proc/self/maps:   "+c.want+"\n") {
			t.Errorf("%s: /proc/self/maps does not show exactly %q:\n%s", c.layers, c.want, out)
		}
	}
	for _, bad := range []string{"2:4", "2:2", "x"} {
		if _, err := seam(t, "bench", "open-range", "--model", ctr, "--layers", bad); err == nil {
			t.Errorf("--layers %s accepted", bad)
		}
	}
}

func TestBenchMakeGGUFBySize(t *testing.T) {
	// At the tiny shape a layer is 33,152 bytes and the f16 embedding and
	// classifier plus the final norm 77,056 (see synth's TestLayoutSizes), so
	// 77,056 + 5*33,152 = 242,816 bytes is five layers.
	src := filepath.Join(t.TempDir(), "s.gguf")
	args := []string{"bench", "make-gguf", "--out", src, "--size", "242816B"}
	if _, err := seam(t, append(args, tinyGGUFArgs[:len(tinyGGUFArgs)-2]...)...); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if cfg, err := f.LlamaConfig(); err != nil || cfg.NLayers != 5 {
		t.Fatalf("config %+v, %v; want 5 layers", cfg, err)
	}
}
