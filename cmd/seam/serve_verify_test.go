package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
)

// seam serve checks the checksums of the range it serves: a layer file
// overwritten in place with other valid floats (which a restarted stage
// used to serve, giving garbage text) is refused, naming the segment.
// A file without checksums is refused only when --verify is asked for.
func TestServeVerifiesItsRange(t *testing.T) {
	ctr := importStories(t)
	seg := filepath.Join(ctr, "layer-001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = seamAll(t, "serve", "--model", ctr, "--layers", "0:2", "--listen", "127.0.0.1:0", "--insecure")
	if err == nil || !strings.Contains(err.Error(), "refusing to serve layers [0, 2)") || !strings.Contains(err.Error(), "layer-001") {
		t.Fatalf("serving a damaged range: %v", err)
	}
	gguf := filepath.Join(testmodels.Dir(t), testmodels.Stories260KGGUF)
	_, _, err = seamAll(t, "serve", "--model", gguf, "--layers", "0:2", "--listen", "127.0.0.1:0", "--insecure", "--verify")
	if err == nil || !strings.Contains(err.Error(), "carries no checksums") {
		t.Fatalf("--verify with a GGUF file: %v", err)
	}
}
