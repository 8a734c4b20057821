package gguf

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

func TestWriterRefusals(t *testing.T) {
	for _, v := range []uint32{0, 4} {
		if _, err := NewWriter(io.Discard, v); err == nil {
			t.Errorf("NewWriter accepted version %d", v)
		}
	}
	const label = "gguf writer:"
	w, err := NewWriter(io.Discard, 3)
	must(t, err)
	wantErr(t, w.Add("n", 42), label, `"n"`, "type int has no GGUF metadata type")
	must(t, w.Add("k", uint8(1)))
	wantErr(t, w.Add("k", uint8(2)), label, `"k" added twice`)
	wantErr(t, w.Add(KeyAlignment, uint64(64)), label, KeyAlignment, "uint32 power of two")
	wantErr(t, w.Add(KeyAlignment, uint32(48)), label, "uint32 power of two", "48")
	wantErr(t, w.AddValue("z", Value{}), label, `"z"`, "tagged uint8")
	wantErr(t, w.AddValue("m", Value{Type: TypeString, x: uint8(1)}), label, `"m"`, "tagged string")
	deep := Array{TypeUint8, []uint8{}}
	for i := 0; i < maxArrayDepth; i++ {
		deep = Array{TypeArray, []Array{deep}}
	}
	wantErr(t, w.Add("deep", deep), label, `"deep"`, "deeper than 8")
	wantErr(t, w.AddTensor("t", GGMLF32), label, `"t"`, "0 dimensions")
	wantErr(t, w.AddTensor("t", GGMLF32, 1, 1, 1, 1, 1), label, "5 dimensions")
	wantErr(t, w.AddTensor("t", GGMLF32, 4, 0), label, "dimension 1 is 0")
	wantErr(t, w.AddTensor("t", GGMLType(99), 4), label, "type id 99")
	wantErr(t, w.AddTensor("t", GGMLQ8_0, 33), label, "33 elements", "q8_0")
	wantErr(t, w.AddTensor("t", GGMLF32, 1<<62), label, "larger than 2^63-1 bytes")
	must(t, w.AddTensor("t", GGMLF32, 2))
	wantErr(t, w.AddTensor("t", GGMLF32, 2), label, `"t" declared twice`)
	must(t, w.AddTensor("u", GGMLF32, 1))

	// Too many bytes: the excess is refused and the error sticks.
	n, err := w.Write(make([]byte, 13))
	wantErr(t, err, label, "1 bytes written beyond")
	if n != 12 {
		t.Errorf("Write reported %d bytes, want the 12 declared", n)
	}
	wantErr(t, w.Finish(), label, "beyond")
	wantErr(t, w.Add("late", uint8(1)), label, "beyond")

	// Metadata after data has started.
	w, _ = NewWriter(io.Discard, 3)
	must(t, w.AddTensor("t", GGMLF32, 2))
	_, err = w.Write(make([]byte, 4))
	must(t, err)
	wantErr(t, w.Add("late", uint8(1)), label, "after tensor data started")
	wantErr(t, w.AddTensor("late", GGMLF32, 1), label, "after tensor data started")
	// Finish before all bytes arrived.
	wantErr(t, w.Finish(), label, `"t"`, "4 of 8 bytes")

	// Use after Finish.
	w, _ = NewWriter(io.Discard, 2)
	must(t, w.Finish())
	_, err = w.Write([]byte{1})
	wantErr(t, err, label, "after Finish")

	// Version 1 fields are 32 bits wide.
	w, _ = NewWriter(io.Discard, 1)
	must(t, w.AddTensor("big", GGMLF32, 1<<33))
	wantErr(t, w.Finish(), label, `"big"`, "dimension 8589934592 does not fit version 1")
}

type failingWriter struct{ after int }

var errSink = errors.New("sink full")

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.after {
		n := f.after
		f.after = 0
		return n, errSink
	}
	f.after -= len(p)
	return len(p), nil
}

func TestWriterPropagatesSinkErrors(t *testing.T) {
	w, err := NewWriter(&failingWriter{after: 100}, 3)
	must(t, err)
	must(t, w.AddTensor("t", GGMLF32, 1<<16))
	chunk := make([]byte, 1<<12)
	for i := 0; i < 64 && err == nil; i++ {
		_, err = w.Write(chunk)
	}
	if err == nil {
		err = w.Finish()
	}
	if !errors.Is(err, errSink) {
		t.Fatalf("got %v, want the sink's error", err)
	}
	wantErr(t, err, "gguf writer:", "sink full")
	if err2 := w.Finish(); !errors.Is(err2, errSink) {
		t.Errorf("error did not stick: %v", err2)
	}
}

type countingSink struct{ n int64 }

func (c *countingSink) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// TestWriterMemoryIndependentOfTensorSize streams 64 MiB and checks that the
// Writer allocated far less than that in total (so its peak is smaller still).
func TestWriterMemoryIndependentOfTensorSize(t *testing.T) {
	const size = 64 << 20
	sink := &countingSink{}
	w, err := NewWriter(sink, 3)
	must(t, err)
	must(t, w.AddTensor("a", GGMLF32, 1024, size/4096/2))
	must(t, w.AddTensor("b", GGMLF32, 1024, size/4096/2))
	chunk := make([]byte, 1<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < size/len(chunk); i++ {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	must(t, w.Finish())
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("streaming 64 MiB allocated %d bytes", alloc)
	}
	// Header: 24 + 2 * (8+1 name, 4 n_dims, 16 dims, 4 type, 8 offset) = 106, padded to 128.
	if sink.n != 128+size {
		t.Errorf("wrote %d bytes, want %d", sink.n, 128+size)
	}
}

func TestWriterSliceValues(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, 3)
	must(t, w.Add("s", []string{"x"}))
	must(t, w.Finish())
	want := newRaw(3, 0, 1).kv("s", TypeArray).u32(uint32(TypeString)).u64(1).str("x").b
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("got %x, want %x", buf.Bytes(), want)
	}
}
