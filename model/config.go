// Package model holds the llama-family transformer: its configuration, its
// weights (as typed views over mapped bytes), and the forward pass.
//
// The forward pass is exposed by layer range so that a pipeline stage runs
// exactly the code the whole model runs: Embed, then Layers over [a, b) with
// the KV cache of those layers, then Head. Whole-model generation is the
// composition of the three, which is what makes split inference bit-identical.
//
// One forward pass covers the family's variants (Llama 2 and 3, Qwen 2 and
// 3), each switched on by a Config field rather than by an architecture name:
// biases on Q, K and V (QKVBias), per-head RMSNorm of Q and K (QKNorm), a
// head width that is not Dim/NHeads (HeadSize), the NeoX half-split RoPE
// pairing (RopeNeox), linear RoPE scaling (RopeLinear) and per-frequency RoPE
// divisors (RopeFreqs, Llama 3's scaling). docs/architectures.md maps each
// GGUF architecture to these fields.
package model

import (
	"errors"
	"fmt"
	"math"
)

// Config is the architecture of a llama-family model. The fields after
// TiedOutput are zero for the original Llama layout, so that such a config
// reads, writes and hashes as it did before they existed.
type Config struct {
	Dim        int     `json:"dim"`         // residual stream width (embedding length)
	HiddenDim  int     `json:"hidden_dim"`  // feed-forward width
	NLayers    int     `json:"n_layers"`    // transformer blocks
	NHeads     int     `json:"n_heads"`     // query heads
	NKVHeads   int     `json:"n_kv_heads"`  // key/value heads (grouped-query attention)
	VocabSize  int     `json:"vocab_size"`  // classifier rows
	SeqLen     int     `json:"seq_len"`     // context length
	RopeTheta  float32 `json:"rope_theta"`  // RoPE frequency base
	RopeDim    int     `json:"rope_dim"`    // rotated dimensions per head (<= head dim)
	NormEps    float32 `json:"norm_eps"`    // RMSNorm epsilon
	TiedOutput bool    `json:"tied_output"` // classifier shares the token embedding

	// HeadSize is the width of one attention head (query, key and value);
	// 0 means Dim / NHeads. Qwen 3 sets it independently of Dim.
	HeadSize int `json:"head_dim,omitempty"`
	// RopeNeox pairs dimension i with i + RopeDim/2 of each head (the GPT-NeoX
	// layout llama.cpp uses for Qwen) instead of 2i with 2i+1.
	RopeNeox bool `json:"rope_neox,omitempty"`
	// RopeLinear divides every position by this factor before rotating
	// (linear RoPE scaling, llama.cpp's rope.scaling.factor); 0 means none.
	RopeLinear float32 `json:"rope_linear,omitempty"`
	// RopeFreqs: each layer holds RopeDim/2 positive divisors of the RoPE
	// frequencies (role rope_freqs; Llama 3.1's scaling), all layers equal.
	RopeFreqs bool `json:"rope_freqs,omitempty"`
	// QKVBias: each layer adds biases bq, bk, bv after the Q, K, V projections.
	QKVBias bool `json:"qkv_bias,omitempty"`
	// QKNorm: each layer RMS-normalises every query and key head (weights
	// q_norm, k_norm of HeadDim values) before RoPE.
	QKNorm bool `json:"qk_norm,omitempty"`
}

// Hard limits on what a file may declare. They bound allocations made from
// untrusted headers (a KV cache is n_layers*seq_len*kv_dim floats).
const (
	MaxDim    = 1 << 16
	MaxLayers = 1 << 10
	MaxHeads  = 1 << 10
	MaxVocab  = 1 << 22
	MaxSeqLen = 1 << 20
)

// HeadDim is the width of one attention head.
func (c *Config) HeadDim() int {
	if c.HeadSize != 0 {
		return c.HeadSize
	}
	if c.NHeads <= 0 {
		return 0
	}
	return c.Dim / c.NHeads
}

// QDim is the width of the queries of one position: all heads side by side.
// It is the output width of Wq and the input width of Wo.
func (c *Config) QDim() int { return c.HeadDim() * c.NHeads }

// KVDim is the width of the keys (and values) of one position in one layer.
func (c *Config) KVDim() int { return c.HeadDim() * c.NKVHeads }

// Extended reports whether the config uses any field beyond the original
// Llama layout (everything after TiedOutput). Containers and model
// identities of such configs need the newer format versions.
func (c *Config) Extended() bool {
	return c.HeadSize != 0 || c.RopeNeox || c.RopeLinear != 0 || c.RopeFreqs || c.QKVBias || c.QKNorm
}

// Validate checks the configuration for internal consistency and hard limits.
func (c *Config) Validate() error {
	var errs []error
	check := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%s = %d, want %d..%d", name, v, lo, hi))
		}
	}
	check("dim", c.Dim, 1, MaxDim)
	check("hidden_dim", c.HiddenDim, 1, 4*MaxDim)
	check("n_layers", c.NLayers, 1, MaxLayers)
	check("n_heads", c.NHeads, 1, MaxHeads)
	check("n_kv_heads", c.NKVHeads, 1, MaxHeads)
	check("vocab_size", c.VocabSize, 1, MaxVocab)
	check("seq_len", c.SeqLen, 1, MaxSeqLen)
	check("head_dim", c.HeadSize, 0, MaxDim)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	headOK := true
	if c.HeadSize == 0 && c.Dim%c.NHeads != 0 {
		errs = append(errs, fmt.Errorf("dim %d is not a multiple of n_heads %d", c.Dim, c.NHeads))
		headOK = false
	} else if c.HeadDim()%2 != 0 {
		errs = append(errs, fmt.Errorf("head dim %d is odd; RoPE rotates pairs", c.HeadDim()))
	}
	if headOK && c.QDim() > 4*MaxDim {
		errs = append(errs, fmt.Errorf("n_heads %d x head_dim %d = %d query values, want at most %d", c.NHeads, c.HeadDim(), c.QDim(), 4*MaxDim))
	}
	if c.NHeads%c.NKVHeads != 0 {
		errs = append(errs, fmt.Errorf("n_heads %d is not a multiple of n_kv_heads %d", c.NHeads, c.NKVHeads))
	}
	if headOK && (c.RopeDim < 2 || c.RopeDim > c.HeadDim() || c.RopeDim%2 != 0) {
		errs = append(errs, fmt.Errorf("rope_dim %d, want an even number in 2..%d", c.RopeDim, c.HeadDim()))
	}
	if !(c.RopeTheta > 0) || math.IsInf(float64(c.RopeTheta), 0) {
		errs = append(errs, fmt.Errorf("rope_theta %v is not a positive finite number", c.RopeTheta))
	}
	if c.RopeLinear != 0 && (!(c.RopeLinear > 0) || math.IsInf(float64(c.RopeLinear), 0)) {
		errs = append(errs, fmt.Errorf("rope_linear %v is not 0 (none) or a positive finite factor", c.RopeLinear))
	}
	if !(c.NormEps > 0) || c.NormEps > 1 {
		errs = append(errs, fmt.Errorf("norm_eps %v, want a small positive number", c.NormEps))
	}
	return errors.Join(errs...)
}

// String summarises the configuration on one line.
func (c *Config) String() string {
	s := fmt.Sprintf("dim %d, hidden %d, %d layers, %d heads, %d kv heads, vocab %d, context %d, rope theta %g",
		c.Dim, c.HiddenDim, c.NLayers, c.NHeads, c.NKVHeads, c.VocabSize, c.SeqLen, c.RopeTheta)
	if c.HeadSize != 0 {
		s += fmt.Sprintf(", head dim %d", c.HeadSize)
	}
	if c.RopeNeox {
		s += ", neox rope"
	}
	if c.RopeLinear != 0 {
		s += fmt.Sprintf(", rope linear scaling %g", c.RopeLinear)
	}
	if c.RopeFreqs {
		s += ", rope frequency factors"
	}
	if c.QKVBias {
		s += ", qkv bias"
	}
	if c.QKNorm {
		s += ", q/k norm"
	}
	return s
}
