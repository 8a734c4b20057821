package mapped_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/tensor"
)

// mapThenTruncate maps a file of size bytes of value 1 (f32 ones where it
// holds floats), then truncates the file to nothing under the mapping:
// what a user deleting or rewriting a segment while a stage serves it does.
func mapThenTruncate(t *testing.T, size int) (*mapped.File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "segment.bin")
	ones := tensor.BytesOfF32(make([]float32, size/4))
	for i := range size / 4 {
		tensor.AsF32(ones)[i] = 1
	}
	if err := os.WriteFile(path, ones, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := mapped.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	return f, path
}

// A read of a truncated mapping on the guarded goroutine is an error that
// names the file and the offset, not a crash.
func TestGuardNamesTheFile(t *testing.T) {
	f, path := mapThenTruncate(t, 1<<16)
	var sink byte
	err := mapped.Guard(func() error {
		sink = f.Bytes()[12345]
		return nil
	})
	if !errors.Is(err, mapped.ErrFault) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset 12345") {
		t.Fatalf("read past the truncation: %v (read %d), want a fault naming %s at offset 12345", err, sink, path)
	}
}

// A fault in one of the kernels' helper goroutines reaches the guarded
// caller as the same error, and the process lives on: before, a helper's
// fault ended it, since only the caller's goroutine was guarded.
func TestGuardCoversKernelHelpers(t *testing.T) {
	old := kernels.Threads()
	kernels.SetThreads(2)
	defer kernels.SetThreads(old)
	const rows, cols = 1024, 1024 // large enough to be split over threads
	f, path := mapThenTruncate(t, rows*cols*4)
	w := &tensor.Tensor{Name: "w", Type: tensor.F32, Rows: rows, Cols: cols, Data: f.Bytes()}
	x := make([]float32, cols)
	out := make([]float32, rows)
	for range 3 { // the caller or a helper may meet the fault first: either way the same error
		err := mapped.Guard(func() error {
			kernels.MatVec(out, w, x)
			return nil
		})
		if !errors.Is(err, mapped.ErrFault) || !strings.Contains(err.Error(), path) {
			t.Fatalf("matrix product over a truncated mapping: %v, want a fault naming %s", err, path)
		}
	}
	// The kernels still work afterwards, helpers included.
	good := &tensor.Tensor{Name: "good", Type: tensor.F32, Rows: rows, Cols: cols, Data: tensor.BytesOfF32(make([]float32, rows*cols))}
	kernels.MatVec(out, good, x)
}
