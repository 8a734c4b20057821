package gguf

import (
	"fmt"

	"github.com/seamlm/seam/tensor"
)

// ValueType is the type tag of a metadata value, as stored in the file.
type ValueType uint32

// Metadata value types (the numbering is the GGUF specification's).
const (
	TypeUint8     ValueType = 0
	TypeInt8      ValueType = 1
	TypeUint16    ValueType = 2
	TypeInt16     ValueType = 3
	TypeUint32    ValueType = 4
	TypeInt32     ValueType = 5
	TypeFloat32   ValueType = 6
	TypeBool      ValueType = 7
	TypeString    ValueType = 8
	TypeArray     ValueType = 9
	TypeUint64    ValueType = 10
	TypeInt64     ValueType = 11
	TypeFloat64   ValueType = 12
	numValueTypes ValueType = 13
)

var valueTypeNames = [numValueTypes]string{
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
}

func (t ValueType) String() string {
	if t < numValueTypes {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Valid reports whether t is one of the thirteen defined value types.
func (t ValueType) Valid() bool { return t < numValueTypes }

// fixedSize is the encoded size of a scalar of type t, or 0 for strings,
// arrays and unknown types (whose size depends on the file version or content).
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// GGMLType is a tensor element type id as used by ggml (enum ggml_type).
type GGMLType uint32

// The GGML type ids Seam computes with (ids checked against ggml's ggml.h).
const (
	GGMLF32  GGMLType = 0
	GGMLF16  GGMLType = 1
	GGMLQ4_0 GGMLType = 2
	GGMLQ8_0 GGMLType = 8
	GGMLQ4_K GGMLType = 12
	GGMLQ6_K GGMLType = 14
	GGMLBF16 GGMLType = 30
)

// ggmlGeometry describes how a GGML type packs elements into blocks. dtype is
// Invalid for types Seam can size (so it can validate and list them) but not
// compute with.
type ggmlGeometry struct {
	name       string
	blockElems uint64
	blockBytes uint64
	dtype      tensor.DType
}

// ggmlTypes lists every GGML type id that may appear in a GGUF file, with block
// sizes taken from the block structs in ggml's ggml-common.h (QK_K = 256).
// Knowing the size of types Seam cannot compute with still lets the parser
// bound-check and overlap-check every tensor, and lets `seam inspect` list them.
var ggmlTypes = map[GGMLType]ggmlGeometry{
	0:  {"f32", 1, 4, tensor.F32},
	1:  {"f16", 1, 2, tensor.F16},
	2:  {"q4_0", 32, 18, tensor.Q4_0},
	3:  {"q4_1", 32, 20, tensor.Invalid},
	6:  {"q5_0", 32, 22, tensor.Invalid},
	7:  {"q5_1", 32, 24, tensor.Invalid},
	8:  {"q8_0", 32, 34, tensor.Q8_0},
	9:  {"q8_1", 32, 36, tensor.Invalid},
	10: {"q2_K", 256, 84, tensor.Invalid},
	11: {"q3_K", 256, 110, tensor.Invalid},
	12: {"q4_K", 256, 144, tensor.Q4_K},
	13: {"q5_K", 256, 176, tensor.Invalid},
	14: {"q6_K", 256, 210, tensor.Q6_K},
	15: {"q8_K", 256, 292, tensor.Invalid},
	16: {"iq2_xxs", 256, 66, tensor.Invalid},
	17: {"iq2_xs", 256, 74, tensor.Invalid},
	18: {"iq3_xxs", 256, 98, tensor.Invalid},
	19: {"iq1_s", 256, 50, tensor.Invalid},
	20: {"iq4_nl", 32, 18, tensor.Invalid},
	21: {"iq3_s", 256, 110, tensor.Invalid},
	22: {"iq2_s", 256, 82, tensor.Invalid},
	23: {"iq4_xs", 256, 136, tensor.Invalid},
	24: {"i8", 1, 1, tensor.Invalid},
	25: {"i16", 1, 2, tensor.Invalid},
	26: {"i32", 1, 4, tensor.Invalid},
	27: {"i64", 1, 8, tensor.Invalid},
	28: {"f64", 1, 8, tensor.Invalid},
	29: {"iq1_m", 256, 56, tensor.Invalid},
	30: {"bf16", 1, 2, tensor.BF16},
	34: {"tq1_0", 256, 54, tensor.Invalid},
	35: {"tq2_0", 256, 66, tensor.Invalid},
	39: {"mxfp4", 32, 17, tensor.Invalid},
}

// String is ggml's name for the type, or "ggml_type(N)" for an unknown id.
func (t GGMLType) String() string {
	if g, ok := ggmlTypes[t]; ok {
		return g.name
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// Known reports whether Seam knows the type's block geometry (and so can size,
// bound-check and list its tensors).
func (t GGMLType) Known() bool {
	_, ok := ggmlTypes[t]
	return ok
}

// DType is the Seam element type for t, or false when Seam cannot compute with t.
func (t GGMLType) DType() (tensor.DType, bool) {
	g, ok := ggmlTypes[t]
	if !ok || g.dtype == tensor.Invalid {
		return tensor.Invalid, false
	}
	return g.dtype, true
}

// GGMLTypeOf is the GGML type id of a Seam element type. Q8G (llama2.c's
// separately-scaled int8) has no GGML equivalent.
func GGMLTypeOf(d tensor.DType) (GGMLType, error) {
	for id, g := range ggmlTypes {
		if g.dtype == d && d != tensor.Invalid {
			return id, nil
		}
	}
	return 0, fmt.Errorf("dtype %s has no GGML type id", d)
}
