package tensor

import (
	"fmt"
	"unsafe"
)

// Tensor is a 2-D weight matrix (a vector is one row) viewed over raw bytes.
// Rows are the output dimension and Cols the input dimension: a matrix-vector
// product reads Cols values of x and writes Rows values. Row r occupies bytes
// [r*RowBytes, (r+1)*RowBytes) of Data.
type Tensor struct {
	Name string
	Type DType
	Rows int
	Cols int
	Data []byte // the encoded values
	// Scales and GroupSize are used by Q8G only: one little-endian f32 per
	// GroupSize consecutive values of the flattened (row-major) tensor. Groups
	// may straddle rows: llama2.c picks the group size from dim alone, so a
	// 172-wide row with groups of 8 is legal there, and so here.
	Scales    []byte
	GroupSize int
}

// DataBytes returns the number of bytes Data must hold for the tensor's shape.
func (t *Tensor) DataBytes() (int, error) {
	rb, err := t.Type.RowBytes(t.Cols)
	if err != nil {
		return 0, err
	}
	return MulSize(rb, t.Rows)
}

// RowBytes is the byte length of one row of Data.
func (t *Tensor) RowBytes() int {
	n, _ := t.Type.RowBytes(t.Cols)
	return n
}

// Check validates that the byte slices match the declared shape. Every reader
// calls it before a tensor is handed to kernels, so kernels may index freely.
func (t *Tensor) Check() error {
	if !t.Type.Valid() {
		return fmt.Errorf("tensor %s: unknown dtype %d", t.Name, uint8(t.Type))
	}
	if t.Rows <= 0 || t.Cols <= 0 {
		return fmt.Errorf("tensor %s: bad shape %dx%d", t.Name, t.Rows, t.Cols)
	}
	want, err := t.DataBytes()
	if err != nil {
		return fmt.Errorf("tensor %s (%s %dx%d): %w", t.Name, t.Type, t.Rows, t.Cols, err)
	}
	if len(t.Data) != want {
		return fmt.Errorf("tensor %s (%s %dx%d): has %d bytes, shape needs %d", t.Name, t.Type, t.Rows, t.Cols, len(t.Data), want)
	}
	if t.Type == Q8G {
		if t.GroupSize <= 0 || want%t.GroupSize != 0 {
			return fmt.Errorf("tensor %s: group size %d does not divide its %d values", t.Name, t.GroupSize, want)
		}
		if ws := want / t.GroupSize * 4; len(t.Scales) != ws {
			return fmt.Errorf("tensor %s: has %d scale bytes, shape needs %d", t.Name, len(t.Scales), ws)
		}
	} else if t.Scales != nil || t.GroupSize != 0 {
		return fmt.Errorf("tensor %s: %s carries no separate scales", t.Name, t.Type)
	}
	return nil
}

// Row returns the encoded bytes of row r.
func (t *Tensor) Row(r int) []byte {
	rb := t.RowBytes()
	return t.Data[r*rb : (r+1)*rb]
}

// AsF32 views little-endian f32 bytes as []float32 without copying when the
// slice is 4-byte aligned, and copies otherwise. Seam runs on little-endian
// machines only (checked in an init in this package).
func AsF32(b []byte) []float32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]float32, n)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), n*4), b)
	return out
}

// BytesOfF32 views a []float32 as its little-endian bytes without copying.
func BytesOfF32(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}

func init() {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) != 1 {
		panic("seam: big-endian machines are not supported")
	}
}
