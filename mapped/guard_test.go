package mapped_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A mapped file written to in place (same length), grown, or replaced is
// reported by Changed, naming it; an untouched one is not.
func TestChangedNoticesWrites(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	data := bytes.Repeat([]byte{1, 2, 3, 4}, 4096)
	for _, c := range []struct {
		name   string
		change func(path string)
		want   string
	}{
		{"untouched", func(string) {}, ""},
		{"overwritten", func(p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{9, 9, 9, 9}, 100) // same length, other floats
			f.Close()
		}, "was written to while mapped"},
		{"grown", func(p string) {
			f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			f.Write([]byte{0})
			f.Close()
		}, "changed size while mapped"},
		{"replaced", func(p string) {
			tmp := write("new", data)
			os.Rename(tmp, p)
		}, "was replaced by another file while mapped"},
	} {
		p := write(c.name, data)
		f, err := mapped.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // a later modification time than the write's
		c.change(p)
		err = f.Changed()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p)) {
			t.Errorf("%s: %v, want %q naming %s", c.name, err, c.want, p)
		}
		f.Close()
	}
}
