// Package model holds the llama-family transformer: its configuration, its
// weights (as typed views over mapped bytes), and the forward pass.
//
// The forward pass is exposed by layer range so that a pipeline stage runs
// exactly the code the whole model runs: Embed, then Layers over [a, b) with
// the KV cache of those layers, then Head. Whole-model generation is the
// composition of the three, which is what makes split inference bit-identical.
package model

import (
	"errors"
	"fmt"
	"math"
)

// Config is the architecture of a llama-family model.
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
func (c *Config) HeadDim() int { return c.Dim / c.NHeads }

// KVDim is the width of the keys (and values) of one position in one layer.
func (c *Config) KVDim() int { return c.HeadDim() * c.NKVHeads }

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
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if c.Dim%c.NHeads != 0 {
		errs = append(errs, fmt.Errorf("dim %d is not a multiple of n_heads %d", c.Dim, c.NHeads))
	} else if c.HeadDim()%2 != 0 {
		errs = append(errs, fmt.Errorf("head dim %d is odd; RoPE rotates pairs", c.HeadDim()))
	}
	if c.NHeads%c.NKVHeads != 0 {
		errs = append(errs, fmt.Errorf("n_heads %d is not a multiple of n_kv_heads %d", c.NHeads, c.NKVHeads))
	}
	if c.Dim%c.NHeads == 0 && (c.RopeDim < 2 || c.RopeDim > c.HeadDim() || c.RopeDim%2 != 0) {
		errs = append(errs, fmt.Errorf("rope_dim %d, want an even number in 2..%d", c.RopeDim, c.HeadDim()))
	}
	if !(c.RopeTheta > 0) || math.IsInf(float64(c.RopeTheta), 0) {
		errs = append(errs, fmt.Errorf("rope_theta %v is not a positive finite number", c.RopeTheta))
	}
	if !(c.NormEps > 0) || c.NormEps > 1 {
		errs = append(errs, fmt.Errorf("norm_eps %v, want a small positive number", c.NormEps))
	}
	return errors.Join(errs...)
}

// String summarises the configuration on one line.
func (c *Config) String() string {
	return fmt.Sprintf("dim %d, hidden %d, %d layers, %d heads, %d kv heads, vocab %d, context %d, rope theta %g",
		c.Dim, c.HiddenDim, c.NLayers, c.NHeads, c.NKVHeads, c.VocabSize, c.SeqLen, c.RopeTheta)
}
