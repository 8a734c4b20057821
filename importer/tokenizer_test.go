package importer

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/gguf"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/tokenizer"
)

// writeTinyLlama writes a one-layer llama GGUF (width 16, tied output,
// deterministic f32 weights) carrying vocabulary v.
func writeTinyLlama(t *testing.T, path string, v *tokenizer.GGUFVocab) {
	t.Helper()
	const dim, hidden = 16, 32
	n := uint64(len(v.Tokens))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := gguf.NewWriter(f, 3)
	if err != nil {
		t.Fatal(err)
	}
	meta := []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"},
		{"llama.context_length", uint32(64)},
		{"llama.embedding_length", uint32(dim)},
		{"llama.block_count", uint32(1)},
		{"llama.feed_forward_length", uint32(hidden)},
		{"llama.attention.head_count", uint32(2)},
		{"llama.attention.head_count_kv", uint32(2)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.vocab_size", uint32(n)},
	}
	for _, m := range meta {
		if err := w.Add(m.k, m.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.AddTo(w); err != nil {
		t.Fatal(err)
	}
	tensors := []struct {
		name string
		dims []uint64
	}{
		{"token_embd.weight", []uint64{dim, n}},
		{"blk.0.attn_norm.weight", []uint64{dim}},
		{"blk.0.attn_q.weight", []uint64{dim, dim}},
		{"blk.0.attn_k.weight", []uint64{dim, dim}},
		{"blk.0.attn_v.weight", []uint64{dim, dim}},
		{"blk.0.attn_output.weight", []uint64{dim, dim}},
		{"blk.0.ffn_norm.weight", []uint64{dim}},
		{"blk.0.ffn_gate.weight", []uint64{dim, hidden}},
		{"blk.0.ffn_down.weight", []uint64{hidden, dim}},
		{"blk.0.ffn_up.weight", []uint64{dim, hidden}},
		{"output_norm.weight", []uint64{dim}},
	}
	for _, tn := range tensors {
		if err := w.AddTensor(tn.name, gguf.GGMLType(0), tn.dims...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range tensors {
		count := uint64(1)
		for _, d := range tn.dims {
			count *= d
		}
		buf := make([]byte, 4*count)
		for i := range count {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(i%7)/7-0.4))
		}
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestImportKeepsByteLevelVocabulary imports a GGUF whose vocabulary is
// Qwen 3's byte-level BPE (with its chat template) and checks that the
// container's tokenizer gives the same ids as the GGUF's on a range of text,
// keeps the BOS/EOS rules and the chat template.
func TestImportKeepsByteLevelVocabulary(t *testing.T) {
	v, err := tokenizer.ReadHFVocab(testmodels.TokenizerDir(t, testmodels.Qwen3))
	if err != nil {
		t.Fatal(err)
	}
	if v.ChatTemplate == "" {
		t.Fatal("qwen3's tokenizer_config.json has a chat template; ReadHFVocab lost it")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "qwen3-tiny.gguf")
	writeTinyLlama(t, src, v)
	want, err := tokenizer.LoadGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "c")
	if err := Import(src, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	got, err := container.Tokenizer(dst)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{
		"Hello world", "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n",
		"日本語 and 한국어, numbers 12345, emoji 👩🏾‍💻", "  spaces\r\n\ttabs", "<think>\nx\n</think>", "cafe\u0301",
	}
	for _, s := range texts {
		if a, b := got.Encode(s, false, false), want.Encode(s, false, false); !slices.Equal(a, b) {
			t.Errorf("container Encode(%q) = %v, GGUF %v", s, a, b)
		}
	}
	if got.BOS() != want.BOS() || got.EOS() != want.EOS() || got.AddBOS() != want.AddBOS() || got.VocabSize() != want.VocabSize() {
		t.Errorf("container BOS %d EOS %d AddBOS %v size %d; GGUF %d %d %v %d",
			got.BOS(), got.EOS(), got.AddBOS(), got.VocabSize(), want.BOS(), want.EOS(), want.AddBOS(), want.VocabSize())
	}
	for _, id := range []int{151643, 151645, 151644} { // <|endoftext|>, <|im_end|>, <|im_start|>
		if got.IsEOG(id) != want.IsEOG(id) {
			t.Errorf("IsEOG(%d): container %v, GGUF %v", id, got.IsEOG(id), want.IsEOG(id))
		}
	}
	if tokenizer.ChatTemplate(got) != v.ChatTemplate {
		t.Error("the container lost the chat template")
	}
}
