package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/model"
)

// stories260K's architecture, from the shared models README.
var storiesConfig = model.Config{
	Dim: 64, HiddenDim: 172, NLayers: 5, NHeads: 8, NKVHeads: 4, VocabSize: 512, SeqLen: 512,
	RopeTheta: 10000, RopeDim: 8, NormEps: 1e-5,
	// The GGUF file carries an explicit output.weight (a copy of the
	// embedding), so it is not tied as far as the file is concerned.
	TiedOutput: false,
}

func openStories(t testing.TB) *File {
	f, err := Open(testmodels.Path(t, testmodels.Stories260KGGUF))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestStoriesHeader(t *testing.T) {
	f := openStories(t)
	if f.Version() != 1 || f.Alignment() != 32 {
		t.Errorf("version %d alignment %d, want 1 and 32", f.Version(), f.Alignment())
	}
	cfg, err := f.LlamaConfig()
	must(t, err)
	if cfg != storiesConfig {
		t.Errorf("config\n got %+v\nwant %+v", cfg, storiesConfig)
	}
	// 48 tensors: embedding, 5 layers of 9, final norm, output.
	want := map[string][]uint64{
		"token_embd.weight":  {64, 512},
		"output_norm.weight": {64},
		"output.weight":      {64, 512},
	}
	for l := 0; l < 5; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		want[p+"attn_norm.weight"] = []uint64{64}
		want[p+"attn_q.weight"] = []uint64{64, 64}
		want[p+"attn_k.weight"] = []uint64{64, 32}
		want[p+"attn_v.weight"] = []uint64{64, 32}
		want[p+"attn_output.weight"] = []uint64{64, 64}
		want[p+"ffn_norm.weight"] = []uint64{64}
		want[p+"ffn_gate.weight"] = []uint64{64, 172}
		want[p+"ffn_down.weight"] = []uint64{172, 64}
		want[p+"ffn_up.weight"] = []uint64{64, 172}
	}
	infos := f.Tensors()
	if len(infos) != 48 || len(want) != 48 {
		t.Fatalf("%d tensors in file, %d expected", len(infos), len(want))
	}
	for _, info := range infos {
		if !reflect.DeepEqual(info.Dims, want[info.Name]) || info.Type != GGMLF32 {
			t.Errorf("%s: %s %v, want f32 %v", info.Name, info.Type, info.Dims, want[info.Name])
		}
	}

	v, err := f.Vocab()
	must(t, err)
	if len(v.Pieces) != 512 || len(v.Scores) != 512 || len(v.Types) != 512 || v.BOS != 1 || v.EOS != 2 || v.Model != "llama" {
		t.Errorf("vocab: %d pieces, %d scores, %d types, bos %d, eos %d, model %q",
			len(v.Pieces), len(v.Scores), len(v.Types), v.BOS, v.EOS, v.Model)
	}
	if got := v.Pieces[:4]; !reflect.DeepEqual(got, []string{"<unk>", "<s>", "</s>", "<0x00>"}) {
		t.Errorf("first pieces %q", got)
	}
	if got := v.Types[:4]; !reflect.DeepEqual(got, []int32{2, 3, 3, 6}) { // unknown, control, control, byte
		t.Errorf("first token types %v", got)
	}
}

// llama2cV0 slices the f32 arrays out of a legacy llama2.c checkpoint.
type llama2cV0 struct {
	emb, rmsAtt, wq, wk, wv, wo, rmsFFN, w1, w2, w3, rmsFinal []byte
}

func readLlama2cV0(t *testing.T, path string, c model.Config) *llama2cV0 {
	b, err := os.ReadFile(path)
	must(t, err)
	var hdr [7]int32
	must(t, binary.Read(bytes.NewReader(b), binary.LittleEndian, &hdr))
	wantHdr := [7]int32{64, 172, 5, 8, 4, 512, 512} // positive vocab: shared classifier
	if hdr != wantHdr {
		t.Fatalf("%s header %v, want %v", path, hdr, wantHdr)
	}
	rest := b[28:]
	take := func(floats int) []byte {
		out := rest[:floats*4]
		rest = rest[floats*4:]
		return out
	}
	L, dim, hid, kv := c.NLayers, c.Dim, c.HiddenDim, c.KVDim()
	m := &llama2cV0{}
	m.emb = take(c.VocabSize * dim)
	m.rmsAtt = take(L * dim)
	m.wq = take(L * dim * dim)
	m.wk = take(L * dim * kv)
	m.wv = take(L * dim * kv)
	m.wo = take(L * dim * dim)
	m.rmsFFN = take(L * dim)
	m.w1 = take(L * hid * dim)
	m.w2 = take(L * dim * hid)
	m.w3 = take(L * hid * dim)
	m.rmsFinal = take(dim)
	take(c.SeqLen * c.HeadDim() / 2) // freq_cis_real, unused
	take(c.SeqLen * c.HeadDim() / 2) // freq_cis_imag, unused
	if len(rest) != 0 {
		t.Fatalf("%s: %d bytes left after the weights", path, len(rest))
	}
	return m
}

// layer returns layer l's part of an array holding L equal slices.
func layer(b []byte, l, layers int) []byte {
	n := len(b) / layers
	return b[l*n : (l+1)*n]
}

func TestStoriesMatchesLlama2c(t *testing.T) {
	f := openStories(t)
	ref := readLlama2cV0(t, testmodels.Path(t, testmodels.Stories260K), storiesConfig)
	w, err := f.LlamaWeights()
	must(t, err)
	same := func(what string, got, want []byte) {
		t.Helper()
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from stories260K.bin (%d vs %d bytes)", what, len(got), len(want))
		}
	}
	same("embedding", w.Embedding.Data, ref.emb)
	same("output (shared classifier)", w.Output.Data, ref.emb)
	same("final norm", w.FinalNorm.Data, ref.rmsFinal)
	for l := 0; l < 5; l++ {
		ly := &w.Layers[l]
		pairs := []struct {
			name      string
			got, want []byte
		}{
			{"attn_norm", ly.AttnNorm.Data, ref.rmsAtt}, {"wq", ly.Wq.Data, ref.wq}, {"wk", ly.Wk.Data, ref.wk},
			{"wv", ly.Wv.Data, ref.wv}, {"wo", ly.Wo.Data, ref.wo}, {"ffn_norm", ly.FFNNorm.Data, ref.rmsFFN},
			{"w1", ly.W1.Data, ref.w1}, {"w2", ly.W2.Data, ref.w2}, {"w3", ly.W3.Data, ref.w3},
		}
		for _, p := range pairs {
			same(fmt.Sprintf("layer %d %s", l, p.name), p.got, layer(p.want, l, 5))
		}
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "absent.gguf"))
	wantErr(t, err, "gguf:", "absent.gguf")
	bin := testmodels.Path(t, testmodels.Stories260K)
	_, err = Open(bin)
	wantErr(t, err, "gguf "+bin+":", "magic")
}

func TestTensorAfterClose(t *testing.T) {
	f, err := Open(testmodels.Path(t, testmodels.Stories260KGGUF))
	must(t, err)
	must(t, f.Close())
	_, err = f.Tensor("token_embd.weight")
	wantErr(t, err, "gguf ", "after Close")
	if _, err := f.Uint("llama.block_count"); err != nil {
		t.Errorf("metadata unreadable after Close: %v", err)
	}
}
