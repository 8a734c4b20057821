package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sort"
)

// magic is "GGUF" as the first four bytes of the file.
const magic = "GGUF"

// DefaultAlignment applies when general.alignment is absent.
const DefaultAlignment = 32

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// decoder reads little-endian fields from the header, refusing to read past the
// end. Every error names the field and the offset; the caller adds the file name.
type decoder struct {
	buf     []byte
	pos     int
	lenSize int // bytes of a count or string length: 4 in version 1, 8 later
}

func (d *decoder) left() uint64 { return uint64(len(d.buf) - d.pos) }

func (d *decoder) take(n int, what string) ([]byte, error) {
	if n < 0 || n > len(d.buf)-d.pos {
		return nil, fmt.Errorf("%s: truncated: needs %d bytes at offset %d, file has %d", what, n, d.pos, len(d.buf))
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	b, err := d.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	b, err := d.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a count, string length or dimension: 32 bits in version 1, 64 later.
func (d *decoder) count(what string) (uint64, error) {
	if d.lenSize == 4 {
		v, err := d.u32(what)
		return uint64(v), err
	}
	return d.u64(what)
}

// str reads a length-prefixed string, checking the length against the bytes left
// before allocating. The bytes are copied, so strings outlive the mapping.
func (d *decoder) str(what string) (string, error) {
	n, err := d.count(what + " length")
	if err != nil {
		return "", err
	}
	if n > d.left() {
		return "", fmt.Errorf("%s: length %d at offset %d exceeds the %d bytes left", what, n, d.pos-d.lenSize, d.left())
	}
	b, _ := d.take(int(n), what)
	return string(b), nil
}

// minEncoded is the fewest bytes a value of type t can occupy, used to bound
// element counts before allocating. Zero means t is not a valid type.
func (d *decoder) minEncoded(t ValueType) uint64 {
	switch t {
	case TypeString:
		return uint64(d.lenSize)
	case TypeArray:
		return 4 + uint64(d.lenSize)
	}
	return uint64(t.fixedSize())
}

// value reads a value of type t; depth is the array nesting level of the value.
func (d *decoder) value(t ValueType, depth int) (Value, error) {
	switch t {
	case TypeString:
		s, err := d.str("string")
		return Value{t, s}, err
	case TypeArray:
		a, err := d.array(depth + 1)
		return Value{t, a}, err
	}
	size := t.fixedSize()
	if size == 0 {
		return Value{}, fmt.Errorf("unknown value type %d at offset %d", uint32(t), d.pos-4)
	}
	at := d.pos
	b, err := d.take(size, t.String())
	if err != nil {
		return Value{}, err
	}
	if t == TypeBool && b[0] > 1 {
		return Value{}, fmt.Errorf("bool at offset %d is %d, want 0 or 1", at, b[0])
	}
	return Value{t, scalar(t, b)}, nil
}

// array reads an array header and its elements. depth counts this array.
func (d *decoder) array(depth int) (Array, error) {
	if depth > maxArrayDepth {
		return Array{}, fmt.Errorf("array at offset %d nests deeper than %d levels", d.pos, maxArrayDepth)
	}
	et, err := d.u32("array element type")
	if err != nil {
		return Array{}, err
	}
	elem := ValueType(et)
	if !elem.Valid() {
		return Array{}, fmt.Errorf("array element type %d at offset %d is not a GGUF value type", et, d.pos-4)
	}
	n, err := d.count("array length")
	if err != nil {
		return Array{}, err
	}
	if min := d.minEncoded(elem); n > d.left()/min {
		return Array{}, fmt.Errorf("array of %d %s at offset %d needs at least %d bytes each, only %d bytes left",
			n, elem, d.pos-d.lenSize, min, d.left())
	}
	switch elem {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			if out[i], err = d.str("string"); err != nil {
				return Array{}, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return Array{elem, out}, nil
	case TypeArray:
		out := make([]Array, n)
		for i := range out {
			if out[i], err = d.array(depth + 1); err != nil {
				return Array{}, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return Array{elem, out}, nil
	}
	at := d.pos
	b, _ := d.take(int(n)*elem.fixedSize(), "array") // bounded by the check above
	if elem == TypeBool {
		for i, c := range b {
			if c > 1 {
				return Array{}, fmt.Errorf("element %d: bool at offset %d is %d, want 0 or 1", i, at+i, c)
			}
		}
	}
	return Array{elem, numbers(elem, b)}, nil
}

// scalar decodes one fixed-size value.
func scalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeUint16:
		return le.Uint16(b)
	case TypeInt16:
		return int16(le.Uint16(b))
	case TypeUint32:
		return le.Uint32(b)
	case TypeInt32:
		return int32(le.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b))
	case TypeBool:
		return b[0] == 1
	case TypeUint64:
		return le.Uint64(b)
	case TypeInt64:
		return int64(le.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	return nil
}

// numbers decodes a packed run of fixed-size values into a typed slice.
func numbers(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append([]uint8{}, b...)
	case TypeInt8:
		return decodeEach(b, 1, func(p []byte) int8 { return int8(p[0]) })
	case TypeUint16:
		return decodeEach(b, 2, le.Uint16)
	case TypeInt16:
		return decodeEach(b, 2, func(p []byte) int16 { return int16(le.Uint16(p)) })
	case TypeUint32:
		return decodeEach(b, 4, le.Uint32)
	case TypeInt32:
		return decodeEach(b, 4, func(p []byte) int32 { return int32(le.Uint32(p)) })
	case TypeFloat32:
		return decodeEach(b, 4, func(p []byte) float32 { return math.Float32frombits(le.Uint32(p)) })
	case TypeBool:
		return decodeEach(b, 1, func(p []byte) bool { return p[0] == 1 })
	case TypeUint64:
		return decodeEach(b, 8, le.Uint64)
	case TypeInt64:
		return decodeEach(b, 8, func(p []byte) int64 { return int64(le.Uint64(p)) })
	case TypeFloat64:
		return decodeEach(b, 8, func(p []byte) float64 { return math.Float64frombits(le.Uint64(p)) })
	}
	return nil
}

func decodeEach[T any](b []byte, size int, get func([]byte) T) []T {
	out := make([]T, len(b)/size)
	for i := range out {
		out[i] = get(b[i*size : (i+1)*size])
	}
	return out
}

// Parse decodes a GGUF file (version 1, 2 or 3) held in data, usually a memory
// mapping. Tensors returned later are views into data, which must stay valid and
// unmodified while the File is used. name labels errors.
//
// Every tensor info is parsed and, when its GGML type's block size is known,
// bound- and overlap-checked here; a type Seam cannot compute with (or an id it
// does not know at all) is only an error when Tensor is asked for that tensor,
// so that files with exotic extra tensors can still be inspected.
func Parse(data []byte, name string) (*File, error) {
	f, err := parse(data, name)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", name, err)
	}
	return f, nil
}

func parse(data []byte, name string) (*File, error) {
	f := &File{name: name, data: data}
	d := &decoder{buf: data}
	nTensors, nKV, err := f.readPreamble(d)
	if err != nil {
		return nil, err
	}
	if err := f.readMetadata(d, nKV); err != nil {
		return nil, err
	}
	if err := f.readAlignment(); err != nil {
		return nil, err
	}
	if err := f.readTensorInfos(d, nTensors); err != nil {
		return nil, err
	}
	if err := f.layoutData(d.pos); err != nil {
		return nil, err
	}
	return f, nil
}

// readPreamble checks magic and version and reads the two counts, bounding them
// by the bytes left (each entry needs a minimum number of bytes).
func (f *File) readPreamble(d *decoder) (nTensors, nKV uint64, err error) {
	m, err := d.take(4, "magic")
	if err != nil {
		return 0, 0, err
	}
	if string(m) != magic {
		return 0, 0, fmt.Errorf("magic is %q, want %q", m, magic)
	}
	v, err := d.u32("version")
	if err != nil {
		return 0, 0, err
	}
	switch {
	case v >= 1 && v <= 3:
	case bits.ReverseBytes32(v) >= 1 && bits.ReverseBytes32(v) <= 3:
		return 0, 0, fmt.Errorf("version field reads %#x: a big-endian GGUF file, which Seam does not read", v)
	default:
		return 0, 0, fmt.Errorf("version %d is not supported (Seam reads 1, 2 and 3)", v)
	}
	f.version = v
	d.lenSize = 8
	if v == 1 {
		d.lenSize = 4
	}
	if nTensors, err = d.count("tensor count"); err != nil {
		return 0, 0, err
	}
	if nKV, err = d.count("metadata count"); err != nil {
		return 0, 0, err
	}
	// A key/value pair needs a key length, a type and a value of at least one
	// byte; a tensor info a name length, n_dims, one dim, a type and an offset.
	minKV := uint64(d.lenSize) + 4 + 1
	minTensor := 2*uint64(d.lenSize) + 4 + 4 + 8
	need, overflow := addMul(nKV, minKV, nTensors, minTensor)
	if overflow || need > d.left() {
		return 0, 0, fmt.Errorf("%d tensors (at least %d bytes each) and %d metadata pairs (at least %d bytes each) do not fit in the %d bytes after the header",
			nTensors, minTensor, nKV, minKV, d.left())
	}
	return nTensors, nKV, nil
}

// addMul returns a*x + b*y and whether it overflowed 64 bits.
func addMul(a, x, b, y uint64) (uint64, bool) {
	h1, l1 := bits.Mul64(a, x)
	h2, l2 := bits.Mul64(b, y)
	sum, carry := bits.Add64(l1, l2, 0)
	return sum, h1 != 0 || h2 != 0 || carry != 0
}

func (f *File) readMetadata(d *decoder, n uint64) error {
	f.kvs = make([]KV, 0, n)
	f.kvIndex = make(map[string]int, n)
	for i := uint64(0); i < n; i++ {
		at := d.pos
		key, err := d.str("metadata key")
		if err != nil {
			return fmt.Errorf("metadata pair %d: %w", i, err)
		}
		if _, dup := f.kvIndex[key]; dup {
			return fmt.Errorf("metadata key %q at offset %d appears twice", key, at)
		}
		t, err := d.u32("value type")
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		f.kvIndex[key] = len(f.kvs)
		f.kvs = append(f.kvs, KV{Key: key, Value: v})
	}
	return nil
}

// readAlignment applies general.alignment: a non-zero power of two (any integer
// type is accepted; the specification says uint32).
func (f *File) readAlignment() error {
	f.alignment = DefaultAlignment
	v, ok := f.Get(KeyAlignment)
	if !ok {
		return nil
	}
	a, isUint := v.asUint()
	if !isUint {
		return fmt.Errorf("metadata %q is %s %s, want a non-negative integer", KeyAlignment, v.Type, v)
	}
	if a == 0 || a&(a-1) != 0 || a > maxInt64 {
		return fmt.Errorf("metadata %q is %d, want a non-zero power of two", KeyAlignment, a)
	}
	f.alignment = a
	return nil
}

const maxInt64 = math.MaxInt64

func (f *File) readTensorInfos(d *decoder, n uint64) error {
	f.tensors = make([]TensorInfo, 0, n)
	f.tensorIndex = make(map[string]int, n)
	for i := uint64(0); i < n; i++ {
		info, err := d.tensorInfo()
		if err != nil {
			if info.Name != "" {
				return fmt.Errorf("tensor %d %q: %w", i, info.Name, err)
			}
			return fmt.Errorf("tensor %d: %w", i, err)
		}
		if _, dup := f.tensorIndex[info.Name]; dup {
			return fmt.Errorf("tensor %d: name %q appears twice", i, info.Name)
		}
		f.tensorIndex[info.Name] = len(f.tensors)
		f.tensors = append(f.tensors, info)
	}
	return nil
}

// tensorInfo reads one tensor info; on error the returned info carries the name
// when it was read.
func (d *decoder) tensorInfo() (TensorInfo, error) {
	var info TensorInfo
	var err error
	if info.Name, err = d.str("name"); err != nil {
		return TensorInfo{}, err
	}
	nd, err := d.u32("n_dims")
	if err != nil {
		return info, err
	}
	if nd == 0 || nd > maxDims {
		return info, fmt.Errorf("n_dims is %d, want 1..%d", nd, maxDims)
	}
	info.Dims = make([]uint64, nd)
	for j := range info.Dims {
		if info.Dims[j], err = d.count("dimension"); err != nil {
			return info, err
		}
		if info.Dims[j] == 0 {
			return info, fmt.Errorf("dimension %d is 0", j)
		}
	}
	t, err := d.u32("type")
	if err != nil {
		return info, err
	}
	info.Type = GGMLType(t)
	if info.Offset, err = d.u64("offset"); err != nil {
		return info, err
	}
	if _, err := elementCount(info.Dims); err != nil {
		return info, err
	}
	if info.Type.Known() {
		if info.Size, err = byteSize(info.Dims, info.Type); err != nil {
			return info, err
		}
	}
	return info, nil
}

// elementCount is the product of dims, failing when it exceeds int64 (ggml
// counts elements in int64).
func elementCount(dims []uint64) (uint64, error) {
	n := uint64(1)
	for _, d := range dims {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > maxInt64 {
			return 0, fmt.Errorf("dimensions %v hold more than 2^63-1 elements", dims)
		}
		n = lo
	}
	return n, nil
}

// byteSize is the encoded size of a tensor of a known type: rows (the product
// of dims[1:]) of dims[0] elements, each row a whole number of blocks.
func byteSize(dims []uint64, t GGMLType) (uint64, error) {
	g := ggmlTypes[t]
	if dims[0]%g.blockElems != 0 {
		return 0, fmt.Errorf("row of %d elements is not a whole number of %s blocks of %d", dims[0], t, g.blockElems)
	}
	size := dims[0] / g.blockElems
	for _, factor := range append([]uint64{g.blockBytes}, dims[1:]...) {
		hi, lo := bits.Mul64(size, factor)
		if hi != 0 || lo > maxInt64 {
			return 0, fmt.Errorf("%s tensor of dimensions %v is larger than 2^63-1 bytes", t, dims)
		}
		size = lo
	}
	return size, nil
}

// alignUp rounds x up to a multiple of the power of two a, reporting overflow.
func alignUp(x, a uint64) (uint64, bool) {
	sum, carry := bits.Add64(x, a-1, 0)
	return sum &^ (a - 1), carry == 0
}

// layoutData places the data section at the aligned end of the header and checks
// every tensor's offset alignment, extent and overlap.
func (f *File) layoutData(headerEnd int) error {
	start, ok := alignUp(uint64(headerEnd), f.alignment)
	if !ok {
		return fmt.Errorf("header end %d rounded up to alignment %d overflows", headerEnd, f.alignment)
	}
	f.dataStart = start
	if len(f.tensors) == 0 {
		return nil
	}
	if start > uint64(len(f.data)) {
		return fmt.Errorf("header ends at %d, so tensor data would start at %d, past the end of the file at %d",
			headerEnd, start, len(f.data))
	}
	dataLen := uint64(len(f.data)) - start
	for i := range f.tensors {
		if err := f.checkExtent(&f.tensors[i], dataLen); err != nil {
			return err
		}
	}
	return f.checkOverlaps()
}

func (f *File) checkExtent(t *TensorInfo, dataLen uint64) error {
	if t.Offset%f.alignment != 0 {
		return fmt.Errorf("tensor %q: offset %d is not a multiple of alignment %d", t.Name, t.Offset, f.alignment)
	}
	end, carry := bits.Add64(t.Offset, t.Size, 0)
	if carry != 0 || end > dataLen {
		return fmt.Errorf("tensor %q: %d bytes at offset %d run past the %d-byte data section (which starts at %d in a %d-byte file)",
			t.Name, t.Size, t.Offset, dataLen, f.dataStart, len(f.data))
	}
	return nil
}

// checkOverlaps sorts the sized tensors by offset and requires each to end at or
// before the next begins. Tensors of unknown types have no known size and are
// skipped (Tensor refuses them anyway).
func (f *File) checkOverlaps() error {
	var order []int
	for i := range f.tensors {
		if f.tensors[i].Type.Known() {
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool { return f.tensors[order[a]].Offset < f.tensors[order[b]].Offset })
	for k := 1; k < len(order); k++ {
		prev, cur := &f.tensors[order[k-1]], &f.tensors[order[k]]
		if prev.Offset+prev.Size > cur.Offset {
			return fmt.Errorf("tensor %q [%d, %d) overlaps tensor %q [%d, %d)",
				prev.Name, prev.Offset, prev.Offset+prev.Size, cur.Name, cur.Offset, cur.Offset+cur.Size)
		}
	}
	return nil
}
