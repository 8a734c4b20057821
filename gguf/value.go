package gguf

import (
	"fmt"
	"strconv"
	"strings"
)

// maxArrayDepth bounds how deeply arrays may nest (an array of arrays is depth
// 2). GGUF producers use depth 1; the bound keeps recursion on hostile input
// shallow.
const maxArrayDepth = 8

// KV is one metadata key/value pair.
type KV struct {
	Key   string
	Value Value
}

// Value is a decoded metadata value. Any returns it as a Go value.
type Value struct {
	Type ValueType
	x    any // uint8 … float64, bool, string, or Array, matching Type
}

// Array is a metadata array: Elem is the element type and Values the elements
// as a typed slice ([]uint8, []int8, []uint16, []int16, []uint32, []int32,
// []float32, []bool, []string, []Array, []uint64, []int64 or []float64).
type Array struct {
	Elem   ValueType
	Values any
}

// Any returns the value as uint8, int8, uint16, int16, uint32, int32, float32,
// bool, string, Array, uint64, int64 or float64.
func (v Value) Any() any { return v.x }

// Len is the number of elements.
func (a Array) Len() int {
	switch s := a.Values.(type) {
	case []uint8:
		return len(s)
	case []int8:
		return len(s)
	case []uint16:
		return len(s)
	case []int16:
		return len(s)
	case []uint32:
		return len(s)
	case []int32:
		return len(s)
	case []float32:
		return len(s)
	case []bool:
		return len(s)
	case []string:
		return len(s)
	case []Array:
		return len(s)
	case []uint64:
		return len(s)
	case []int64:
		return len(s)
	case []float64:
		return len(s)
	}
	return 0
}

// elemTypeOfSlice maps a typed slice to its element type.
func elemTypeOfSlice(s any) (ValueType, bool) {
	switch s.(type) {
	case []uint8:
		return TypeUint8, true
	case []int8:
		return TypeInt8, true
	case []uint16:
		return TypeUint16, true
	case []int16:
		return TypeInt16, true
	case []uint32:
		return TypeUint32, true
	case []int32:
		return TypeInt32, true
	case []float32:
		return TypeFloat32, true
	case []bool:
		return TypeBool, true
	case []string:
		return TypeString, true
	case []Array:
		return TypeArray, true
	case []uint64:
		return TypeUint64, true
	case []int64:
		return TypeInt64, true
	case []float64:
		return TypeFloat64, true
	}
	return 0, false
}

// ValueOf wraps a Go value as a metadata value. It accepts the Go types listed
// at Value.Any, typed slices of them (which become arrays), and Array (whose
// Values must match its Elem, recursively). Go's int and uint are refused: GGUF
// integers have explicit widths.
func ValueOf(x any) (Value, error) {
	switch x := x.(type) {
	case uint8:
		return Value{TypeUint8, x}, nil
	case int8:
		return Value{TypeInt8, x}, nil
	case uint16:
		return Value{TypeUint16, x}, nil
	case int16:
		return Value{TypeInt16, x}, nil
	case uint32:
		return Value{TypeUint32, x}, nil
	case int32:
		return Value{TypeInt32, x}, nil
	case float32:
		return Value{TypeFloat32, x}, nil
	case bool:
		return Value{TypeBool, x}, nil
	case string:
		return Value{TypeString, x}, nil
	case uint64:
		return Value{TypeUint64, x}, nil
	case int64:
		return Value{TypeInt64, x}, nil
	case float64:
		return Value{TypeFloat64, x}, nil
	case Array:
		if err := x.check(1); err != nil {
			return Value{}, err
		}
		return Value{TypeArray, x}, nil
	}
	if elem, ok := elemTypeOfSlice(x); ok {
		return ValueOf(Array{Elem: elem, Values: x})
	}
	return Value{}, fmt.Errorf("type %T has no GGUF metadata type", x)
}

// check verifies that Values is a slice of Elem and that nesting stays within
// maxArrayDepth.
func (a Array) check(depth int) error {
	if depth > maxArrayDepth {
		return fmt.Errorf("arrays nest deeper than %d levels", maxArrayDepth)
	}
	got, ok := elemTypeOfSlice(a.Values)
	if !ok || got != a.Elem {
		return fmt.Errorf("array of %s holds %T", a.Elem, a.Values)
	}
	if subs, ok := a.Values.([]Array); ok {
		for i, s := range subs {
			if err := s.check(depth + 1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	}
	return nil
}

// previewElems is how many array elements String shows before eliding.
const previewElems = 8

// String formats the value for display on one line; long arrays are elided and
// strings are quoted (so control characters stay escaped).
func (v Value) String() string {
	switch x := v.x.(type) {
	case string:
		return strconv.Quote(x)
	case Array:
		return x.String()
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case nil:
		return "<none>"
	}
	return fmt.Sprint(v.x)
}

// String formats the array as "[n x type: e0, e1, ...]".
func (a Array) String() string {
	n := a.Len()
	var b strings.Builder
	fmt.Fprintf(&b, "[%d x %s", n, a.Elem)
	for i := 0; i < n && i < previewElems; i++ {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(a.elem(i).String())
	}
	if n > previewElems {
		b.WriteString(", ...")
	}
	b.WriteString("]")
	return b.String()
}

// elem returns element i as a Value (i must be in range).
func (a Array) elem(i int) Value {
	switch s := a.Values.(type) {
	case []uint8:
		return Value{a.Elem, s[i]}
	case []int8:
		return Value{a.Elem, s[i]}
	case []uint16:
		return Value{a.Elem, s[i]}
	case []int16:
		return Value{a.Elem, s[i]}
	case []uint32:
		return Value{a.Elem, s[i]}
	case []int32:
		return Value{a.Elem, s[i]}
	case []float32:
		return Value{a.Elem, s[i]}
	case []bool:
		return Value{a.Elem, s[i]}
	case []string:
		return Value{a.Elem, s[i]}
	case []Array:
		return Value{a.Elem, s[i]}
	case []uint64:
		return Value{a.Elem, s[i]}
	case []int64:
		return Value{a.Elem, s[i]}
	case []float64:
		return Value{a.Elem, s[i]}
	}
	return Value{}
}

// asUint returns an integer value as uint64 when it is non-negative.
func (v Value) asUint() (uint64, bool) {
	switch x := v.x.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := v.asSigned(); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// asSigned returns a signed integer value as int64.
func (v Value) asSigned() (int64, bool) {
	switch x := v.x.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}
