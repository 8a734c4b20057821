package importer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
)

// logitsAt runs tokens through the whole model at path.
func logitsAt(t *testing.T, path string, tokens []int) [][]float32 {
	t.Helper()
	m, err := loader.Open(path, loader.Options{NoTokenizer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return testmodels.Logits(t, m.Weights, tokens)
}

func TestImportGivesBitIdenticalLogits(t *testing.T) {
	dir := testmodels.Dir(t)
	tok := filepath.Join(dir, testmodels.Tok512)
	tokens := []int{1, 403, 407, 261, 378, 306, 269, 400, 412, 334, 267, 30, 320, 2, 0, 511}
	for _, src := range []struct{ file, tok string }{
		{testmodels.Stories260K, tok}, {testmodels.Stories260KQ8, tok}, {testmodels.Stories260KGGUF, ""},
	} {
		t.Run(src.file, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "c")
			if err := Import(filepath.Join(dir, src.file), out, Options{TokenizerPath: src.tok}); err != nil {
				t.Fatal(err)
			}
			if _, err := container.Verify(out); err != nil {
				t.Fatal(err)
			}
			want := logitsAt(t, filepath.Join(dir, src.file), tokens)
			testmodels.SameBits(t, "container against source", logitsAt(t, out, tokens), want)
			// The identity a head computes from the source file equals the container's.
			srcModel, err := loader.Open(filepath.Join(dir, src.file), loader.Options{NoTokenizer: true})
			if err != nil {
				t.Fatal(err)
			}
			defer srcModel.Close()
			a, err := srcModel.Identity()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := container.Identity(out)
			if a != b {
				t.Fatalf("identity from source %x, from container %x", a, b)
			}
		})
	}
}

func TestInterruptedImportIsNotAContainer(t *testing.T) {
	src := testmodels.Path(t, testmodels.Stories260K)
	tok := testmodels.Path(t, testmodels.Tok512)
	for _, after := range []int64{0, 1000, 300000, 1000000} {
		out := filepath.Join(t.TempDir(), "c")
		err := Import(src, out, Options{TokenizerPath: tok, keepPartial: true, containerOpts: []container.Option{container.WithInterruptAfter(after)}})
		if err == nil {
			t.Fatalf("interrupt after %d bytes: import succeeded", after)
		}
		// What a killed import left behind must not be taken for a
		// container by any entry point.
		if files, _ := os.ReadDir(out); len(files) == 0 && after > 1000 {
			t.Errorf("after %d: nothing was written, so nothing was tested", after)
		}
		if _, err := container.Open(out); !errors.Is(err, container.ErrNotContainer) {
			t.Errorf("after %d: Open: %v, want not a container", after, err)
		}
		if _, err := loader.Open(out, loader.Options{}); err == nil {
			t.Errorf("after %d: loader opened a partial import", after)
		}
	}
}

func TestImportRefusesAContainer(t *testing.T) {
	dir := testmodels.Dir(t)
	out := filepath.Join(t.TempDir(), "c")
	if err := Import(filepath.Join(dir, testmodels.Stories260KGGUF), out, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Import(out, filepath.Join(t.TempDir(), "d"), Options{}); err == nil {
		t.Fatal("importing a container succeeded")
	}
}
