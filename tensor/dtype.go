// Package tensor names the element types Seam can hold weights in and describes
// a weight matrix as a typed view over bytes (usually bytes of a memory-mapped file).
//
// Block geometry lives here, once, because three places must agree on it: the
// readers that slice tensors out of files, the kernels that compute with them,
// and the container verifier that checks every region's bytes against its shape.
package tensor

import (
	"fmt"
	"math/bits"
)

// DType is a weight element encoding. The numeric values are Seam's own and are
// stored in container indexes (by name, see String), so they never change meaning.
type DType uint8

const (
	Invalid DType = iota
	F32
	F16
	BF16
	Q8_0 // GGML: blocks of 32: f16 scale, 32 x int8
	Q4_0 // GGML: blocks of 32: f16 scale, 16 bytes of packed nibbles (value-8)
	Q4_K // GGML k-quant: super-blocks of 256, 144 bytes
	Q6_K // GGML k-quant: super-blocks of 256, 210 bytes
	// Q8G is llama2.c's "version 2" export: int8 values in row-major order, then one
	// f32 scale per GroupSize consecutive values, stored as a separate array.
	// Its block geometry depends on the group size, carried by the Tensor.
	Q8G
	numDTypes
)

var dtypeNames = [numDTypes]string{"invalid", "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q8g"}

func (d DType) String() string {
	if d < numDTypes {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType is the inverse of String.
func ParseDType(s string) (DType, error) {
	for i := DType(1); i < numDTypes; i++ {
		if dtypeNames[i] == s {
			return i, nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q", s)
}

// Valid reports whether d is a known, usable element type.
func (d DType) Valid() bool { return d > Invalid && d < numDTypes }

// BlockElems is how many elements one block encodes. For Q8G it is 1: values are
// stored one byte each and the scales live in their own array (see Q8GScaleBytes).
func (d DType) BlockElems() int {
	switch d {
	case F32, F16, BF16, Q8G:
		return 1
	case Q8_0, Q4_0:
		return 32
	case Q4_K, Q6_K:
		return 256
	}
	return 0
}

// BlockBytes is the byte size of one block.
func (d DType) BlockBytes() int {
	switch d {
	case F32:
		return 4
	case F16, BF16:
		return 2
	case Q8G:
		return 1
	case Q8_0:
		return 2 + 32
	case Q4_0:
		return 2 + 16
	case Q4_K:
		return 2 + 2 + 12 + 128
	case Q6_K:
		return 128 + 64 + 16 + 2
	}
	return 0
}

// RowBytes returns the byte size of a row of n elements (the values only, for Q8G).
// It fails when n is not a whole number of blocks or the size overflows.
func (d DType) RowBytes(n int) (int, error) {
	be, bb := d.BlockElems(), d.BlockBytes()
	if be == 0 {
		return 0, fmt.Errorf("dtype %s has no block geometry", d)
	}
	if n < 0 || n%be != 0 {
		return 0, fmt.Errorf("%d elements is not a whole number of %s blocks of %d", n, d, be)
	}
	return MulSize(n/be, bb)
}

// MulSize multiplies two non-negative sizes, failing on overflow.
func MulSize(a, b int) (int, error) {
	if a < 0 || b < 0 {
		return 0, fmt.Errorf("negative size %d x %d", a, b)
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > uint64(maxInt) {
		return 0, fmt.Errorf("size %d x %d overflows", a, b)
	}
	return int(lo), nil
}

const maxInt = int(^uint(0) >> 1)
