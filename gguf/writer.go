package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Writer streams a GGUF file: add metadata and declare every tensor first, then
// Write the tensors' bytes in declaration order (the Writer inserts alignment
// padding between tensors), then Finish. The header is written on the first
// Write or at Finish. Tensor data passes straight through, so memory use does
// not depend on tensor sizes. To change the alignment, add general.alignment
// (a uint32 power of two) before writing data.
type Writer struct {
	out       *bufio.Writer
	enc       encoder
	version   uint32
	kvs       []KV
	keys      map[string]bool
	tensors   []TensorInfo
	names     map[string]bool
	alignment uint64
	state     writerState
	cur       int    // index of the tensor being written
	written   uint64 // bytes of tensors[cur] written so far
	err       error  // sticky: the first failure ends the Writer
}

type writerState int

const (
	declaring writerState = iota
	streaming
	finished
)

// NewWriter starts a GGUF file of the given version (1, 2 or 3) on w.
func NewWriter(w io.Writer, version uint32) (*Writer, error) {
	if version < 1 || version > 3 {
		return nil, fmt.Errorf("gguf writer: version %d is not 1, 2 or 3", version)
	}
	out := bufio.NewWriterSize(w, 1<<16)
	lenSize := 8
	if version == 1 {
		lenSize = 4
	}
	return &Writer{
		out:       out,
		enc:       encoder{w: out, lenSize: lenSize},
		version:   version,
		keys:      map[string]bool{},
		names:     map[string]bool{},
		alignment: DefaultAlignment,
	}, nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

func (w *Writer) declaring(what string) error {
	if w.err != nil {
		return w.err
	}
	if w.state != declaring {
		return fmt.Errorf("gguf writer: %s after tensor data started", what)
	}
	return nil
}

// Add adds a metadata pair; x is converted with ValueOf.
func (w *Writer) Add(key string, x any) error {
	v, err := ValueOf(x)
	if err != nil {
		return fmt.Errorf("gguf writer: metadata %q: %w", key, err)
	}
	return w.AddValue(key, v)
}

// AddValue adds a metadata pair. Keys must be unique.
func (w *Writer) AddValue(key string, v Value) error {
	if err := w.declaring("metadata " + key); err != nil {
		return err
	}
	if w.keys[key] {
		return fmt.Errorf("gguf writer: metadata %q added twice", key)
	}
	if key == KeyAlignment {
		a, ok := v.x.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf writer: %s must be a uint32 power of two, got %s %s", key, v.Type, v)
		}
		w.alignment = uint64(a)
	}
	// Re-deriving the type catches a zero or hand-assembled Value whose tag
	// and contents disagree, and checks arrays recursively.
	if chk, err := ValueOf(v.x); err != nil || chk.Type != v.Type {
		return fmt.Errorf("gguf writer: metadata %q: value tagged %s holds %T", key, v.Type, v.x)
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{key, v})
	return nil
}

// AddTensor declares a tensor; dims[0] is the fastest-varying dimension (the
// columns). The type's block geometry must be known; offsets are assigned
// when the header is written.
func (w *Writer) AddTensor(name string, t GGMLType, dims ...uint64) error {
	if err := w.declaring("tensor " + name); err != nil {
		return err
	}
	if w.names[name] {
		return fmt.Errorf("gguf writer: tensor %q declared twice", name)
	}
	if len(dims) == 0 || len(dims) > maxDims {
		return fmt.Errorf("gguf writer: tensor %q has %d dimensions, want 1..%d", name, len(dims), maxDims)
	}
	for j, d := range dims {
		if d == 0 {
			return fmt.Errorf("gguf writer: tensor %q: dimension %d is 0", name, j)
		}
	}
	if !t.Known() {
		return fmt.Errorf("gguf writer: tensor %q: GGML type id %d has no known block size", name, uint32(t))
	}
	if _, err := elementCount(dims); err != nil {
		return fmt.Errorf("gguf writer: tensor %q: %w", name, err)
	}
	size, err := byteSize(dims, t)
	if err != nil {
		return fmt.Errorf("gguf writer: tensor %q: %w", name, err)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, TensorInfo{Name: name, Dims: append([]uint64(nil), dims...), Type: t, Size: size})
	return nil
}

// assignOffsets lays tensors out back to back, each at an aligned offset.
func (w *Writer) assignOffsets() error {
	next := uint64(0)
	for i := range w.tensors {
		t := &w.tensors[i]
		t.Offset = next
		end := next + t.Size
		aligned, ok := alignUp(end, w.alignment)
		if end < next || !ok {
			return fmt.Errorf("gguf writer: tensor %q: data offsets overflow 64 bits", t.Name)
		}
		next = aligned
	}
	return nil
}

// begin writes the header the first time tensor data (or Finish) arrives.
func (w *Writer) begin() error {
	if w.err != nil {
		return w.err
	}
	switch w.state {
	case streaming:
		return nil
	case finished:
		return fmt.Errorf("gguf writer: used after Finish")
	}
	if err := w.assignOffsets(); err != nil {
		return w.fail(err)
	}
	if err := w.writeHeader(); err != nil {
		return w.fail(fmt.Errorf("gguf writer: %w", err))
	}
	w.state = streaming
	return nil
}

func (w *Writer) writeHeader() error {
	e := &w.enc
	e.bytes([]byte(magic))
	e.u32(w.version)
	if err := e.count(uint64(len(w.tensors)), "tensor count"); err != nil {
		return err
	}
	if err := e.count(uint64(len(w.kvs)), "metadata count"); err != nil {
		return err
	}
	for _, kv := range w.kvs {
		if err := e.str(kv.Key, "key"); err != nil {
			return err
		}
		e.u32(uint32(kv.Value.Type))
		if err := e.value(kv.Value); err != nil {
			return fmt.Errorf("metadata %q: %w", kv.Key, err)
		}
	}
	for _, t := range w.tensors {
		if err := e.tensorInfo(t); err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
	}
	if len(w.tensors) > 0 {
		if err := w.pad(e.n); err != nil {
			return err
		}
	}
	return e.err
}

// pad writes zeros from position pos to the next multiple of the alignment.
func (w *Writer) pad(pos uint64) error {
	aligned, _ := alignUp(pos, w.alignment) // offsets were checked in assignOffsets
	w.enc.zeros(aligned - pos)
	return w.enc.err
}

// Write streams tensor data: the bytes of the declared tensors, in order,
// concatenated (without padding). Writes may span tensor boundaries.
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.begin(); err != nil {
		return 0, err
	}
	total := 0
	for len(p) > 0 {
		if w.cur >= len(w.tensors) {
			return total, w.fail(fmt.Errorf("gguf writer: %d bytes written beyond the declared tensor data", len(p)))
		}
		t := &w.tensors[w.cur]
		n := min(uint64(len(p)), t.Size-w.written)
		w.enc.bytes(p[:n])
		if w.enc.err != nil {
			return total, w.fail(fmt.Errorf("gguf writer: %w", w.enc.err))
		}
		total += int(n)
		p = p[n:]
		w.written += n
		if w.written == t.Size {
			w.cur++
			w.written = 0
			// Padding precedes the next tensor; none follows the last one,
			// so the file ends exactly where its data does.
			if w.cur < len(w.tensors) {
				if err := w.pad(w.enc.n); err != nil {
					return total, w.fail(fmt.Errorf("gguf writer: %w", err))
				}
			}
		}
	}
	return total, nil
}

// Finish writes the header if no data was written, checks that every declared
// tensor byte arrived, and flushes. It does not close the underlying writer.
func (w *Writer) Finish() error {
	if err := w.begin(); err != nil {
		return err
	}
	if w.cur < len(w.tensors) {
		t := w.tensors[w.cur]
		return w.fail(fmt.Errorf("gguf writer: tensor %q: %d of %d bytes written at Finish", t.Name, w.written, t.Size))
	}
	w.state = finished
	if err := w.out.Flush(); err != nil {
		return w.fail(fmt.Errorf("gguf writer: %w", err))
	}
	return nil
}

// encoder writes little-endian fields and counts bytes; its first error sticks.
type encoder struct {
	w       *bufio.Writer
	n       uint64
	lenSize int
	err     error
	scratch [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	k, err := e.w.Write(b)
	e.n += uint64(k)
	if err != nil {
		e.err = err
	}
}

var zeroBlock [4096]byte

func (e *encoder) zeros(n uint64) {
	for n > 0 && e.err == nil {
		k := min(n, uint64(len(zeroBlock)))
		e.bytes(zeroBlock[:k])
		n -= k
	}
}

func (e *encoder) u8(v uint8) { e.bytes([]byte{v}) }

func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.scratch[:], v)
	e.bytes(e.scratch[:2])
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.scratch[:], v)
	e.bytes(e.scratch[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.scratch[:], v)
	e.bytes(e.scratch[:8])
}

// count writes a count, length or dimension in the version's width.
func (e *encoder) count(v uint64, what string) error {
	if e.lenSize == 4 {
		if v > math.MaxUint32 {
			return fmt.Errorf("%s %d does not fit version 1's 32-bit field", what, v)
		}
		e.u32(uint32(v))
		return nil
	}
	e.u64(v)
	return nil
}

func (e *encoder) str(s, what string) error {
	if err := e.count(uint64(len(s)), what+" length"); err != nil {
		return err
	}
	e.bytes([]byte(s))
	return nil
}

func (e *encoder) value(v Value) error {
	switch x := v.x.(type) {
	case string:
		return e.str(x, "string")
	case Array:
		return e.array(x)
	}
	e.scalar(v.x)
	return nil
}

func (e *encoder) scalar(x any) {
	switch x := x.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	}
}

func (e *encoder) array(a Array) error {
	e.u32(uint32(a.Elem))
	n := a.Len()
	if err := e.count(uint64(n), "array length"); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if err := e.value(a.elem(i)); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}

func (e *encoder) tensorInfo(t TensorInfo) error {
	if err := e.str(t.Name, "name"); err != nil {
		return err
	}
	e.u32(uint32(len(t.Dims)))
	for _, d := range t.Dims {
		if err := e.count(d, "dimension"); err != nil {
			return err
		}
	}
	e.u32(uint32(t.Type))
	e.u64(t.Offset)
	return nil
}
