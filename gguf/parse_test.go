package gguf

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/seamlm/seam/tensor"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// literalFiles are complete GGUF files typed out byte by byte: one uint32
// metadata pair a=42 and one 4x2 f32 tensor "w" holding 1..8.
var literalFiles = map[uint32]string{
	3: `47475546 03000000 0100000000000000 0100000000000000
		0100000000000000 61 04000000 2a000000
		0100000000000000 77 02000000 0400000000000000 0200000000000000 00000000 0000000000000000
		0000000000000000000000000000
		0000803f 00000040 00004040 00008040 0000a040 0000c040 0000e040 00000041`,
	2: `47475546 02000000 0100000000000000 0100000000000000
		0100000000000000 61 04000000 2a000000
		0100000000000000 77 02000000 0400000000000000 0200000000000000 00000000 0000000000000000
		0000000000000000000000000000
		0000803f 00000040 00004040 00008040 0000a040 0000c040 0000e040 00000041`,
	1: `47475546 01000000 01000000 01000000
		01000000 61 04000000 2a000000
		01000000 77 02000000 04000000 02000000 00000000 0000000000000000
		000000000000
		0000803f 00000040 00004040 00008040 0000a040 0000c040 0000e040 00000041`,
}

// Header lengths of the literal files before padding: 82 bytes (v2/v3), 58 (v1).
var literalDataOffset = map[uint32]uint64{3: 96, 2: 96, 1: 64}

func TestLiteralFiles(t *testing.T) {
	for version, text := range literalFiles {
		b := unhex(t, text)
		f, err := Parse(b, "lit.gguf")
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if f.Version() != version || f.DataOffset() != literalDataOffset[version] || f.Alignment() != 32 {
			t.Errorf("v%d: version %d, data offset %d, alignment %d", version, f.Version(), f.DataOffset(), f.Alignment())
		}
		if a, err := f.Uint("a"); err != nil || a != 42 {
			t.Errorf("v%d: a = %d, %v", version, a, err)
		}
		w, err := f.Tensor("w")
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if w.Rows != 2 || w.Cols != 4 || w.Type != tensor.F32 {
			t.Errorf("v%d: w is %s %dx%d, want f32 2x4", version, w.Type, w.Rows, w.Cols)
		}
		if got := tensor.AsF32(w.Data); !reflect.DeepEqual(got, []float32{1, 2, 3, 4, 5, 6, 7, 8}) {
			t.Errorf("v%d: w = %v", version, got)
		}

		// The Writer must produce exactly the typed-out bytes.
		var buf bytes.Buffer
		wr, err := NewWriter(&buf, version)
		if err != nil {
			t.Fatal(err)
		}
		must(t, wr.Add("a", uint32(42)))
		must(t, wr.AddTensor("w", GGMLF32, 4, 2))
		_, err = wr.Write(tensor.BytesOfF32([]float32{1, 2, 3, 4, 5, 6, 7, 8}))
		must(t, err)
		must(t, wr.Finish())
		if !bytes.Equal(buf.Bytes(), b) {
			t.Errorf("v%d: writer output differs from the literal file:\n got %x\nwant %x", version, buf.Bytes(), b)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// allTypes covers every value type, arrays of every element type, empty arrays
// and nested arrays.
func allTypes() []KV {
	kv := func(k string, x any) KV { return KV{Key: k, Value: Value{x: x}} }
	arr := func(e ValueType, s any) Array { return Array{Elem: e, Values: s} }
	return []KV{
		kv("u8", uint8(200)),
		kv("i8", int8(-100)),
		kv("u16", uint16(65000)),
		kv("i16", int16(-30000)),
		kv("u32", uint32(4000000000)),
		kv("i32", int32(-2000000000)),
		kv("f32", float32(-1.5)),
		kv("bool.t", true),
		kv("bool.f", false),
		kv("str", "h\u00e9llo\x00\n"),
		kv("str.empty", ""),
		kv("u64", uint64(1<<63+5)),
		kv("i64", int64(-1<<62)),
		kv("f64", math.Pi),
		kv("a.u8", arr(TypeUint8, []uint8{0, 255})),
		kv("a.i8", arr(TypeInt8, []int8{-128, 127})),
		kv("a.u16", arr(TypeUint16, []uint16{1, 65535})),
		kv("a.i16", arr(TypeInt16, []int16{-32768, 2})),
		kv("a.u32", arr(TypeUint32, []uint32{7, 1 << 31})),
		kv("a.i32", arr(TypeInt32, []int32{-1, 3})),
		kv("a.f32", arr(TypeFloat32, []float32{0.25, float32(math.Inf(-1))})),
		kv("a.bool", arr(TypeBool, []bool{true, false, true})),
		kv("a.str", arr(TypeString, []string{"a", "", "\u00fc"})),
		kv("a.u64", arr(TypeUint64, []uint64{math.MaxUint64})),
		kv("a.i64", arr(TypeInt64, []int64{math.MinInt64})),
		kv("a.f64", arr(TypeFloat64, []float64{-0.5, 1e300})),
		kv("a.empty", arr(TypeInt32, []int32{})),
		kv("a.nested", arr(TypeArray, []Array{
			arr(TypeInt16, []int16{1, -2}),
			arr(TypeString, []string{"x"}),
			arr(TypeArray, []Array{arr(TypeFloat64, []float64{0.5})}),
			arr(TypeArray, []Array{}),
		})),
	}
}

func TestMetadataEveryTypeEveryVersion(t *testing.T) {
	entries := allTypes()
	for _, version := range []uint32{1, 2, 3} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, version)
		must(t, err)
		r := newRaw(version, 0, uint64(len(entries)))
		for _, e := range entries {
			must(t, w.Add(e.Key, e.Value.x))
			r.kv(e.Key, typeOf(t, e.Value.x)).value(t, e.Value.x)
		}
		must(t, w.Finish())
		if !bytes.Equal(buf.Bytes(), r.b) {
			t.Fatalf("v%d: writer and hand assembly differ:\nwriter %x\n   raw %x", version, buf.Bytes(), r.b)
		}
		f, err := Parse(r.b, "all.gguf")
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		got := f.Metadata()
		if len(got) != len(entries) {
			t.Fatalf("v%d: %d pairs, want %d", version, len(got), len(entries))
		}
		for i, e := range entries {
			g := got[i]
			if g.Key != e.Key || g.Value.Type != typeOf(t, e.Value.x) || !reflect.DeepEqual(g.Value.Any(), e.Value.x) {
				t.Errorf("v%d pair %d: got %q %s %#v, want %q %#v", version, i, g.Key, g.Value.Type, g.Value.Any(), e.Key, e.Value.x)
			}
		}
	}
}

func TestValueString(t *testing.T) {
	cases := []struct {
		x    any
		want string
	}{
		{uint8(7), "7"},
		{int64(-3), "-3"},
		{float32(0.1), "0.1"},
		{"a\nb", `"a\nb"`},
		{true, "true"},
		{[]string{"x", "y"}, `[2 x string: "x", "y"]`},
		{[]int32{}, "[0 x int32]"},
		{[]uint8{1, 2, 3, 4, 5, 6, 7, 8, 9}, "[9 x uint8: 1, 2, 3, 4, 5, 6, 7, 8, ...]"},
		{Array{TypeArray, []Array{{TypeBool, []bool{true}}}}, "[1 x array: [1 x bool: true]]"},
	}
	for _, c := range cases {
		v, err := ValueOf(c.x)
		must(t, err)
		if got := v.String(); got != c.want {
			t.Errorf("String(%#v) = %s, want %s", c.x, got, c.want)
		}
	}
	if _, err := ValueOf(42); err == nil {
		t.Error("ValueOf(int) succeeded; GGUF has no plain int")
	}
	if _, err := ValueOf(Array{TypeInt32, []int64{1}}); err == nil {
		t.Error("ValueOf accepted an array whose Values do not match Elem")
	}
}

func buildAccessorFile(t *testing.T) *File {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, 3)
	must(t, err)
	for _, kv := range []struct {
		k string
		x any
	}{
		{"u8", uint8(5)}, {"u16", uint16(600)}, {"u32", uint32(70000)}, {"u64", uint64(1 << 40)},
		{"i32.pos", int32(9)}, {"i32.neg", int32(-9)}, {"u64.big", uint64(math.MaxUint64)},
		{"f32", float32(0.375)}, {"f64", 2.5}, {"s", "txt"}, {"b", true},
		{"strs", []string{"p", "q"}}, {"f32s", []float32{1.5, -2}}, {"i32s", []int32{3, -4}},
		{"u8s", []uint8{1}},
	} {
		must(t, w.Add(kv.k, kv.x))
	}
	must(t, w.Finish())
	f, err := Parse(buf.Bytes(), "acc.gguf")
	must(t, err)
	return f
}

func TestAccessors(t *testing.T) {
	f := buildAccessorFile(t)
	for key, want := range map[string]uint64{"u8": 5, "u16": 600, "u32": 70000, "u64": 1 << 40, "i32.pos": 9} {
		if got, err := f.Uint(key); err != nil || got != want {
			t.Errorf("Uint(%s) = %d, %v; want %d", key, got, err, want)
		}
	}
	if got, err := f.Int("i32.neg"); err != nil || got != -9 {
		t.Errorf("Int(i32.neg) = %d, %v", got, err)
	}
	if got, err := f.Float("f32"); err != nil || got != 0.375 {
		t.Errorf("Float(f32) = %v, %v", got, err)
	}
	if got, err := f.Float("f64"); err != nil || got != 2.5 {
		t.Errorf("Float(f64) = %v, %v", got, err)
	}
	if got, err := f.Float("u16"); err != nil || got != 600 {
		t.Errorf("Float(u16) = %v, %v", got, err)
	}
	if got, err := f.String("s"); err != nil || got != "txt" {
		t.Errorf("String(s) = %q, %v", got, err)
	}
	if got, err := f.Bool("b"); err != nil || !got {
		t.Errorf("Bool(b) = %v, %v", got, err)
	}
	if got, err := f.Strings("strs"); err != nil || !reflect.DeepEqual(got, []string{"p", "q"}) {
		t.Errorf("Strings = %q, %v", got, err)
	}
	if got, err := f.Float32s("f32s"); err != nil || !reflect.DeepEqual(got, []float32{1.5, -2}) {
		t.Errorf("Float32s = %v, %v", got, err)
	}
	if got, err := f.Int32s("i32s"); err != nil || !reflect.DeepEqual(got, []int32{3, -4}) {
		t.Errorf("Int32s = %v, %v", got, err)
	}
	if !f.Has("s") || f.Has("nope") {
		t.Error("Has is wrong")
	}

	const label = "gguf acc.gguf:"
	_, err := f.Uint("i32.neg")
	wantErr(t, err, label, `"i32.neg"`, "int32 -9", "non-negative integer")
	_, err = f.Uint("s")
	wantErr(t, err, label, `"s"`, `string "txt"`)
	_, err = f.Int("u64.big")
	wantErr(t, err, label, `"u64.big"`, "uint64 18446744073709551615")
	_, err = f.Float("s")
	wantErr(t, err, label, `"s"`, "string", "want a number")
	_, err = f.String("u8")
	wantErr(t, err, label, `"u8"`, "uint8 5", "want string")
	_, err = f.Bool("u8")
	wantErr(t, err, label, `"u8"`, "want bool")
	_, err = f.Strings("u8s")
	wantErr(t, err, label, `"u8s"`, "array of uint8", "want an array of string")
	_, err = f.Float32s("s")
	wantErr(t, err, label, `"s"`, "want array")
	_, err = f.Int32s("f32s")
	wantErr(t, err, label, "array of float32", "want an array of int32")
	_, err = f.Uint("nope")
	wantErr(t, err, label, `"nope"`, "missing")
	if !errors.Is(err, ErrMissing) {
		t.Errorf("missing-key error %v does not wrap ErrMissing", err)
	}
}

// pattern fills n bytes distinctly per tensor.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestTensorsOfEveryType(t *testing.T) {
	type spec struct {
		name       string
		typ        GGMLType
		dims       []uint64
		rows, cols int
		size       int    // hand-computed: rows * (cols / block elements) * block bytes
		offset     uint64 // hand-computed: previous end rounded up to 32
		dtype      tensor.DType
	}
	specs := []spec{
		{"f32", GGMLF32, []uint64{4, 3}, 3, 4, 48, 0, tensor.F32},
		{"vec", GGMLF32, []uint64{5}, 1, 5, 20, 64, tensor.F32},
		{"f16", GGMLF16, []uint64{2, 2, 3}, 6, 2, 24, 96, tensor.F16},
		{"q8", GGMLQ8_0, []uint64{64, 2}, 2, 64, 136, 128, tensor.Q8_0},
		{"q4", GGMLQ4_0, []uint64{32, 1}, 1, 32, 18, 288, tensor.Q4_0},
		{"q4k", GGMLQ4_K, []uint64{256, 1}, 1, 256, 144, 320, tensor.Q4_K},
		{"q6k", GGMLQ6_K, []uint64{256, 2}, 2, 256, 420, 480, tensor.Q6_K},
		{"bf16", GGMLBF16, []uint64{3}, 1, 3, 6, 928, tensor.BF16},
		{"q5k", GGMLType(13), []uint64{256}, 1, 256, 176, 960, tensor.Invalid},
		{"4d", GGMLF32, []uint64{2, 1, 3, 2}, 6, 2, 48, 1152, tensor.F32},
	}
	for _, version := range []uint32{1, 2, 3} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, version)
		must(t, err)
		var all []byte
		for i, s := range specs {
			must(t, w.AddTensor(s.name, s.typ, s.dims...))
			all = append(all, pattern(s.size, byte(i))...)
		}
		// Stream in 13-byte pieces so writes straddle tensor boundaries.
		for len(all) > 0 {
			n := min(13, len(all))
			k, err := w.Write(all[:n])
			if err != nil || k != n {
				t.Fatalf("Write: %d, %v", k, err)
			}
			all = all[n:]
		}
		must(t, w.Finish())
		f, err := Parse(buf.Bytes(), "types.gguf")
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if f.DataOffset()%32 != 0 || uint64(buf.Len()) != f.DataOffset()+1152+48 {
			t.Errorf("v%d: data at %d, file %d bytes", version, f.DataOffset(), buf.Len())
		}
		for i, s := range specs {
			info, ok := f.TensorInfo(s.name)
			if !ok || info.Offset != s.offset || info.Size != uint64(s.size) || info.Type != s.typ || !reflect.DeepEqual(info.Dims, s.dims) {
				t.Errorf("v%d %s: info %+v", version, s.name, info)
			}
			tt, err := f.Tensor(s.name)
			if s.dtype == tensor.Invalid {
				wantErr(t, err, "gguf types.gguf:", `"q5k"`, "q5_K", "id 13")
				continue
			}
			if err != nil {
				t.Fatalf("v%d %s: %v", version, s.name, err)
			}
			if tt.Type != s.dtype || tt.Rows != s.rows || tt.Cols != s.cols || tt.Name != s.name {
				t.Errorf("v%d %s: got %s %dx%d", version, s.name, tt.Type, tt.Rows, tt.Cols)
			}
			if !bytes.Equal(tt.Data, pattern(s.size, byte(i))) {
				t.Errorf("v%d %s: data differs", version, s.name)
			}
		}
		if _, err := f.Tensor("absent"); err == nil {
			t.Error("Tensor(absent) succeeded")
		}
	}
}

func TestCustomAlignment(t *testing.T) {
	// Writer: alignment 64; tensors of 20 and 12 bytes land at 0 and 64.
	var buf bytes.Buffer
	w, err := NewWriter(&buf, 2)
	must(t, err)
	must(t, w.Add(KeyAlignment, uint32(64)))
	must(t, w.AddTensor("a", GGMLF32, 5))
	must(t, w.AddTensor("b", GGMLF32, 3))
	_, err = w.Write(pattern(32, 1))
	must(t, err)
	must(t, w.Finish())
	f, err := Parse(buf.Bytes(), "a64.gguf")
	must(t, err)
	ib, _ := f.TensorInfo("b")
	if f.Alignment() != 64 || f.DataOffset()%64 != 0 || ib.Offset != 64 {
		t.Errorf("alignment %d, data at %d, b at %d", f.Alignment(), f.DataOffset(), ib.Offset)
	}
	b, err := f.Tensor("b")
	must(t, err)
	if !bytes.Equal(b.Data, pattern(32, 1)[20:]) {
		t.Error("tensor b's bytes moved")
	}

	// Hand-assembled: alignment 16, tensors at 0 and 16.
	r := newRaw(3, 2, 1)
	r.kv(KeyAlignment, TypeUint32).u32(16)
	r.tensor("x", 0, 0, 3).tensor("y", 0, 16, 2)
	r.padTo(16)
	dataAt := len(r.b)
	r.f32s(1, 2, 3).u32(0).f32s(4, 5)
	f, err = Parse(r.b, "a16.gguf")
	must(t, err)
	if f.DataOffset() != uint64(dataAt) {
		t.Errorf("data offset %d, want %d", f.DataOffset(), dataAt)
	}
	y, err := f.Tensor("y")
	must(t, err)
	if got := tensor.AsF32(y.Data); !reflect.DeepEqual(got, []float32{4, 5}) {
		t.Errorf("y = %v", got)
	}
}

func TestUnknownTensorTypeIsLazy(t *testing.T) {
	r := newRaw(3, 2, 0)
	r.tensor("odd", 99, 0, 4).tensor("ok", 0, 32, 2)
	r.padTo(32)
	r.b = append(r.b, make([]byte, 32)...)
	r.f32s(7, 8)
	f, err := Parse(r.b, "odd.gguf")
	must(t, err)
	info, _ := f.TensorInfo("odd")
	if info.Size != 0 || info.Type.String() != "ggml_type(99)" || info.Type.Known() {
		t.Errorf("odd info %+v (%s)", info, info.Type)
	}
	_, err = f.Tensor("odd")
	wantErr(t, err, "gguf odd.gguf:", `"odd"`, "id 99")
	ok, err := f.Tensor("ok")
	must(t, err)
	if got := tensor.AsF32(ok.Data); !reflect.DeepEqual(got, []float32{7, 8}) {
		t.Errorf("ok = %v", got)
	}
}

func TestNestingLimit(t *testing.T) {
	nest := func(levels int) []byte {
		r := newRaw(3, 0, 1)
		r.kv("deep", TypeArray)
		for i := 1; i < levels; i++ {
			r.u32(uint32(TypeArray)).u64(1)
		}
		r.u32(uint32(TypeUint8)).u64(1).u8(9)
		return r.b
	}
	f, err := Parse(nest(maxArrayDepth), "deep.gguf")
	must(t, err)
	v, _ := f.Get("deep")
	for i := 1; i < maxArrayDepth; i++ {
		v = v.Any().(Array).elem(0)
	}
	if got := v.Any().(Array).Values; !reflect.DeepEqual(got, []uint8{9}) {
		t.Errorf("innermost = %v", got)
	}
	_, err = Parse(nest(maxArrayDepth+1), "deep.gguf")
	wantErr(t, err, "gguf deep.gguf:", `"deep"`, "nests deeper than 8")
}

// goodV3 is a small valid file: a=1 (uint32) and an f32 tensor "w" of 4.
func goodV3() *raw {
	r := newRaw(3, 1, 1)
	r.kv("a", TypeUint32).u32(1)
	r.tensor("w", 0, 0, 4)
	r.padTo(32)
	return r.f32s(1, 2, 3, 4)
}

func TestMalformed(t *testing.T) {
	withTensors := func(version uint32, dataBytes int, tensors func(r *raw), n uint64) []byte {
		r := newRaw(version, n, 0)
		tensors(r)
		r.padTo(32)
		r.b = append(r.b, make([]byte, dataBytes)...)
		return r.b
	}
	oneKV := func(key string, typ ValueType, value func(r *raw)) []byte {
		r := newRaw(3, 0, 1)
		r.kv(key, typ)
		value(r)
		return r.b
	}
	alignKV := func(typ ValueType, value func(r *raw)) []byte {
		r := newRaw(3, 1, 1)
		r.kv(KeyAlignment, typ)
		value(r)
		r.tensor("w", 0, 0, 4)
		r.padTo(64)
		r.f32s(1, 2, 3, 4)
		return r.b
	}
	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"empty", nil, []string{"magic", "truncated"}},
		{"bad magic", []byte("GGUG\x03\x00\x00\x00"), []string{`magic is "GGUG"`}},
		{"truncated version", newRaw(3, 0, 0).b[:4:4], []string{"version", "truncated"}},
		{"version 0", append([]byte("GGUF"), 0, 0, 0, 0), []string{"version 0 is not supported"}},
		{"version 4", newRaw(4, 0, 0).b, []string{"version 4 is not supported"}},
		{"big endian", append([]byte("GGUF"), 0, 0, 0, 3), []string{"big-endian"}},
		{"2^60 tensors", newRaw(3, 1<<60, 0).b, []string{"1152921504606846976 tensors"}},
		{"2^60 pairs", newRaw(3, 0, 1<<60).b, []string{"1152921504606846976 metadata pairs"}},
		{"2^64-1 both", newRaw(3, math.MaxUint64, math.MaxUint64).b, []string{"18446744073709551615 tensors"}},
		{"v1 max counts", newRaw(1, math.MaxUint32, math.MaxUint32).b, []string{"4294967295 tensors"}},
		{"2^62 key", newRaw(3, 0, 1).u64(1 << 62).u64(0).u64(0).b, []string{"metadata pair 0", "length 4611686018427387904", "exceeds"}},
		{"2^62 string", oneKV("s", TypeString, func(r *raw) { r.u64(1 << 62) }), []string{`"s"`, "length 4611686018427387904"}},
		{"2^62 array", oneKV("a", TypeArray, func(r *raw) { r.u32(uint32(TypeUint32)).u64(1 << 62) }),
			[]string{`"a"`, "array of 4611686018427387904 uint32"}},
		{"2^61 uint64s", oneKV("a", TypeArray, func(r *raw) { r.u32(uint32(TypeUint64)).u64(1 << 61) }),
			[]string{"array of 2305843009213693952 uint64"}},
		{"2^62 strings", oneKV("a", TypeArray, func(r *raw) { r.u32(uint32(TypeString)).u64(1 << 62) }),
			[]string{"array of 4611686018427387904 string"}},
		{"2^62 arrays", oneKV("a", TypeArray, func(r *raw) { r.u32(uint32(TypeArray)).u64(1 << 62) }),
			[]string{"array of 4611686018427387904 array"}},
		{"string in array too long", oneKV("a", TypeArray, func(r *raw) { r.u32(uint32(TypeString)).u64(1).u64(1 << 40) }),
			[]string{"element 0", "length 1099511627776"}},
		{"unknown value type", oneKV("a", 13, func(r *raw) { r.u64(0) }), []string{`"a"`, "unknown value type 13"}},
		{"unknown element type", oneKV("a", TypeArray, func(r *raw) { r.u32(77).u64(0) }), []string{"element type 77"}},
		{"bool 2", oneKV("b", TypeBool, func(r *raw) { r.u8(2) }), []string{`"b"`, "bool", "is 2"}},
		{"bool array 3", oneKV("b", TypeArray, func(r *raw) { r.u32(uint32(TypeBool)).u64(2).u8(1).u8(3) }),
			[]string{"element 1", "is 3"}},
		{"truncated value", oneKV("u", TypeUint32, func(r *raw) { r.u16(1) }), []string{`"u"`, "truncated", "needs 4 bytes"}},
		{"duplicate key", func() []byte {
			r := newRaw(3, 0, 2)
			r.kv("k", TypeUint8).u8(1).kv("k", TypeUint8).u8(2)
			return r.b
		}(), []string{`"k"`, "twice"}},
		{"alignment 0", alignKV(TypeUint32, func(r *raw) { r.u32(0) }), []string{KeyAlignment, "is 0", "power of two"}},
		{"alignment 3", alignKV(TypeUint32, func(r *raw) { r.u32(3) }), []string{"is 3", "power of two"}},
		{"alignment 48", alignKV(TypeUint32, func(r *raw) { r.u32(48) }), []string{"is 48"}},
		{"alignment 2^63", alignKV(TypeUint64, func(r *raw) { r.u64(1 << 63) }), []string{"is 9223372036854775808"}},
		{"alignment string", alignKV(TypeString, func(r *raw) { r.str("32") }), []string{`string "32"`}},
		{"alignment negative", alignKV(TypeInt32, func(r *raw) { r.u32(uint32(0xffffffe0)) }), []string{"int32 -32"}},
		{"n_dims 0", withTensors(3, 16, func(r *raw) { r.tensor("t", 0, 0) }, 1), []string{`"t"`, "n_dims is 0"}},
		{"n_dims 5", withTensors(3, 16, func(r *raw) { r.tensor("t", 0, 0, 1, 1, 1, 1, 1) }, 1), []string{"n_dims is 5"}},
		{"dim 0", withTensors(3, 16, func(r *raw) { r.tensor("t", 0, 0, 4, 0) }, 1), []string{`"t"`, "dimension 1 is 0"}},
		{"elements overflow", withTensors(3, 16, func(r *raw) { r.tensor("t", 0, 0, 1<<32, 1<<32) }, 1),
			[]string{"more than 2^63-1 elements"}},
		{"bytes overflow", withTensors(3, 16, func(r *raw) { r.tensor("t", 0, 0, 1<<62) }, 1),
			[]string{"larger than 2^63-1 bytes"}},
		{"v1 bytes overflow", withTensors(1, 16, func(r *raw) { r.tensor("t", 0, 0, 1<<31, 1<<31) }, 1),
			[]string{"larger than 2^63-1 bytes"}},
		{"partial block", withTensors(3, 64, func(r *raw) { r.tensor("t", 8, 0, 33) }, 1),
			[]string{"33 elements", "q8_0 blocks of 32"}},
		{"misaligned", withTensors(3, 64, func(r *raw) { r.tensor("t", 0, 4, 4) }, 1),
			[]string{`"t"`, "offset 4 is not a multiple of alignment 32"}},
		{"offset overflow", withTensors(3, 64, func(r *raw) { r.tensor("t", 0, math.MaxUint64-31, 4) }, 1),
			[]string{`"t"`, "run past"}},
		{"past end", withTensors(3, 16, func(r *raw) { r.tensor("t", 0, 0, 8) }, 1),
			[]string{`"t"`, "32 bytes at offset 0 run past the 16-byte data section"}},
		{"unknown type past end", withTensors(3, 16, func(r *raw) { r.tensor("t", 99, 1<<40, 8) }, 1),
			[]string{`"t"`, "run past"}},
		{"overlap", withTensors(3, 96, func(r *raw) { r.tensor("a", 0, 0, 16).tensor("b", 0, 32, 8) }, 2),
			[]string{`"a" [0, 64) overlaps tensor "b" [32, 64)`}},
		{"same offset", withTensors(3, 96, func(r *raw) { r.tensor("a", 0, 32, 4).tensor("b", 0, 32, 4) }, 2),
			[]string{"overlaps"}},
		{"duplicate tensor", withTensors(3, 64, func(r *raw) { r.tensor("a", 0, 0, 4).tensor("a", 0, 32, 4) }, 2),
			[]string{`name "a" appears twice`}},
		{"data past eof", func() []byte {
			r := newRaw(3, 1, 0)
			r.tensor("t", 0, 0, 4)
			return r.b
		}(), []string{"past the end of the file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data, "bad.gguf")
			wantErr(t, err, "gguf bad.gguf:", c.want...)
		})
	}
	// The same files minus their defect parse: the cases fail for the stated reason.
	if _, err := Parse(goodV3().b, "good.gguf"); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(alignKV(TypeUint32, func(r *raw) { r.u32(64) }), "good.gguf"); err != nil {
		t.Fatal(err)
	}
}

// everyPrefixFails parses each strict prefix of a valid file; all must fail.
func everyPrefixFails(t *testing.T, b []byte) {
	t.Helper()
	if _, err := Parse(b, "whole.gguf"); err != nil {
		t.Fatalf("whole file: %v", err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := Parse(b[:n], "cut.gguf"); err == nil {
			t.Fatalf("prefix of %d of %d bytes parsed without error", n, len(b))
		} else if strings.Contains(err.Error(), "\n") {
			t.Fatalf("prefix %d: multi-line error %q", n, err)
		}
	}
}

func TestEveryPrefixFails(t *testing.T) {
	for _, version := range []uint32{1, 2, 3} {
		everyPrefixFails(t, smallFile(t, version))
	}
	everyPrefixFails(t, goodV3().b)
	for v := range literalFiles {
		everyPrefixFails(t, unhex(t, literalFiles[v]))
	}
}

// smallFile has every metadata type and three tensors of different types.
func smallFile(t testing.TB, version uint32) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, version)
	must(t, err)
	for _, kv := range allTypes() {
		must(t, w.Add(kv.Key, kv.Value.x))
	}
	must(t, w.AddTensor("a", GGMLF32, 3))
	must(t, w.AddTensor("b", GGMLQ8_0, 32, 2))
	must(t, w.AddTensor("c", GGMLF16, 5))
	_, err = w.Write(pattern(12+68+10, 3))
	must(t, err)
	must(t, w.Finish())
	return buf.Bytes()
}

// TestGGMLTypesAgreeWithTensor cross-checks this package's GGML block sizes
// (from ggml-common.h) with the tensor package's, written separately.
func TestGGMLTypesAgreeWithTensor(t *testing.T) {
	want := map[GGMLType]tensor.DType{0: tensor.F32, 1: tensor.F16, 2: tensor.Q4_0, 8: tensor.Q8_0,
		12: tensor.Q4_K, 14: tensor.Q6_K, 30: tensor.BF16}
	for id, dt := range want {
		got, ok := id.DType()
		if !ok || got != dt {
			t.Errorf("GGML id %d maps to %s, want %s", id, got, dt)
		}
		g := ggmlTypes[id]
		if g.blockElems != uint64(dt.BlockElems()) || g.blockBytes != uint64(dt.BlockBytes()) {
			t.Errorf("%s: gguf says %d elements in %d bytes, tensor says %d in %d",
				dt, g.blockElems, g.blockBytes, dt.BlockElems(), dt.BlockBytes())
		}
		back, err := GGMLTypeOf(dt)
		if err != nil || back != id {
			t.Errorf("GGMLTypeOf(%s) = %d, %v; want %d", dt, back, err, id)
		}
	}
	if _, err := GGMLTypeOf(tensor.Q8G); err == nil {
		t.Error("GGMLTypeOf(q8g) succeeded")
	}
	if _, ok := GGMLType(13).DType(); ok || GGMLType(13).String() != "q5_K" {
		t.Error("q5_K must be known by name but not computable")
	}
	if ValueType(13).String() != "type(13)" || ValueType(13).Valid() {
		t.Error("value type 13 must be invalid")
	}
}
