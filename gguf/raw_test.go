package gguf

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// raw assembles GGUF bytes field by field, independently of Writer, so that
// the reader and the writer are each checked against a third, explicit layout.
type raw struct {
	b  []byte
	v1 bool // 32-bit counts, lengths and dims
}

func newRaw(version uint32, nTensors, nKV uint64) *raw {
	r := &raw{v1: version == 1}
	r.b = append(r.b, 'G', 'G', 'U', 'F')
	r.u32(version)
	r.n(nTensors)
	r.n(nKV)
	return r
}

func (r *raw) u8(v uint8) *raw { r.b = append(r.b, v); return r }
func (r *raw) u16(v uint16) *raw {
	r.b = binary.LittleEndian.AppendUint16(r.b, v)
	return r
}
func (r *raw) u32(v uint32) *raw {
	r.b = binary.LittleEndian.AppendUint32(r.b, v)
	return r
}
func (r *raw) u64(v uint64) *raw {
	r.b = binary.LittleEndian.AppendUint64(r.b, v)
	return r
}

// n writes a count, length or dimension in the version's width.
func (r *raw) n(v uint64) *raw {
	if r.v1 {
		return r.u32(uint32(v))
	}
	return r.u64(v)
}

func (r *raw) str(s string) *raw {
	r.n(uint64(len(s)))
	r.b = append(r.b, s...)
	return r
}

// kv writes a key and a type tag; the caller appends the value.
func (r *raw) kv(key string, t ValueType) *raw { return r.str(key).u32(uint32(t)) }

func (r *raw) tensor(name string, typ uint32, offset uint64, dims ...uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.n(d)
	}
	return r.u32(typ).u64(offset)
}

func (r *raw) padTo(align int) *raw {
	for len(r.b)%align != 0 {
		r.b = append(r.b, 0)
	}
	return r
}

func (r *raw) f32s(v ...float32) *raw {
	for _, x := range v {
		r.u32(math.Float32bits(x))
	}
	return r
}

// value appends the encoding of a Go value (the test's own reference encoder).
func (r *raw) value(t testing.TB, x any) *raw {
	switch x := x.(type) {
	case uint8:
		r.u8(x)
	case int8:
		r.u8(uint8(x))
	case uint16:
		r.u16(x)
	case int16:
		r.u16(uint16(x))
	case uint32:
		r.u32(x)
	case int32:
		r.u32(uint32(x))
	case float32:
		r.u32(math.Float32bits(x))
	case bool:
		if x {
			r.u8(1)
		} else {
			r.u8(0)
		}
	case string:
		r.str(x)
	case uint64:
		r.u64(x)
	case int64:
		r.u64(uint64(x))
	case float64:
		r.u64(math.Float64bits(x))
	case Array:
		r.u32(uint32(x.Elem))
		switch s := x.Values.(type) {
		case []uint8:
			r.n(uint64(len(s)))
			r.b = append(r.b, s...)
		case []int8:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []uint16:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []int16:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []uint32:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []int32:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []float32:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []bool:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []string:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []Array:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []uint64:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []int64:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		case []float64:
			r.n(uint64(len(s)))
			for _, e := range s {
				r.value(t, e)
			}
		default:
			t.Fatalf("raw: unsupported array %T", x.Values)
		}
	default:
		t.Fatalf("raw: unsupported value %T", x)
	}
	return r
}

// typeOf is the GGUF type tag the test expects for a Go value.
func typeOf(t testing.TB, x any) ValueType {
	switch x.(type) {
	case uint8:
		return TypeUint8
	case int8:
		return TypeInt8
	case uint16:
		return TypeUint16
	case int16:
		return TypeInt16
	case uint32:
		return TypeUint32
	case int32:
		return TypeInt32
	case float32:
		return TypeFloat32
	case bool:
		return TypeBool
	case string:
		return TypeString
	case Array:
		return TypeArray
	case uint64:
		return TypeUint64
	case int64:
		return TypeInt64
	case float64:
		return TypeFloat64
	}
	t.Fatalf("typeOf: unsupported %T", x)
	return 0
}

// wantErr asserts that err is a one-line error starting with the file label and
// containing every fragment.
func wantErr(t *testing.T, err error, label string, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", fragments)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	if label != "" && !strings.HasPrefix(msg, label) {
		t.Errorf("error %q does not start with %q", msg, label)
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("error %q does not contain %q", msg, f)
		}
	}
}
