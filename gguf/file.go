// Package gguf reads GGUF model files (versions 1, 2 and 3) and writes them as a
// stream.
//
// A File keeps the metadata in file order, decoded and copied, and the tensor
// infos; tensors are handed out as tensor.Tensor views over the mapped bytes.
// Everything read from the file is bounded before it is allocated or sliced,
// and malformed input yields errors naming the file, the field and the values.
// The byte layout Seam reads is described in docs/gguf.md.
package gguf

import (
	"errors"
	"fmt"
	"math"

	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/tensor"
)

// KeyAlignment is the metadata key that sets the data alignment.
const KeyAlignment = "general.alignment"

// ErrMissing is wrapped by accessor errors for absent keys.
var ErrMissing = errors.New("missing")

// File is a parsed GGUF file.
type File struct {
	name        string
	data        []byte
	mf          *mapped.File // set by Open
	version     uint32
	alignment   uint64
	dataStart   uint64
	kvs         []KV
	kvIndex     map[string]int
	tensors     []TensorInfo
	tensorIndex map[string]int
}

// TensorInfo describes one tensor. Dims[0] is the fastest-varying dimension (the
// columns of a matrix). Offset is relative to the start of the data section.
// Size is the tensor's byte length, or 0 when its GGML type is unknown to Seam.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   GGMLType
	Offset uint64
	Size   uint64
}

// Open maps path read-only and parses it. Close releases the mapping.
func Open(path string) (*File, error) {
	m, err := mapped.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Parse(m.Bytes(), path)
	if err != nil {
		m.Close()
		return nil, err
	}
	f.mf = m
	return f, nil
}

// Close unmaps a file from Open; tensors obtained from it must not be used
// afterwards. Metadata stays readable. Close on a parsed slice is a no-op
// besides forbidding further Tensor calls.
func (f *File) Close() error {
	f.data = nil
	if f.mf == nil {
		return nil
	}
	err := f.mf.Close()
	f.mf = nil
	return err
}

// Name is the name given to Parse (the path for Open).
func (f *File) Name() string { return f.name }

// Version is the GGUF format version (1, 2 or 3).
func (f *File) Version() uint32 { return f.version }

// Alignment is the data alignment in bytes.
func (f *File) Alignment() uint64 { return f.alignment }

// DataOffset is the file offset of the data section.
func (f *File) DataOffset() uint64 { return f.dataStart }

// Metadata returns all key/value pairs in file order. Array values share their
// slices with the File and must not be modified.
func (f *File) Metadata() []KV { return append([]KV(nil), f.kvs...) }

// Get returns the value for key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.kvs[i].Value, true
}

// Has reports whether key is present.
func (f *File) Has(key string) bool {
	_, ok := f.kvIndex[key]
	return ok
}

func (f *File) lookup(key string) (Value, error) {
	v, ok := f.Get(key)
	if !ok {
		return Value{}, fmt.Errorf("gguf %s: metadata %q is %w", f.name, key, ErrMissing)
	}
	return v, nil
}

func (f *File) typeError(key string, v Value, want string) error {
	return fmt.Errorf("gguf %s: metadata %q is %s %s, want %s", f.name, key, v.Type, v, want)
}

// Uint returns an integer value of any of the eight integer types that is not
// negative.
func (f *File) Uint(key string) (uint64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	u, ok := v.asUint()
	if !ok {
		return 0, f.typeError(key, v, "a non-negative integer")
	}
	return u, nil
}

// Int returns an integer value of any integer type that fits in int64.
func (f *File) Int(key string) (int64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	if i, ok := v.asSigned(); ok {
		return i, nil
	}
	if u, ok := v.asUint(); ok && u <= maxInt64 {
		return int64(u), nil
	}
	return 0, f.typeError(key, v, "an integer that fits in int64")
}

// Float returns a float32 or float64 value, or an integer value converted to
// float64 (exactly, when its magnitude is at most 2^53).
func (f *File) Float(key string) (float64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.x.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	if i, ok := v.asSigned(); ok {
		return float64(i), nil
	}
	if u, ok := v.asUint(); ok {
		return float64(u), nil
	}
	return 0, f.typeError(key, v, "a number")
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.x.(bool)
	if !ok {
		return false, f.typeError(key, v, "bool")
	}
	return b, nil
}

// String returns a string value.
func (f *File) String(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.x.(string)
	if !ok {
		return "", f.typeError(key, v, "string")
	}
	return s, nil
}

// Array returns an array value.
func (f *File) Array(key string) (Array, error) {
	v, err := f.lookup(key)
	if err != nil {
		return Array{}, err
	}
	a, ok := v.x.(Array)
	if !ok {
		return Array{}, f.typeError(key, v, "array")
	}
	return a, nil
}

// typedArray returns a copy of an array value whose elements have Go type T.
func typedArray[T any](f *File, key string, elem ValueType) ([]T, error) {
	a, err := f.Array(key)
	if err != nil {
		return nil, err
	}
	s, ok := a.Values.([]T)
	if !ok {
		return nil, fmt.Errorf("gguf %s: metadata %q is an array of %s, want an array of %s", f.name, key, a.Elem, elem)
	}
	return append([]T(nil), s...), nil
}

// Strings returns a string array.
func (f *File) Strings(key string) ([]string, error) { return typedArray[string](f, key, TypeString) }

// Float32s returns a float32 array.
func (f *File) Float32s(key string) ([]float32, error) {
	return typedArray[float32](f, key, TypeFloat32)
}

// Int32s returns an int32 array.
func (f *File) Int32s(key string) ([]int32, error) { return typedArray[int32](f, key, TypeInt32) }

// Tensors returns the tensor infos in file order. Their Dims slices are shared
// with the File and must not be modified.
func (f *File) Tensors() []TensorInfo { return append([]TensorInfo(nil), f.tensors...) }

// TensorInfo returns the info of the named tensor.
func (f *File) TensorInfo(name string) (TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// HasTensor reports whether the file declares the named tensor.
func (f *File) HasTensor(name string) bool {
	_, ok := f.tensorIndex[name]
	return ok
}

// Tensor returns the named tensor as a checked view over the file's bytes:
// Cols = Dims[0], Rows = the product of the other dims (a 1-D tensor is 1 x n).
// It fails for types Seam cannot compute with, naming the tensor and type id.
func (f *File) Tensor(name string) (tensor.Tensor, error) {
	info, ok := f.TensorInfo(name)
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("gguf %s: no tensor %q", f.name, name)
	}
	if f.data == nil {
		return tensor.Tensor{}, fmt.Errorf("gguf %s: tensor %q requested after Close", f.name, name)
	}
	dt, ok := info.Type.DType()
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("gguf %s: tensor %q has GGML type %s (id %d), which Seam cannot compute with",
			f.name, name, info.Type, uint32(info.Type))
	}
	rows := uint64(1)
	for _, d := range info.Dims[1:] {
		rows *= d // cannot overflow: the element count was checked at parse time
	}
	if rows > math.MaxInt || info.Dims[0] > math.MaxInt {
		return tensor.Tensor{}, fmt.Errorf("gguf %s: tensor %q of dimensions %v does not fit this platform's int", f.name, name, info.Dims)
	}
	start := f.dataStart + info.Offset // both bounded by len(data) at parse time
	end := start + info.Size
	t := tensor.Tensor{
		Name: name,
		Type: dt,
		Rows: int(rows),
		Cols: int(info.Dims[0]),
		Data: f.data[start:end:end],
	}
	if err := t.Check(); err != nil {
		return tensor.Tensor{}, fmt.Errorf("gguf %s: %w", f.name, err)
	}
	return t, nil
}
