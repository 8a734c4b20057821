package gguf

import (
	"fmt"
	"math"
	"strings"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// Metadata keys of the llama architecture and the GGML tokenizer.
const (
	KeyArchitecture = "general.architecture"
	keyLlama        = "llama."

	KeyTokenizerModel = "tokenizer.ggml.model"
	KeyTokens         = "tokenizer.ggml.tokens"
	KeyScores         = "tokenizer.ggml.scores"
	KeyTokenTypes     = "tokenizer.ggml.token_type"
	KeyBOS            = "tokenizer.ggml.bos_token_id"
	KeyEOS            = "tokenizer.ggml.eos_token_id"
)

// Defaults that llama.cpp applies when a llama file omits the key.
const (
	defaultRopeTheta = 10000
	defaultNormEps   = 1e-5
	defaultBOS       = 1
	defaultEOS       = 2
)

// LlamaConfig maps the llama.* metadata to a model.Config and validates it.
// The file's general.architecture must be "llama".
func (f *File) LlamaConfig() (model.Config, error) {
	arch, err := f.String(KeyArchitecture)
	if err != nil {
		return model.Config{}, err
	}
	if arch != "llama" {
		return model.Config{}, fmt.Errorf("gguf %s: architecture is %q; Seam runs only \"llama\"", f.name, arch)
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
		if *e.dst, err = f.intKey(keyLlama + e.key); err != nil {
			return model.Config{}, err
		}
	}
	if c.NKVHeads, err = f.intKeyOr(keyLlama+"attention.head_count_kv", c.NHeads); err != nil {
		return model.Config{}, err
	}
	if c.RopeTheta, err = f.float32KeyOr(keyLlama+"rope.freq_base", defaultRopeTheta); err != nil {
		return model.Config{}, err
	}
	if c.NormEps, err = f.float32KeyOr(keyLlama+"attention.layer_norm_rms_epsilon", defaultNormEps); err != nil {
		return model.Config{}, err
	}
	headDim := 0
	if c.NHeads > 0 {
		headDim = c.Dim / c.NHeads
	}
	if c.RopeDim, err = f.intKeyOr(keyLlama+"rope.dimension_count", headDim); err != nil {
		return model.Config{}, err
	}
	if c.VocabSize, err = f.vocabSize(); err != nil {
		return model.Config{}, err
	}
	c.TiedOutput = !f.HasTensor("output.weight")
	if err := c.Validate(); err != nil {
		return model.Config{}, fmt.Errorf("gguf %s: llama config: %s", f.name, oneLine(err))
	}
	return c, nil
}

// oneLine joins a multi-line error (errors.Join) into one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// vocabSize is the token list's length, or llama.vocab_size when the file has
// no token list; when both are present they must agree.
func (f *File) vocabSize() (int, error) {
	key := keyLlama + "vocab_size"
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

// intKey reads a non-negative integer that must fit in an int.
func (f *File) intKey(key string) (int, error) {
	u, err := f.Uint(key)
	if err != nil {
		return 0, err
	}
	if u > math.MaxInt32 {
		return 0, fmt.Errorf("gguf %s: metadata %q is %d, beyond any model size Seam accepts", f.name, key, u)
	}
	return int(u), nil
}

func (f *File) intKeyOr(key string, def int) (int, error) {
	if !f.Has(key) {
		return def, nil
	}
	return f.intKey(key)
}

// float32KeyOr reads a number as float32, requiring it to be finite after the
// conversion (a float64 beyond float32's range becomes infinite).
func (f *File) float32KeyOr(key string, def float32) (float32, error) {
	if !f.Has(key) {
		return def, nil
	}
	x, err := f.Float(key)
	if err != nil {
		return 0, err
	}
	v := float32(x)
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return 0, fmt.Errorf("gguf %s: metadata %q is %v, not a finite float32", f.name, key, x)
	}
	return v, nil
}

// LlamaWeights returns the whole model (layers [0, NLayers)) as views over the
// file, validated against LlamaConfig.
//
// GGUF llama q and k weights need no permutation: llama.cpp's converters undo
// Hugging Face's half-split RoPE layout, so the rows are in Meta's original
// order, where RoPE rotates adjacent pairs (2i, 2i+1) — the same convention as
// llama2.c and Seam's forward pass.
func (f *File) LlamaWeights() (*model.Weights, error) {
	c, err := f.LlamaConfig()
	if err != nil {
		return nil, err
	}
	w := &model.Weights{Config: c, First: 0, Last: c.NLayers, Layers: make([]model.Layer, c.NLayers)}
	get := func(dst *tensor.Tensor, name string) {
		if err == nil {
			*dst, err = f.Tensor(name)
		}
	}
	get(&w.Embedding, "token_embd.weight")
	for i := range w.Layers {
		l := &w.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		get(&l.AttnNorm, p+"attn_norm.weight")
		get(&l.Wq, p+"attn_q.weight")
		get(&l.Wk, p+"attn_k.weight")
		get(&l.Wv, p+"attn_v.weight")
		get(&l.Wo, p+"attn_output.weight")
		get(&l.FFNNorm, p+"ffn_norm.weight")
		get(&l.W1, p+"ffn_gate.weight")
		get(&l.W2, p+"ffn_down.weight")
		get(&l.W3, p+"ffn_up.weight")
	}
	get(&w.FinalNorm, "output_norm.weight")
	if c.TiedOutput {
		w.Output = w.Embedding
	} else {
		get(&w.Output, "output.weight")
	}
	if err != nil {
		return nil, err
	}
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("gguf %s: llama weights: %s", f.name, oneLine(err))
	}
	return w, nil
}

// Vocab is the tokenizer vocabulary stored in a GGUF file. Scores and Types are
// nil when the file omits them; otherwise they have one entry per piece.
type Vocab struct {
	Model  string // tokenizer.ggml.model, e.g. "llama" (SentencePiece) or "gpt2"; "" when absent
	Pieces []string
	Scores []float32
	Types  []int32 // llama.cpp token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
	BOS    int
	EOS    int
}

// Vocab reads the tokenizer.ggml.* metadata. BOS and EOS default to 1 and 2.
func (f *File) Vocab() (*Vocab, error) {
	v := &Vocab{}
	var err error
	if f.Has(KeyTokenizerModel) {
		if v.Model, err = f.String(KeyTokenizerModel); err != nil {
			return nil, err
		}
	}
	if v.Pieces, err = f.Strings(KeyTokens); err != nil {
		return nil, err
	}
	n := len(v.Pieces)
	if n == 0 {
		return nil, fmt.Errorf("gguf %s: %s is empty", f.name, KeyTokens)
	}
	if f.Has(KeyScores) {
		if v.Scores, err = f.Float32s(KeyScores); err != nil {
			return nil, err
		}
		if err := f.checkScores(v.Scores, n); err != nil {
			return nil, err
		}
	}
	if f.Has(KeyTokenTypes) {
		if v.Types, err = f.Int32s(KeyTokenTypes); err != nil {
			return nil, err
		}
		if len(v.Types) != n {
			return nil, fmt.Errorf("gguf %s: %s has %d entries, %s has %d", f.name, KeyTokenTypes, len(v.Types), KeyTokens, n)
		}
	}
	if v.BOS, err = f.tokenID(KeyBOS, defaultBOS, n); err != nil {
		return nil, err
	}
	if v.EOS, err = f.tokenID(KeyEOS, defaultEOS, n); err != nil {
		return nil, err
	}
	return v, nil
}

func (f *File) checkScores(scores []float32, n int) error {
	if len(scores) != n {
		return fmt.Errorf("gguf %s: %s has %d entries, %s has %d", f.name, KeyScores, len(scores), KeyTokens, n)
	}
	for i, s := range scores {
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("gguf %s: %s[%d] is %v, not finite", f.name, KeyScores, i, s)
		}
	}
	return nil
}

// tokenID reads a token id (default def) and requires it to index the vocabulary.
func (f *File) tokenID(key string, def, n int) (int, error) {
	id, err := f.intKeyOr(key, def)
	if err != nil {
		return 0, err
	}
	if id >= n {
		return 0, fmt.Errorf("gguf %s: metadata %q is %d, outside the %d-token vocabulary", f.name, key, id, n)
	}
	return id, nil
}
