package loader_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/importer"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
)

// A stage that verifies its range refuses a container whose layer file was
// overwritten in place with other bytes of the same length (which a
// restarted stage used to serve without complaint, giving garbage text),
// naming the segment; the ranges that do not map the file still open.
func TestVerifyRefusesDamagedRange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	if err := importer.Import(testmodels.Path(t, testmodels.Stories260K), dir, importer.Options{TokenizerPath: testmodels.Path(t, testmodels.Tok512), Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	m, err := loader.Open(dir, loader.Options{First: 0, Last: 2, NoTokenizer: true, Verify: true})
	if err != nil {
		t.Fatalf("verifying an intact container: %v", err)
	}
	m.Close()
	seg := filepath.Join(dir, "layer-001.seg")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40 // one float of the layer's weights changed: a valid float still
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = loader.Open(dir, loader.Options{First: 0, Last: 2, NoTokenizer: true, Verify: true})
	if err == nil || !strings.Contains(err.Error(), "refusing to serve layers [0, 2)") || !strings.Contains(err.Error(), "layer-001") {
		t.Fatalf("a damaged layer 1: %v, want a refusal naming layer-001", err)
	}
	t.Logf("refusal: %v", err)
	if m, err := loader.Open(dir, loader.Options{First: 2, Last: 5, NoTokenizer: true, Verify: true}); err != nil {
		t.Errorf("layers [2, 5) do not map the damaged file, but: %v", err)
	} else {
		m.Close()
	}
	// Without Verify the damage is not seen: what the check is for.
	if m, err := loader.Open(dir, loader.Options{First: 0, Last: 2, NoTokenizer: true}); err != nil {
		t.Errorf("opening without verification: %v", err)
	} else {
		m.Close()
	}
}

// Only containers carry checksums: asking to verify a GGUF file is an
// error that says what to do, not a check silently skipped.
func TestVerifyRefusesFilesWithoutChecksums(t *testing.T) {
	for _, name := range []string{testmodels.Stories260KGGUF, testmodels.Stories260K} {
		_, err := loader.Open(testmodels.Path(t, name), loader.Options{NoTokenizer: true, Verify: true})
		if err == nil || !strings.Contains(err.Error(), "carries no checksums") || !strings.Contains(err.Error(), "seam import") {
			t.Errorf("%s with Verify: %v, want a refusal", name, err)
		}
	}
}
