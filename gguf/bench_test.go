package gguf

import (
	"io"
	"os"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
)

func BenchmarkParseStories(b *testing.B) {
	data, err := os.ReadFile(testmodels.Path(b, testmodels.Stories260KGGUF))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data, "stories"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriterStream measures streaming 64 MiB of tensor data per op.
func BenchmarkWriterStream(b *testing.B) {
	const size = 64 << 20
	chunk := make([]byte, 1<<20)
	b.SetBytes(size)
	for b.Loop() {
		w, err := NewWriter(io.Discard, 3)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.AddTensor("t", GGMLQ8_0, 1024, size/34/32); err != nil {
			b.Fatal(err)
		}
		for left := size / 34 / 32 * 34 * 32; left > 0; {
			n := min(left, len(chunk))
			if _, err := w.Write(chunk[:n]); err != nil {
				b.Fatal(err)
			}
			left -= n
		}
		if err := w.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}
