package gguf

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// An architecture Seam runs: how its GGUF metadata and tensors map onto the
// one llama-family forward pass (package model). docs/architectures.md is
// the user-facing version of this table.
type archSpec struct {
	neox      bool // RoPE pairs (i, i+d/2): llama.cpp's NEOX rope type
	qkvBias   rule // blk.N.attn_{q,k,v}.bias
	qkNorm    rule // blk.N.attn_{q,k}_norm.weight
	ropeFreqs bool // may carry rope_freqs.weight (Llama 3.1 scaling)
}

// rule says whether an optional tensor group is required, allowed or absent.
type rule int

const (
	absent rule = iota
	optional
	required
)

// Architectures lists the general.architecture values Seam runs.
var Architectures = []string{"llama", "qwen2", "qwen3"}

var archSpecs = map[string]archSpec{
	// llama.cpp's converter permutes Hugging Face's q/k rows back to Meta's
	// interleaved layout for "llama", so RoPE rotates adjacent pairs.
	// Q/K/V biases are optional there, as in llama.cpp's loader.
	"llama": {qkvBias: optional, ropeFreqs: true},
	// Qwen files keep Hugging Face's half-split layout: NEOX RoPE.
	"qwen2": {neox: true, qkvBias: required},
	"qwen3": {neox: true, qkvBias: optional, qkNorm: required},
}

// Names of the tensors outside the layers.
const (
	tensorEmbedding = "token_embd.weight"
	tensorFinalNorm = "output_norm.weight"
	tensorOutput    = "output.weight"
	tensorRopeFreqs = "rope_freqs.weight"
)

// layerTensorNames maps each model layer role to its GGUF name in block i.
func layerTensorName(role string, i int) string {
	p := fmt.Sprintf("blk.%d.", i)
	switch role {
	case "attn_norm":
		return p + "attn_norm.weight"
	case "wq":
		return p + "attn_q.weight"
	case "wk":
		return p + "attn_k.weight"
	case "wv":
		return p + "attn_v.weight"
	case "wo":
		return p + "attn_output.weight"
	case "ffn_norm":
		return p + "ffn_norm.weight"
	case "w1":
		return p + "ffn_gate.weight"
	case "w2":
		return p + "ffn_down.weight"
	case "w3":
		return p + "ffn_up.weight"
	case model.RoleBq:
		return p + "attn_q.bias"
	case model.RoleBk:
		return p + "attn_k.bias"
	case model.RoleBv:
		return p + "attn_v.bias"
	case model.RoleQNorm:
		return p + "attn_q_norm.weight"
	case model.RoleKNorm:
		return p + "attn_k_norm.weight"
	case model.RoleRopeFreqs:
		return tensorRopeFreqs // one tensor, shared by every layer
	}
	panic("gguf: no tensor name for role " + role)
}

// Architecture returns general.architecture, checked against the ones Seam runs.
func (f *File) Architecture() (string, error) {
	arch, err := f.String(KeyArchitecture)
	if err != nil {
		return "", err
	}
	if _, ok := archSpecs[arch]; !ok {
		return "", fmt.Errorf("gguf %s: %s is %q; Seam runs %s", f.name, KeyArchitecture, arch, strings.Join(quoteAll(Architectures), ", "))
	}
	return arch, nil
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

// LlamaConfig maps the metadata of a llama-family file (general.architecture
// llama, qwen2 or qwen3; keys under that prefix) to a model.Config and
// validates it. Every key under the prefix is either read, known not to
// change the computation, or refused by name: see checkArchKeys.
func (f *File) LlamaConfig() (model.Config, error) {
	arch, err := f.Architecture()
	if err != nil {
		return model.Config{}, err
	}
	c, _, err := f.llamaConfig(arch)
	return c, err
}

// llamaConfig also returns the RoPE factors that rope.scaling.type "llama3"
// defines, when the file defines them by keys rather than by a tensor.
func (f *File) llamaConfig(arch string) (model.Config, []float32, error) {
	var err error
	spec := archSpecs[arch]
	p := arch + "."
	if err := f.checkArchKeys(p); err != nil {
		return model.Config{}, nil, err
	}
	var c model.Config
	ints := []struct {
		dst *int
		key string
	}{
		{&c.Dim, "embedding_length"},
		{&c.NLayers, "block_count"},
		{&c.NHeads, "attention.head_count"},
		{&c.SeqLen, "context_length"},
		{&c.HiddenDim, "feed_forward_length"},
	}
	for _, e := range ints {
		if *e.dst, err = f.intKey(p + e.key); err != nil {
			return model.Config{}, nil, err
		}
	}
	if c.NKVHeads, err = f.intKeyOr(p+"attention.head_count_kv", c.NHeads); err != nil {
		return model.Config{}, nil, err
	}
	if c.RopeTheta, err = f.float32KeyOr(p+"rope.freq_base", defaultRopeTheta); err != nil {
		return model.Config{}, nil, err
	}
	if c.NormEps, err = f.float32KeyOr(p+"attention.layer_norm_rms_epsilon", defaultNormEps); err != nil {
		return model.Config{}, nil, err
	}
	if err := f.headSize(p, &c); err != nil {
		return model.Config{}, nil, err
	}
	if c.RopeDim, err = f.intKeyOr(p+"rope.dimension_count", c.HeadDim()); err != nil {
		return model.Config{}, nil, err
	}
	if c.VocabSize, err = f.vocabSize(p + "vocab_size"); err != nil {
		return model.Config{}, nil, err
	}
	c.TiedOutput = !f.HasTensor(tensorOutput)
	c.RopeNeox = spec.neox
	if c.QKVBias, err = f.tensorGroup(spec.qkvBias, "Q/K/V biases", "blk.0.attn_q.bias"); err != nil {
		return model.Config{}, nil, err
	}
	if c.QKNorm, err = f.tensorGroup(spec.qkNorm, "Q/K norms", "blk.0.attn_q_norm.weight"); err != nil {
		return model.Config{}, nil, err
	}
	if err := c.Validate(); err != nil {
		return model.Config{}, nil, fmt.Errorf("gguf %s: %s config: %s", f.name, arch, oneLine(err))
	}
	factors, err := f.ropeScaling(p, spec, &c)
	if err != nil {
		return model.Config{}, nil, err
	}
	return c, factors, nil
}

// headSize reads attention.key_length and value_length (llama.cpp's defaults:
// dim / heads). Seam's attention needs them equal; HeadSize stays 0 when
// they are dim / heads.
func (f *File) headSize(p string, c *model.Config) error {
	def := 0
	if c.NHeads > 0 && c.Dim%c.NHeads == 0 {
		def = c.Dim / c.NHeads
	}
	k, err := f.intKeyOr(p+"attention.key_length", def)
	if err != nil {
		return err
	}
	v, err := f.intKeyOr(p+"attention.value_length", def)
	if err != nil {
		return err
	}
	if k != v {
		return fmt.Errorf("gguf %s: %sattention.key_length %d differs from %sattention.value_length %d; Seam's attention needs one head size",
			f.name, p, k, p, v)
	}
	if k != def {
		c.HeadSize = k
	}
	return nil
}

// tensorGroup decides whether a group of per-layer tensors is in use, from
// whether layer 0 has the marker tensor; LlamaWeights then requires the group
// in every layer.
func (f *File) tensorGroup(r rule, what, marker string) (bool, error) {
	has := f.HasTensor(marker)
	switch {
	case r == required && !has:
		return false, fmt.Errorf("gguf %s: no tensor %q: this architecture has %s", f.name, marker, what)
	case r == absent:
		return false, nil // a stray tensor is refused as unused by LlamaWeights
	}
	return has, nil
}

// vocabSize is the token list's length, or key (<arch>.vocab_size) when the
// file has no token list; when both are present they must agree.
func (f *File) vocabSize(key string) (int, error) {
	if !f.Has(KeyTokens) {
		return f.intKey(key)
	}
	a, err := f.Array(KeyTokens)
	if err != nil {
		return 0, err
	}
	n := a.Len()
	if f.Has(key) {
		declared, err := f.intKey(key)
		if err != nil {
			return 0, err
		}
		if declared != n {
			return 0, fmt.Errorf("gguf %s: %s is %d but %s holds %d tokens", f.name, key, declared, KeyTokens, n)
		}
	}
	return n, nil
}

// ropeScaling reads rope.scaling.* (and the older rope.scale_linear) the
// way llama.cpp does, and refuses what Seam does not compute:
//   - type absent or "linear": a factor other than 1 divides positions;
//   - "none": no scaling; a factor other than 1 beside it is refused;
//   - "llama3" (written by some converters; llama.cpp's own writes the
//     rope_freqs tensor instead): the factors Llama 3.1 defines from factor,
//     low_freq_factor, high_freq_factor and original_context_length;
//   - anything else ("yarn", "longrope", ...) is refused.
//
// A rope_freqs.weight tensor (allowed for llama) sets RopeFreqs; with type
// "llama3" too, it must agree with the factors the keys define.
func (f *File) ropeScaling(p string, spec archSpec, c *model.Config) ([]float32, error) {
	typ := "linear" // llama.cpp's default
	typeKey := p + "rope.scaling.type"
	if f.Has(typeKey) {
		var err error
		if typ, err = f.String(typeKey); err != nil {
			return nil, err
		}
	}
	factorKey := p + "rope.scaling.factor"
	if !f.Has(factorKey) && f.Has(p+"rope.scale_linear") {
		factorKey = p + "rope.scale_linear"
	}
	factor, err := f.float32KeyOr(factorKey, 0)
	if err != nil {
		return nil, err
	}
	if factor < 0 {
		return nil, fmt.Errorf("gguf %s: metadata %q is %v, want a positive factor", f.name, factorKey, factor)
	}
	if attn, err := f.float32KeyOr(p+"rope.scaling.attn_factor", 1); err != nil {
		return nil, err
	} else if attn != 1 {
		return nil, fmt.Errorf("gguf %s: metadata %q is %v; Seam implements only 1 (no attention scaling of RoPE)", f.name, p+"rope.scaling.attn_factor", attn)
	}
	if typ != "llama3" {
		for _, k := range []string{"rope.scaling.low_freq_factor", "rope.scaling.high_freq_factor"} {
			if f.Has(p + k) {
				return nil, fmt.Errorf("gguf %s: metadata %q belongs to rope.scaling.type \"llama3\", but %s is %q", f.name, p+k, typeKey, typ)
			}
		}
	}
	hasTensor := f.HasTensor(tensorRopeFreqs)
	if hasTensor && !spec.ropeFreqs {
		return nil, fmt.Errorf("gguf %s: tensor %q: this architecture takes no RoPE frequency factors (llama.cpp ignores it); refusing rather than guessing", f.name, tensorRopeFreqs)
	}
	c.RopeFreqs = hasTensor
	switch typ {
	case "linear":
		if factor != 0 && factor != 1 {
			c.RopeLinear = factor
		}
		return nil, nil
	case "none":
		if factor != 0 && factor != 1 {
			return nil, fmt.Errorf("gguf %s: metadata %q is %v but %s is \"none\"; refusing the contradiction", f.name, factorKey, factor, typeKey)
		}
		return nil, nil
	case "llama3":
		return f.llama3Factors(p, c, hasTensor)
	}
	return nil, fmt.Errorf("gguf %s: metadata %q is %q; Seam implements RoPE scaling types linear, llama3 and none", f.name, typeKey, typ)
}

// llama3Factors computes the factors of rope.scaling.type "llama3", with the
// defaults of Hugging Face's converter for absent keys (factor 8, low 1,
// high 4, original context 8192). With a rope_freqs tensor present they must
// agree with it; then the tensor is used and nil returned.
func (f *File) llama3Factors(p string, c *model.Config, hasTensor bool) ([]float32, error) {
	var s model.Llama3Scaling
	for _, k := range []struct {
		dst *float64
		key string
		def float32
	}{
		{&s.Factor, "rope.scaling.factor", 8},
		{&s.LowFreqFactor, "rope.scaling.low_freq_factor", 1},
		{&s.HighFreqFactor, "rope.scaling.high_freq_factor", 4},
		{&s.OriginalContext, "rope.scaling.original_context_length", 8192},
	} {
		v, err := f.float32KeyOr(p+k.key, k.def)
		if err != nil {
			return nil, err
		}
		*k.dst = float64(v)
	}
	factors, err := model.Llama3RopeFactors(c.RopeTheta, c.RopeDim, s)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %srope.scaling.*: %w", f.name, p, err)
	}
	c.RopeFreqs = true
	if !hasTensor {
		return factors, nil
	}
	t, err := f.Tensor(tensorRopeFreqs)
	if err != nil {
		return nil, err
	}
	if t.Type != tensor.F32 || t.Rows != 1 || t.Cols != len(factors) {
		return nil, fmt.Errorf("gguf %s: tensor %q is %s %dx%d, want f32 1x%d", f.name, tensorRopeFreqs, t.Type, t.Rows, t.Cols, len(factors))
	}
	for i, v := range tensor.AsF32(t.Data) {
		// The converter computes the factors in float32: allow its rounding.
		if math.Abs(float64(v)-float64(factors[i])) > 1e-5*float64(factors[i]) {
			return nil, fmt.Errorf("gguf %s: tensor %q[%d] is %v, but %srope.scaling.* define %v", f.name, tensorRopeFreqs, i, v, p, factors[i])
		}
	}
	return nil, nil
}

// Keys under the architecture prefix, by what Seam does with them.
var (
	// read by llamaConfig and ropeScaling.
	archKeysRead = []string{
		"embedding_length", "block_count", "attention.head_count", "context_length", "feed_forward_length",
		"attention.head_count_kv", "rope.freq_base", "attention.layer_norm_rms_epsilon", "rope.dimension_count",
		"vocab_size", "attention.key_length", "attention.value_length",
		"rope.scaling.type", "rope.scaling.factor", "rope.scale_linear", "rope.scaling.attn_factor",
		"rope.scaling.low_freq_factor", "rope.scaling.high_freq_factor", "rope.scaling.original_context_length",
	}
	// known, and without effect on the computation (llama.cpp's either).
	archKeysInert = []string{
		"rope.scaling.finetuned", // a flag recorded, never used in the math
		"tensor_data_layout",     // old converters' note on q/k row order; llama.cpp ignores it
	}
)

// archKeysNeutral are keys that change the computation unless they hold
// their neutral value (which is also llama.cpp's default): Seam accepts the
// neutral value and refuses any other, naming the key.
var archKeysNeutral = map[string]any{
	"expert_count":             uint64(0),
	"expert_used_count":        uint64(0),
	"attention.sliding_window": uint64(0),
	"attn_logit_softcapping":   0.0,
	"final_logit_softcapping":  0.0,
	"attention.scale":          0.0,
	"attention.clamp_kqv":      0.0,
	"attention.max_alibi_bias": 0.0,
	"embedding_scale":          1.0,
	"residual_scale":           1.0,
	"logit_scale":              1.0,
	"attention.causal":         true,
	"use_parallel_residual":    false,
}

// checkArchKeys refuses every key under prefix p that Seam neither reads nor
// knows to be inert, and every neutral-only key whose value is not neutral:
// a key that changes the math must never be ignored.
func (f *File) checkArchKeys(p string) error {
	for _, kv := range f.kvs {
		name, ok := strings.CutPrefix(kv.Key, p)
		if !ok || slices.Contains(archKeysRead, name) || slices.Contains(archKeysInert, name) {
			continue
		}
		neutral, known := archKeysNeutral[name]
		if !known {
			return fmt.Errorf("gguf %s: metadata %q (%s) is not implemented by Seam; refusing rather than ignoring it", f.name, kv.Key, kv.Value)
		}
		if !f.isNeutral(kv.Key, neutral) {
			return fmt.Errorf("gguf %s: metadata %q is %s; Seam implements only %v (the feature it enables is not implemented)",
				f.name, kv.Key, kv.Value, neutral)
		}
	}
	return nil
}

func (f *File) isNeutral(key string, neutral any) bool {
	switch n := neutral.(type) {
	case uint64:
		u, err := f.Uint(key)
		return err == nil && u == n
	case float64:
		x, err := f.Float(key)
		return err == nil && x == n
	case bool:
		b, err := f.Bool(key)
		return err == nil && b == n
	}
	return false
}

// LlamaWeights returns the whole model (layers [0, NLayers)) as views over the
// file, validated against LlamaConfig. Every tensor of the file must be used:
// one Seam does not know (an output bias, a MoE router, ...) is refused by
// name rather than ignored.
//
// The q and k rows need no permutation: llama.cpp's "llama" files hold Meta's
// interleaved layout and Seam rotates adjacent pairs for them; its Qwen files
// hold Hugging Face's half-split layout and Seam rotates NEOX pairs (see
// model.Config.RopeNeox).
func (f *File) LlamaWeights() (*model.Weights, error) {
	arch, err := f.Architecture()
	if err != nil {
		return nil, err
	}
	c, factors, err := f.llamaConfig(arch)
	if err != nil {
		return nil, err
	}
	w := &model.Weights{Config: c, First: 0, Last: c.NLayers, Layers: make([]model.Layer, c.NLayers)}
	used := map[string]bool{}
	get := func(dst *tensor.Tensor, name string) {
		if err == nil {
			*dst, err = f.Tensor(name)
			used[name] = true
		}
	}
	get(&w.Embedding, tensorEmbedding)
	for i := range w.Layers {
		l := &w.Layers[i]
		for _, role := range c.LayerRoles() {
			if role == model.RoleRopeFreqs && factors != nil {
				l.RopeFreqs = tensor.Tensor{Name: "rope_freqs from rope.scaling keys", Type: tensor.F32,
					Rows: 1, Cols: len(factors), Data: tensor.BytesOfF32(factors)}
				continue
			}
			get(l.Tensor(role), layerTensorName(role, i))
		}
	}
	get(&w.FinalNorm, tensorFinalNorm)
	if c.TiedOutput {
		w.Output = w.Embedding
	} else {
		get(&w.Output, tensorOutput)
	}
	if err != nil {
		return nil, err
	}
	for _, info := range f.tensors {
		if !used[info.Name] {
			return nil, fmt.Errorf("gguf %s: tensor %q is not part of a %s model as Seam computes it; refusing rather than ignoring it",
				f.name, info.Name, arch)
		}
	}
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("gguf %s: weights: %s", f.name, oneLine(err))
	}
	return w, nil
}
