package gguf

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// llamaSpec describes a tiny synthetic llama file: dim 8, hidden 16, 2 layers,
// 2 heads, 1 kv head (kv dim 4), vocab 10, context 32.
type llamaSpec struct {
	kvs     []KV
	tensors []tdecl
	types   map[string]GGMLType // overrides f32
}

type tdecl struct {
	name string
	dims []uint64
}

func baseLlama(untied bool) *llamaSpec {
	s := &llamaSpec{types: map[string]GGMLType{}}
	s.set(KeyArchitecture, "llama")
	s.set("llama.embedding_length", uint32(8))
	s.set("llama.feed_forward_length", uint32(16))
	s.set("llama.block_count", uint32(2))
	s.set("llama.attention.head_count", uint32(2))
	s.set("llama.attention.head_count_kv", uint32(1))
	s.set("llama.context_length", uint32(32))
	s.set(KeyTokenizerModel, "llama")
	pieces := []string{"<unk>", "<s>", "</s>", "a", "b", "c", "d", "e", "f", "g"}
	s.set(KeyTokens, pieces)
	s.set(KeyScores, []float32{0, 0, 0, -1, -2, -3, -4, -5, -6, -7})
	s.set(KeyTokenTypes, []int32{2, 3, 3, 1, 1, 1, 1, 1, 1, 1})
	s.add("token_embd.weight", 8, 10)
	for i := 0; i < 2; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		s.add(p+"attn_norm.weight", 8)
		s.add(p+"attn_q.weight", 8, 8)
		s.add(p+"attn_k.weight", 8, 4)
		s.add(p+"attn_v.weight", 8, 4)
		s.add(p+"attn_output.weight", 8, 8)
		s.add(p+"ffn_norm.weight", 8)
		s.add(p+"ffn_gate.weight", 8, 16)
		s.add(p+"ffn_down.weight", 16, 8)
		s.add(p+"ffn_up.weight", 8, 16)
	}
	s.add("output_norm.weight", 8)
	if untied {
		s.add("output.weight", 8, 10)
	}
	return s
}

func (s *llamaSpec) set(key string, x any) {
	v, err := ValueOf(x)
	if err != nil {
		panic(err)
	}
	for i := range s.kvs {
		if s.kvs[i].Key == key {
			s.kvs[i].Value = v
			return
		}
	}
	s.kvs = append(s.kvs, KV{key, v})
}

func (s *llamaSpec) drop(key string) {
	for i := range s.kvs {
		if s.kvs[i].Key == key {
			s.kvs = append(s.kvs[:i], s.kvs[i+1:]...)
			return
		}
	}
}

func (s *llamaSpec) add(name string, dims ...uint64) {
	s.tensors = append(s.tensors, tdecl{name, dims})
}

func (s *llamaSpec) dropTensor(name string) {
	for i := range s.tensors {
		if s.tensors[i].name == name {
			s.tensors = append(s.tensors[:i], s.tensors[i+1:]...)
			return
		}
	}
}

func (s *llamaSpec) setDims(name string, dims ...uint64) {
	for i := range s.tensors {
		if s.tensors[i].name == name {
			s.tensors[i].dims = dims
		}
	}
}

// marker is the value of element e of tensor i: it identifies both.
func marker(i, e int) float32 { return float32(i*1000 + e) }

// bytes writes the file; f32 tensor i holds marker(i, e) at element e, other
// types hold zero bytes.
func (s *llamaSpec) bytes(t testing.TB) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, 3)
	must(t, err)
	for _, kv := range s.kvs {
		must(t, w.AddValue(kv.Key, kv.Value))
	}
	for _, d := range s.tensors {
		typ, ok := s.types[d.name]
		if !ok {
			typ = GGMLF32
		}
		must(t, w.AddTensor(d.name, typ, d.dims...))
	}
	for i, d := range s.tensors {
		info := TensorInfo{Dims: d.dims, Type: s.types[d.name]}
		size, err := byteSize(info.Dims, info.Type)
		must(t, err)
		data := make([]byte, size)
		if info.Type == GGMLF32 {
			vals := tensor.AsF32(data)
			for e := range vals {
				vals[e] = marker(i, e)
			}
			data = tensor.BytesOfF32(vals)
		}
		_, err = w.Write(data)
		must(t, err)
	}
	must(t, w.Finish())
	return buf.Bytes()
}

func (s *llamaSpec) parse(t testing.TB) *File {
	f, err := Parse(s.bytes(t), "llama.gguf")
	must(t, err)
	return f
}

func (s *llamaSpec) index(name string) int {
	for i, d := range s.tensors {
		if d.name == name {
			return i
		}
	}
	return -1
}

func TestLlamaConfigDefaults(t *testing.T) {
	f := baseLlama(false).parse(t)
	got, err := f.LlamaConfig()
	must(t, err)
	want := model.Config{Dim: 8, HiddenDim: 16, NLayers: 2, NHeads: 2, NKVHeads: 1, VocabSize: 10, SeqLen: 32,
		RopeTheta: 10000, RopeDim: 4, NormEps: 1e-5, TiedOutput: true}
	if got != want {
		t.Errorf("config\n got %+v\nwant %+v", got, want)
	}

	s := baseLlama(true)
	s.drop("llama.attention.head_count_kv")
	s.set("llama.rope.freq_base", float32(500000))
	s.set("llama.rope.dimension_count", uint32(2))
	s.set("llama.attention.layer_norm_rms_epsilon", float32(1e-6))
	s.set("llama.vocab_size", uint64(10))
	got, err = s.parse(t).LlamaConfig()
	must(t, err)
	want = model.Config{Dim: 8, HiddenDim: 16, NLayers: 2, NHeads: 2, NKVHeads: 2, VocabSize: 10, SeqLen: 32,
		RopeTheta: 500000, RopeDim: 2, NormEps: 1e-6, TiedOutput: false}
	if got != want {
		t.Errorf("config\n got %+v\nwant %+v", got, want)
	}

	// Without a token list, llama.vocab_size supplies the vocabulary size.
	s = baseLlama(false)
	s.drop(KeyTokens)
	s.set("llama.vocab_size", int32(10))
	if got, err := s.parse(t).LlamaConfig(); err != nil || got.VocabSize != 10 {
		t.Errorf("vocab from llama.vocab_size: %d, %v", got.VocabSize, err)
	}
}

func TestLlamaConfigErrors(t *testing.T) {
	const label = "gguf llama.gguf:"
	cases := []struct {
		name   string
		modify func(s *llamaSpec)
		want   []string
	}{
		{"not llama", func(s *llamaSpec) { s.set(KeyArchitecture, "mistral") }, []string{`"mistral"`}},
		{"no architecture", func(s *llamaSpec) { s.drop(KeyArchitecture) }, []string{KeyArchitecture, "missing"}},
		{"no embedding length", func(s *llamaSpec) { s.drop("llama.embedding_length") },
			[]string{`"llama.embedding_length"`, "missing"}},
		{"block count string", func(s *llamaSpec) { s.set("llama.block_count", "2") },
			[]string{`"llama.block_count"`, `string "2"`}},
		{"negative heads", func(s *llamaSpec) { s.set("llama.attention.head_count", int32(-2)) },
			[]string{`"llama.attention.head_count"`, "int32 -2"}},
		{"huge context", func(s *llamaSpec) { s.set("llama.context_length", uint64(1<<40)) },
			[]string{`"llama.context_length"`, "1099511627776"}},
		{"vocab disagrees", func(s *llamaSpec) { s.set("llama.vocab_size", uint32(11)) },
			[]string{"llama.vocab_size is 11", "holds 10 tokens"}},
		{"no vocab", func(s *llamaSpec) { s.drop(KeyTokens) }, []string{"llama.vocab_size", "missing"}},
		{"heads do not divide dim", func(s *llamaSpec) { s.set("llama.attention.head_count", uint32(3)) },
			[]string{"llama config", "dim 8 is not a multiple of n_heads 3"}},
		{"theta overflows float32", func(s *llamaSpec) { s.set("llama.rope.freq_base", 1e300) },
			[]string{`"llama.rope.freq_base"`, "not a finite float32"}},
		{"eps NaN", func(s *llamaSpec) { s.set("llama.attention.layer_norm_rms_epsilon", float32(math.NaN())) },
			[]string{"layer_norm_rms_epsilon", "not a finite"}},
		{"zero layers and heads", func(s *llamaSpec) {
			s.set("llama.block_count", uint32(0))
			s.set("llama.attention.head_count", uint32(0))
		}, []string{"n_layers = 0", "; n_heads = 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := baseLlama(false)
			c.modify(s)
			_, err := s.parse(t).LlamaConfig()
			wantErr(t, err, label, c.want...)
		})
	}
}

func TestLlamaWeights(t *testing.T) {
	for _, untied := range []bool{false, true} {
		s := baseLlama(untied)
		w, err := s.parse(t).LlamaWeights()
		must(t, err)
		if w.First != 0 || w.Last != 2 || len(w.Layers) != 2 || w.Config.TiedOutput == untied {
			t.Fatalf("untied=%v: range [%d,%d), %d layers, tied %v", untied, w.First, w.Last, len(w.Layers), w.Config.TiedOutput)
		}
		// Each role must hold the tensor of its GGUF name: check the markers.
		check := func(tt tensor.Tensor, name string) {
			t.Helper()
			i := s.index(name)
			vals := tensor.AsF32(tt.Data)
			if tt.Name != name || vals[0] != marker(i, 0) || vals[len(vals)-1] != marker(i, len(vals)-1) {
				t.Errorf("role holding %q has %q starting %v", name, tt.Name, vals[0])
			}
		}
		check(w.Embedding, "token_embd.weight")
		for l := range w.Layers {
			p := fmt.Sprintf("blk.%d.", l)
			ly := &w.Layers[l]
			check(ly.AttnNorm, p+"attn_norm.weight")
			check(ly.Wq, p+"attn_q.weight")
			check(ly.Wk, p+"attn_k.weight")
			check(ly.Wv, p+"attn_v.weight")
			check(ly.Wo, p+"attn_output.weight")
			check(ly.FFNNorm, p+"ffn_norm.weight")
			check(ly.W1, p+"ffn_gate.weight")
			check(ly.W2, p+"ffn_down.weight")
			check(ly.W3, p+"ffn_up.weight")
		}
		check(w.FinalNorm, "output_norm.weight")
		if untied {
			check(w.Output, "output.weight")
		} else {
			check(w.Output, "token_embd.weight")
			if &w.Output.Data[0] != &w.Embedding.Data[0] {
				t.Error("tied output does not share the embedding's bytes")
			}
		}
		if w.Layers[1].W2.Rows != 8 || w.Layers[1].W2.Cols != 16 || w.Layers[0].Wk.Rows != 4 {
			t.Errorf("shapes: w2 %dx%d, wk rows %d", w.Layers[1].W2.Rows, w.Layers[1].W2.Cols, w.Layers[0].Wk.Rows)
		}
	}
}

func TestLlamaWeightsErrors(t *testing.T) {
	const label = "gguf llama.gguf:"
	s := baseLlama(false)
	s.dropTensor("blk.1.ffn_up.weight")
	_, err := s.parse(t).LlamaWeights()
	wantErr(t, err, label, `no tensor "blk.1.ffn_up.weight"`)

	s = baseLlama(false)
	s.setDims("blk.0.attn_k.weight", 8, 8)
	_, err = s.parse(t).LlamaWeights()
	wantErr(t, err, label, "layer 0", "blk.0.attn_k.weight is 8x8, want 4x8")

	s = baseLlama(false)
	s.types["output_norm.weight"] = GGMLF16
	_, err = s.parse(t).LlamaWeights()
	wantErr(t, err, label, "output_norm.weight is f16, want f32")

	s = baseLlama(false)
	s.types["blk.0.ffn_down.weight"] = GGMLType(13)
	s.setDims("blk.0.ffn_down.weight", 256, 8)
	_, err = s.parse(t).LlamaWeights()
	wantErr(t, err, label, `"blk.0.ffn_down.weight"`, "q5_K", "id 13")
}

func TestVocab(t *testing.T) {
	v, err := baseLlama(false).parse(t).Vocab()
	must(t, err)
	want := &Vocab{
		Model:  "llama",
		Pieces: []string{"<unk>", "<s>", "</s>", "a", "b", "c", "d", "e", "f", "g"},
		Scores: []float32{0, 0, 0, -1, -2, -3, -4, -5, -6, -7},
		Types:  []int32{2, 3, 3, 1, 1, 1, 1, 1, 1, 1},
		BOS:    1, EOS: 2,
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("vocab\n got %+v\nwant %+v", v, want)
	}

	s := baseLlama(false)
	s.drop(KeyScores)
	s.drop(KeyTokenTypes)
	s.drop(KeyTokenizerModel)
	s.set(KeyBOS, uint32(9))
	s.set(KeyEOS, int32(0))
	v, err = s.parse(t).Vocab()
	must(t, err)
	if v.Scores != nil || v.Types != nil || v.Model != "" || v.BOS != 9 || v.EOS != 0 {
		t.Errorf("sparse vocab %+v", v)
	}

	const label = "gguf llama.gguf:"
	cases := []struct {
		name   string
		modify func(s *llamaSpec)
		want   []string
	}{
		{"no tokens", func(s *llamaSpec) { s.drop(KeyTokens) }, []string{KeyTokens, "missing"}},
		{"tokens not strings", func(s *llamaSpec) { s.set(KeyTokens, []int32{1}) }, []string{"array of int32", "want an array of string"}},
		{"empty tokens", func(s *llamaSpec) { s.set(KeyTokens, []string{}) }, []string{"empty"}},
		{"short scores", func(s *llamaSpec) { s.set(KeyScores, []float32{1}) }, []string{KeyScores, "has 1 entries", "has 10"}},
		{"NaN score", func(s *llamaSpec) {
			s.set(KeyScores, []float32{0, 0, 0, 0, 0, float32(math.NaN()), 0, 0, 0, 0})
		}, []string{KeyScores + "[5]", "NaN"}},
		{"scores as f64", func(s *llamaSpec) { s.set(KeyScores, make([]float64, 10)) }, []string{"array of float64"}},
		{"long types", func(s *llamaSpec) { s.set(KeyTokenTypes, make([]int32, 11)) }, []string{KeyTokenTypes, "has 11 entries"}},
		{"bos out of range", func(s *llamaSpec) { s.set(KeyBOS, uint32(10)) }, []string{KeyBOS, "is 10", "10-token"}},
		{"eos negative", func(s *llamaSpec) { s.set(KeyEOS, int32(-1)) }, []string{KeyEOS, "int32 -1"}},
		{"default eos out of range", func(s *llamaSpec) {
			s.set(KeyTokens, []string{"a", "b"})
			s.drop(KeyScores)
			s.drop(KeyTokenTypes)
		},
			[]string{KeyEOS, "is 2", "2-token"}},
		{"model not string", func(s *llamaSpec) { s.set(KeyTokenizerModel, uint8(1)) }, []string{KeyTokenizerModel, "uint8"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := baseLlama(false)
			c.modify(s)
			_, err := s.parse(t).Vocab()
			wantErr(t, err, label, c.want...)
		})
	}
}
