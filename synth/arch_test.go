package synth

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/seamlm/seam/gguf"
	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// Each architecture's file reads back, through the gguf package, as the
// config ArchConfig describes, with the family's tensors.
func TestArchFilesReadBack(t *testing.T) {
	for _, arch := range Archs {
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_K} {
			path := filepath.Join(t.TempDir(), arch+".gguf")
			cfg, err := WriteArchFile(path, ArchFile{Arch: arch, DType: dt, Layers: 2, Seed: 1, LogitStd: 6})
			if err != nil {
				t.Fatal(err)
			}
			want, ggufArch, _ := ArchConfig(arch, 512)
			want.NLayers = 2
			if cfg != want {
				t.Fatalf("%s: config %+v, want %+v", arch, cfg, want)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if a, _ := f.Architecture(); a != ggufArch {
				t.Errorf("%s: architecture %q, want %q", arch, a, ggufArch)
			}
			w, err := f.LlamaWeights()
			if err != nil {
				t.Fatalf("%s %s: %v", arch, dt, err)
			}
			if w.Config != cfg || w.Layers[1].Wq.Type != dt || w.Embedding.Type != dt {
				t.Errorf("%s %s: config %+v, wq %s, embedding %s", arch, dt, w.Config, w.Layers[1].Wq.Type, w.Embedding.Type)
			}
			// The final norm carries the logit spread: 6 for every architecture,
			// since tied embeddings are scaled like untied classifiers.
			if v := tensor.AsF32(w.FinalNorm.Data); v[0] != 6 || v[len(v)-1] != 6 {
				t.Errorf("%s: final norm %v", arch, v[:2])
			}
			f.Close()
		}
	}
	if _, err := WriteArchFile(filepath.Join(t.TempDir(), "x.gguf"), ArchFile{Arch: "mistral"}); err == nil {
		t.Error("unknown arch accepted")
	}
}

func TestCheckArch(t *testing.T) {
	c, _, _ := ArchConfig("qwen3", 512)
	c.QKNorm = false
	if err := CheckArch("qwen3", &c); err == nil {
		t.Error("qwen3 without Q/K norms accepted")
	}
	c, _, _ = ArchConfig("llama3", 512)
	c.RopeNeox = true
	if err := CheckArch("llama", &c); err == nil {
		t.Error("llama with NeoX RoPE accepted")
	}
	if _, err := GGUFLayout(c, GGUFOptions{Arch: "llama"}); err == nil {
		t.Error("layout of an inconsistent llama accepted")
	}
}

// q4KRef decodes a Q4_K super-block from GGML's layout, written here apart
// from the package: d and dmin (f16), 12 bytes of 6-bit scales and mins,
// then 128 bytes holding 256 4-bit quants (32-byte groups: low nibbles for
// one sub-block, high nibbles for the next).
func q4KRef(blk []byte) []float64 {
	d := f16ToF64(binary.LittleEndian.Uint16(blk))
	dmin := f16ToF64(binary.LittleEndian.Uint16(blk[2:]))
	s := blk[4:16]
	scale := func(j int) (float64, float64) {
		if j < 4 {
			return float64(s[j] & 63), float64(s[j+4] & 63)
		}
		return float64(s[j+4]&15 | (s[j-4]>>6)<<4), float64(s[j+4]>>4 | (s[j]>>6)<<4)
	}
	out := make([]float64, 256)
	for c := 0; c < 4; c++ {
		sc1, m1 := scale(2 * c)
		sc2, m2 := scale(2*c + 1)
		for l := 0; l < 32; l++ {
			q := blk[16+32*c+l]
			out[64*c+l] = d*sc1*float64(q&15) - dmin*m1
			out[64*c+32+l] = d*sc2*float64(q>>4) - dmin*m2
		}
	}
	return out
}

// Q4_K matrices hold odd multiples of d in [-15d, 15d], standard deviation
// 1/sqrt(fan-in), and Seam's kernels decode them as the reference does.
func TestQ4KValues(t *testing.T) {
	checkSuperBlocks(t, tensor.Q4_K, 144, 0, q4KRef, func(k float64) bool {
		return k == math.Round(k) && int(k)%2 != 0 && math.Abs(k) <= 15
	})
}

// checkSuperBlocks writes a tiny GGUF with matrices of type typ (super-blocks
// of 256 values in size bytes, the f16 d at dOff) and checks two of them
// value by value: the kernels' DequantRow against ref, each value a multiple
// k of d that ok accepts, the mean near 0 and the standard deviation
// 1/sqrt(fan-in) (65536 or more values: within 1 %, 3 % allowed).
func checkSuperBlocks(t *testing.T, typ tensor.DType, size, dOff int, ref func([]byte) []float64, ok func(k float64) bool) {
	t.Helper()
	cfg := model.Config{Dim: 256, HiddenDim: 512, NLayers: 1, NHeads: 4, NKVHeads: 2, VocabSize: 300,
		SeqLen: 16, RopeTheta: 10000, RopeDim: 64, NormEps: 1e-5}
	path := writeTiny(t, cfg, GGUFOptions{Matrices: typ, Seed: 4})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"blk.0.attn_q.weight", "blk.0.ffn_down.weight"} {
		tt, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		if tt.Type != typ {
			t.Fatalf("%s is %s, want %s", name, tt.Type, typ)
		}
		var sum, sq float64
		var n int
		row := make([]float32, tt.Cols)
		for r := 0; r < tt.Rows; r++ {
			kernels.DequantRow(row, &tt, r)
			blocks := tt.Row(r)
			for b := 0; b < tt.Cols/256; b++ {
				blk := blocks[b*size : (b+1)*size]
				d := f16ToF64(binary.LittleEndian.Uint16(blk[dOff:]))
				for i, v := range ref(blk) {
					if float64(row[b*256+i]) != v {
						t.Fatalf("%s row %d value %d: kernels %v, reference %v", name, r, b*256+i, row[b*256+i], v)
					}
					if !ok(v / d) {
						t.Fatalf("%s: value %v is %v d", name, v, v/d)
					}
					sum += v
					sq += v * v
					n++
				}
			}
		}
		std, want := math.Sqrt(sq/float64(n)), 1/math.Sqrt(float64(tt.Cols))
		if math.Abs(std/want-1) > 0.03 || math.Abs(sum/float64(n)) > 0.02*want {
			t.Errorf("%s: mean %.5f, standard deviation %.5f, want 0 and %.5f", name, sum/float64(n), std, want)
		}
	}
}

// q6KRef decodes a Q6_K super-block from GGML's layout, written here apart
// from the kernels: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8
// scales, f16 d. Value v of half h (128 values each), quarter t (32) and
// index l in it takes the low nibble (t even) or high nibble (t odd) of
// ql[64h + 32(t mod 2) + l], bits 2t..2t+1 of qh[32h + l], and scale
// 8h + l/16 + 2t.
func q6KRef(blk []byte) []float64 {
	d := f16ToF64(binary.LittleEndian.Uint16(blk[208:]))
	out := make([]float64, 256)
	for v := range 256 {
		h, w := v/128, v%128
		t, l := w/32, w%32
		ql := blk[64*h+32*(t%2)+l]
		lo := int(ql & 0x0f)
		if t >= 2 {
			lo = int(ql >> 4)
		}
		hi := int(blk[128+32*h+l]>>(2*t)) & 3
		sc := float64(int8(blk[192+8*h+l/16+2*t]))
		out[v] = d * sc * float64(lo|hi<<4-32)
	}
	return out
}

// Q6_K matrices hold integer multiples of d within 32, standard deviation
// 1/sqrt(fan-in), and Seam's kernels decode them as the reference does.
func TestQ6KValues(t *testing.T) {
	checkSuperBlocks(t, tensor.Q6_K, 210, 208, q6KRef, func(k float64) bool {
		return k == math.Round(k) && math.Abs(k) <= 32
	})
}
