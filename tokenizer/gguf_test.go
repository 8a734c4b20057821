package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
)

// ggufV1 is a throwaway reader for the metadata of a GGUF version 1 file (all
// counts and string lengths u32), enough to pull out the vocabulary without
// depending on the gguf package. It is only ever given the shared test file.
type ggufV1 struct {
	data []byte
	off  int
}

func (r *ggufV1) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.data)-r.off {
		return nil, fmt.Errorf("truncated at offset %d wanting %d bytes", r.off, n)
	}
	b := r.data[r.off : r.off+n]
	r.off += n
	return b, nil
}

func (r *ggufV1) u32() (uint32, error) {
	b, err := r.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *ggufV1) str() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.take(int(n))
	return string(b), err
}

// scalarSize gives the byte size of GGUF scalar value types.
var scalarSize = map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

// value reads one value of type typ and returns it as a Go value for the
// types the vocabulary uses (u32, string, arrays of string/f32/i32); other
// values are skipped and returned as nil.
func (r *ggufV1) value(typ uint32) (any, error) {
	switch typ {
	case 8:
		return r.str()
	case 9:
		return r.array()
	case 4:
		return r.u32()
	}
	size, ok := scalarSize[typ]
	if !ok {
		return nil, fmt.Errorf("unknown value type %d at offset %d", typ, r.off)
	}
	_, err := r.take(size)
	return nil, err
}

func (r *ggufV1) array() (any, error) {
	elem, err := r.u32()
	if err != nil {
		return nil, err
	}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	switch elem {
	case 8:
		out := []string{}
		for range n {
			s, err := r.str()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	case 5, 6:
		b, err := r.take(4 * int(n))
		if err != nil {
			return nil, err
		}
		f32, i32 := []float32{}, []int32{}
		for i := 0; i < len(b); i += 4 {
			u := binary.LittleEndian.Uint32(b[i:])
			f32, i32 = append(f32, math.Float32frombits(u)), append(i32, int32(u))
		}
		if elem == 6 {
			return f32, nil
		}
		return i32, nil
	}
	for range n {
		if _, err := r.value(elem); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// readGGUFVocab returns the tokenizer.ggml.* metadata of a GGUF v1 file.
func readGGUFVocab(data []byte) (Vocab, error) {
	r := &ggufV1{data: data}
	magic, err := r.take(4)
	if err != nil || string(magic) != "GGUF" {
		return Vocab{}, fmt.Errorf("not a GGUF file")
	}
	var head [3]uint32 // version, n_tensors, n_kv
	for i := range head {
		if head[i], err = r.u32(); err != nil {
			return Vocab{}, err
		}
	}
	if head[0] != 1 {
		return Vocab{}, fmt.Errorf("GGUF version %d, this reader handles 1", head[0])
	}
	kv := map[string]any{}
	for range head[2] {
		key, err := r.str()
		if err != nil {
			return Vocab{}, err
		}
		typ, err := r.u32()
		if err != nil {
			return Vocab{}, err
		}
		if kv[key], err = r.value(typ); err != nil {
			return Vocab{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	v := Vocab{}
	var ok [5]bool
	v.Pieces, ok[0] = kv["tokenizer.ggml.tokens"].([]string)
	v.Scores, ok[1] = kv["tokenizer.ggml.scores"].([]float32)
	v.Types, ok[2] = kv["tokenizer.ggml.token_type"].([]int32)
	bos, okB := kv["tokenizer.ggml.bos_token_id"].(uint32)
	eos, okE := kv["tokenizer.ggml.eos_token_id"].(uint32)
	ok[3], ok[4] = okB, okE
	if slices.Contains(ok[:], false) {
		return Vocab{}, fmt.Errorf("vocabulary keys missing or of unexpected type: %v", ok)
	}
	if model, _ := kv["tokenizer.ggml.model"].(string); model != "llama" {
		return Vocab{}, fmt.Errorf("tokenizer.ggml.model = %q, want llama", model)
	}
	v.BOS, v.EOS = int(bos), int(eos)
	return v, nil
}

func loadGGUFTokenizer(t *testing.T) *SentencePiece {
	t.Helper()
	data, err := os.ReadFile(testmodels.Path(t, testmodels.Stories260KGGUF))
	if err != nil {
		t.Fatal(err)
	}
	v, err := readGGUFVocab(data)
	if err != nil {
		t.Fatalf("reading GGUF vocabulary: %v", err)
	}
	if v.Pieces[265] != "▁the" {
		t.Fatalf("GGUF piece 265 = %q, expected the word-mark spelling ▁the", v.Pieces[265])
	}
	tok, err := New(v)
	if err != nil {
		t.Fatalf("New(GGUF vocabulary): %v", err)
	}
	return tok
}

func TestGGUFMatchesLlama2c(t *testing.T) {
	fromGGUF := loadGGUFTokenizer(t)
	fromBin := loadTok512(t)

	a, b := fromGGUF.Vocab(), fromBin.Vocab()
	if !slices.Equal(a.Pieces, b.Pieces) || !slices.Equal(a.Scores, b.Scores) || !slices.Equal(a.Types, b.Types) || a.BOS != b.BOS || a.EOS != b.EOS {
		t.Errorf("normalised vocabularies differ between GGUF and tok512.bin")
	}
	for _, c := range llama2cCases {
		if got := fromGGUF.Encode(c.text, false, false); !slices.Equal(got, c.ids) {
			t.Errorf("GGUF Encode(%q) = %v, llama2.c gives %v", c.text, got, c.ids)
		}
		if got := fromGGUF.DecodeAll(c.ids); got != c.text {
			t.Errorf("GGUF DecodeAll(ids of %q) = %q", c.text, got)
		}
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for range 2000 {
		s := randomText(rng, 30)
		x, y := fromGGUF.Encode(s, true, true), fromBin.Encode(s, true, true)
		if !slices.Equal(x, y) {
			t.Fatalf("Encode(%q): GGUF %v, tok512.bin %v", s, x, y)
		}
		if dx, dy := fromGGUF.DecodeAll(x), fromBin.DecodeAll(y); dx != s || dy != s {
			t.Fatalf("DecodeAll(Encode(%q)): GGUF %q, tok512.bin %q", s, dx, dy)
		}
	}
	for id := range fromBin.VocabSize() {
		for _, prev := range []int{fromBin.BOS(), 410, 13} {
			if x, y := fromGGUF.Decode(prev, id), fromBin.Decode(prev, id); x != y {
				t.Errorf("Decode(%d, %d): GGUF %q, tok512.bin %q", prev, id, x, y)
			}
		}
	}
}
