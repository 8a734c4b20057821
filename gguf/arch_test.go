package gguf

import (
	"fmt"
	"testing"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// baseArch is baseLlama (dim 8, 2 layers, 2 heads, 1 kv head) as arch: keys
// under arch's prefix, Q/K/V biases for qwen2, and for qwen3 per-head norms
// and a head size of 8 (not dim/heads = 4), so q is 16 wide.
func baseArch(arch string, untied bool) *llamaSpec {
	s := baseLlama(untied)
	for i := range s.kvs {
		if k := s.kvs[i].Key; len(k) > 6 && k[:6] == "llama." {
			s.kvs[i].Key = arch + "." + k[6:]
		}
	}
	s.set(KeyArchitecture, arch)
	for i := 0; i < 2; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		switch arch {
		case "qwen2":
			s.add(p+"attn_q.bias", 8)
			s.add(p+"attn_k.bias", 4)
			s.add(p+"attn_v.bias", 4)
		case "qwen3":
			s.setDims(p+"attn_q.weight", 8, 16)
			s.setDims(p+"attn_k.weight", 8, 8)
			s.setDims(p+"attn_v.weight", 8, 8)
			s.setDims(p+"attn_output.weight", 16, 8)
			s.add(p+"attn_q_norm.weight", 8)
			s.add(p+"attn_k_norm.weight", 8)
		}
	}
	if arch == "qwen3" {
		s.set("qwen3.attention.key_length", uint32(8))
		s.set("qwen3.attention.value_length", uint32(8))
	}
	return s
}

func TestArchConfigs(t *testing.T) {
	base := model.Config{Dim: 8, HiddenDim: 16, NLayers: 2, NHeads: 2, NKVHeads: 1, VocabSize: 10, SeqLen: 32,
		RopeTheta: 10000, RopeDim: 4, NormEps: 1e-5, TiedOutput: true}
	qwen2 := base
	qwen2.RopeNeox, qwen2.QKVBias = true, true
	qwen3 := base
	qwen3.RopeNeox, qwen3.QKNorm, qwen3.HeadSize, qwen3.RopeDim = true, true, 8, 8
	for _, c := range []struct {
		arch string
		want model.Config
	}{{"qwen2", qwen2}, {"qwen3", qwen3}} {
		s := baseArch(c.arch, false)
		f := s.parse(t)
		got, err := f.LlamaConfig()
		must(t, err)
		if got != c.want {
			t.Errorf("%s config\n got %+v\nwant %+v", c.arch, got, c.want)
		}
		w, err := f.LlamaWeights()
		must(t, err)
		// Each role holds the tensor of its GGUF name: check the markers.
		for l := range w.Layers {
			for _, role := range got.LayerRoles() {
				name := layerTensorName(role, l)
				tt := w.Layers[l].Tensor(role)
				i := s.index(name)
				vals := tensor.AsF32(tt.Data)
				if tt.Name != name || vals[0] != marker(i, 0) || vals[len(vals)-1] != marker(i, len(vals)-1) {
					t.Errorf("%s layer %d role %s holds %q starting %v", c.arch, l, role, tt.Name, vals[0])
				}
			}
		}
	}
}

// Llama 3.1 files from llama.cpp's converter carry rope_freqs.weight; other
// converters write rope.scaling.type "llama3" and its parameters instead.
func TestLlama3RopeScaling(t *testing.T) {
	s := baseLlama(true)
	s.set("llama.rope.freq_base", float32(500000))
	s.add("rope_freqs.weight", 2)
	f := s.parse(t)
	w, err := f.LlamaWeights()
	must(t, err)
	if !w.Config.RopeFreqs || w.Config.RopeLinear != 0 {
		t.Fatalf("config %+v: want RopeFreqs", w.Config)
	}
	// The markers make each factor positive; every layer views the one tensor.
	for l := range w.Layers {
		if got := w.Layers[l].RopeFreqs; got.Name != "rope_freqs.weight" || &got.Data[0] != &w.Layers[0].RopeFreqs.Data[0] {
			t.Errorf("layer %d rope_freqs %q", l, got.Name)
		}
	}

	// By keys: head dim 4, so two frequencies, 1 and 500000^-0.5 (wavelengths
	// 6.3 and 4443); with original context 8192, low 1 and high 4 the first is
	// kept and the second blended: 1/((1-s)/8 + s), s = (8192/4443 - 1)/3.
	s = baseLlama(true)
	s.set("llama.rope.freq_base", float32(500000))
	s.set("llama.rope.scaling.type", "llama3")
	s.set("llama.rope.scaling.factor", float32(8))
	s.set("llama.rope.scaling.low_freq_factor", float32(1))
	s.set("llama.rope.scaling.high_freq_factor", float32(4))
	s.set("llama.rope.scaling.original_context_length", uint32(8192))
	w, err = s.parse(t).LlamaWeights()
	must(t, err)
	got := tensor.AsF32(w.Layers[1].RopeFreqs.Data)
	wavelen := 2 * 3.141592653589793 * 707.1067811865476
	sm := (8192/wavelen - 1) / 3
	want := float32(1 / ((1-sm)/8 + sm))
	if len(got) != 2 || got[0] != 1 || got[1] != want {
		t.Errorf("llama3 factors %v, want [1 %v]", got, want)
	}

	// Keys and a tensor that agree are accepted; that disagree are refused.
	s.add("rope_freqs.weight", 2)
	s.types["rope_freqs.weight"] = GGMLF32
	b := s.bytes(t)
	bad, err := Parse(b, "llama.gguf")
	must(t, err)
	_, err = bad.LlamaWeights()
	wantErr(t, err, "gguf llama.gguf:", `tensor "rope_freqs.weight"[0] is`, "rope.scaling.* define 1")
}

func TestLinearRopeScaling(t *testing.T) {
	for _, key := range []string{"llama.rope.scaling.factor", "llama.rope.scale_linear"} {
		s := baseLlama(true)
		s.set(key, float32(4))
		c, err := s.parse(t).LlamaConfig()
		must(t, err)
		if c.RopeLinear != 4 {
			t.Errorf("%s 4: RopeLinear %v", key, c.RopeLinear)
		}
	}
	s := baseLlama(true)
	s.set("llama.rope.scaling.type", "linear")
	s.set("llama.rope.scaling.factor", float32(1))
	s.set("llama.rope.scaling.original_context_length", uint32(4096))
	s.set("llama.rope.scaling.finetuned", true)
	s.set("llama.expert_count", uint32(0))
	s.set("llama.attention.causal", true)
	c, err := s.parse(t).LlamaConfig()
	must(t, err)
	if c.RopeLinear != 0 || c.Extended() {
		t.Errorf("factor 1 and neutral keys: %+v", c)
	}
}

func TestArchRefusals(t *testing.T) {
	const label = "gguf llama.gguf:"
	cases := []struct {
		name   string
		arch   string
		modify func(s *llamaSpec)
		want   []string
	}{
		{"unknown architecture", "llama", func(s *llamaSpec) { s.set(KeyArchitecture, "gemma2") },
			[]string{KeyArchitecture, `"gemma2"`, `"llama", "qwen2", "qwen3"`}},
		{"yarn", "qwen2", func(s *llamaSpec) {
			s.set("qwen2.rope.scaling.type", "yarn")
			s.set("qwen2.rope.scaling.factor", float32(4))
		}, []string{`"qwen2.rope.scaling.type" is "yarn"`, "linear, llama3 and none"}},
		{"yarn parameter", "qwen2", func(s *llamaSpec) { s.set("qwen2.rope.scaling.yarn_log_multiplier", float32(0.1)) },
			[]string{`"qwen2.rope.scaling.yarn_log_multiplier"`, "not implemented"}},
		{"none with a factor", "llama", func(s *llamaSpec) {
			s.set("llama.rope.scaling.type", "none")
			s.set("llama.rope.scaling.factor", float32(2))
		}, []string{`"llama.rope.scaling.factor" is 2`, `"none"`}},
		{"attention factor", "llama", func(s *llamaSpec) { s.set("llama.rope.scaling.attn_factor", float32(0.5)) },
			[]string{`"llama.rope.scaling.attn_factor" is 0.5`}},
		{"llama3 parameter with linear", "llama", func(s *llamaSpec) { s.set("llama.rope.scaling.low_freq_factor", float32(1)) },
			[]string{`"llama.rope.scaling.low_freq_factor" belongs to rope.scaling.type "llama3"`}},
		{"bad llama3 parameters", "llama", func(s *llamaSpec) {
			s.set("llama.rope.scaling.type", "llama3")
			s.set("llama.rope.scaling.high_freq_factor", float32(0.5))
		}, []string{"llama.rope.scaling.*", "low/high frequency factors 1, 0.5"}},
		{"unknown key", "qwen3", func(s *llamaSpec) { s.set("qwen3.attention.temperature_scale", float32(0.1)) },
			[]string{`"qwen3.attention.temperature_scale"`, "not implemented by Seam"}},
		{"sliding window", "qwen2", func(s *llamaSpec) { s.set("qwen2.attention.sliding_window", uint32(4096)) },
			[]string{`"qwen2.attention.sliding_window" is 4096`}},
		{"softcapping", "llama", func(s *llamaSpec) { s.set("llama.final_logit_softcapping", float32(30)) },
			[]string{`"llama.final_logit_softcapping" is 30`}},
		{"experts", "llama", func(s *llamaSpec) { s.set("llama.expert_count", uint32(8)) },
			[]string{`"llama.expert_count" is 8`}},
		{"not causal", "llama", func(s *llamaSpec) { s.set("llama.attention.causal", false) },
			[]string{`"llama.attention.causal" is false`}},
		{"qwen2 without biases", "qwen2", func(s *llamaSpec) {
			for i := 0; i < 2; i++ {
				for _, n := range []string{"q", "k", "v"} {
					s.dropTensor(fmt.Sprintf("blk.%d.attn_%s.bias", i, n))
				}
			}
		}, []string{`no tensor "blk.0.attn_q.bias"`, "Q/K/V biases"}},
		{"qwen2 missing one bias", "qwen2", func(s *llamaSpec) { s.dropTensor("blk.1.attn_v.bias") },
			[]string{`no tensor "blk.1.attn_v.bias"`}},
		{"qwen3 missing a norm", "qwen3", func(s *llamaSpec) { s.dropTensor("blk.1.attn_k_norm.weight") },
			[]string{`no tensor "blk.1.attn_k_norm.weight"`}},
		{"head sizes differ", "qwen3", func(s *llamaSpec) { s.set("qwen3.attention.value_length", uint32(4)) },
			[]string{"qwen3.attention.key_length 8 differs from qwen3.attention.value_length 4"}},
		{"rope factors on qwen", "qwen3", func(s *llamaSpec) { s.add("rope_freqs.weight", 4) },
			[]string{`tensor "rope_freqs.weight"`, "takes no RoPE frequency factors"}},
		{"output bias", "qwen2", func(s *llamaSpec) { s.add("output.bias", 10) },
			[]string{`tensor "output.bias" is not part of a qwen2 model`}},
		{"norms on llama", "llama", func(s *llamaSpec) { s.add("blk.0.attn_q_norm.weight", 4) },
			[]string{`tensor "blk.0.attn_q_norm.weight" is not part of a llama model`}},
		{"wrong bias shape", "qwen2", func(s *llamaSpec) { s.setDims("blk.1.attn_k.bias", 8) },
			[]string{"layer 1: bk: tensor blk.1.attn_k.bias is 1x8, want 1x4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := baseArch(c.arch, true)
			c.modify(s)
			_, err := s.parse(t).LlamaWeights()
			wantErr(t, err, label, c.want...)
		})
	}
}
