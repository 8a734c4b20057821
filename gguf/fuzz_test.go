package gguf

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, text := range literalFiles {
		f.Add(unhex(f, text))
	}
	for _, v := range []uint32{1, 2, 3} {
		f.Add(smallFile(f, v))
	}
	f.Add(goodV3().b)
	f.Add(baseLlama(false).bytes(f))
	f.Add(baseLlama(true).bytes(f))
	f.Add(baseArch("qwen2", false).bytes(f))
	f.Add(baseArch("qwen3", true).bytes(f))
	l3 := baseLlama(true)
	l3.set("llama.rope.scaling.type", "llama3")
	l3.add("rope_freqs.weight", 2)
	f.Add(l3.bytes(f))
	r := newRaw(3, 2, 1)
	r.kv(KeyAlignment, TypeUint32).u32(16)
	r.tensor("x", 0, 0, 3).tensor("y", 99, 16, 2)
	r.padTo(16)
	f.Add(r.f32s(1, 2, 3, 0, 4, 5).b)
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "fuzz.gguf")
		if err != nil {
			if strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "gguf fuzz.gguf: ") {
				t.Fatalf("badly formed error %q", err)
			}
			return
		}
		exercise(t, file, data)
		roundTrip(t, file)
	})
}

// exercise calls every reader entry point; none may panic, and tensor views
// must lie inside the input.
func exercise(t *testing.T, f *File, data []byte) {
	for _, kv := range f.Metadata() {
		_ = kv.Value.String()
	}
	for _, info := range f.Tensors() {
		if info.Type.Known() && f.DataOffset()+info.Offset+info.Size > uint64(len(data)) {
			t.Fatalf("tensor %q [%d+%d) lies past the %d-byte input", info.Name, info.Offset, info.Size, len(data))
		}
		tt, err := f.Tensor(info.Name)
		if err == nil && uint64(len(tt.Data)) != info.Size {
			t.Fatalf("tensor %q has %d bytes, info says %d", info.Name, len(tt.Data), info.Size)
		}
	}
	for _, err := range []error{second(f.LlamaConfig()), second(f.Vocab()), second(f.LlamaWeights())} {
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error %q", err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// roundTrip rewrites a parsed file with Writer and parses it again: metadata,
// tensor infos (offsets aside) and tensor bytes must survive.
func roundTrip(t *testing.T, f *File) {
	if v, ok := f.Get(KeyAlignment); ok && v.Type != TypeUint32 {
		return // the Writer only writes the specification's uint32 alignment
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, f.Version())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range f.Metadata() {
		if err := w.AddValue(kv.Key, kv.Value); err != nil {
			t.Fatalf("rewriting metadata: %v", err)
		}
	}
	for _, info := range f.Tensors() {
		if !info.Type.Known() {
			return // unknown sizes cannot be rewritten
		}
		if err := w.AddTensor(info.Name, info.Type, info.Dims...); err != nil {
			t.Fatalf("rewriting tensor: %v", err)
		}
	}
	for _, info := range f.Tensors() {
		start := f.DataOffset() + info.Offset
		if _, err := w.Write(f.data[start : start+info.Size]); err != nil {
			t.Fatalf("rewriting tensor data: %v", err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatalf("rewriting: %v", err)
	}
	g, err := Parse(buf.Bytes(), "again.gguf")
	if err != nil {
		t.Fatalf("rewritten file does not parse: %v", err)
	}
	if a, b := fmt.Sprintf("%#v", f.Metadata()), fmt.Sprintf("%#v", g.Metadata()); a != b {
		t.Fatalf("metadata changed:\n%s\n%s", a, b)
	}
	ft, gt := f.Tensors(), g.Tensors()
	for i := range ft {
		a, b := ft[i], gt[i]
		if a.Name != b.Name || a.Type != b.Type || a.Size != b.Size || fmt.Sprint(a.Dims) != fmt.Sprint(b.Dims) {
			t.Fatalf("tensor %d changed: %+v vs %+v", i, a, b)
		}
		sa, sb := f.DataOffset()+a.Offset, g.DataOffset()+b.Offset
		if !bytes.Equal(f.data[sa:sa+a.Size], g.data[sb:sb+b.Size]) {
			t.Fatalf("tensor %q bytes changed", a.Name)
		}
	}
}
