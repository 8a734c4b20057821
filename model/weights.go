package model

import (
	"fmt"

	"github.com/seamlm/seam/tensor"
)

// Layer holds the weights of one transformer block. Matrices are stored
// [out, in]: Wq is [dim, dim], Wk and Wv are [kv_dim, dim], Wo is [dim, dim],
// W1 (gate) and W3 (up) are [hidden, dim], W2 (down) is [dim, hidden].
// Norm weights are 1 x dim f32 tensors.
type Layer struct {
	AttnNorm tensor.Tensor
	Wq       tensor.Tensor
	Wk       tensor.Tensor
	Wv       tensor.Tensor
	Wo       tensor.Tensor
	FFNNorm  tensor.Tensor
	W1       tensor.Tensor
	W2       tensor.Tensor
	W3       tensor.Tensor
}

// Tensors lists the layer's tensors in a fixed order, with their role names.
func (l *Layer) Tensors() []*tensor.Tensor {
	return []*tensor.Tensor{&l.AttnNorm, &l.Wq, &l.Wk, &l.Wv, &l.Wo, &l.FFNNorm, &l.W1, &l.W2, &l.W3}
}

// LayerRoles names the entries of Layer.Tensors, in the same order.
var LayerRoles = []string{"attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"}

// Weights is a model, or the part of one a stage holds. Layers has NLayers
// entries; those outside [First, Last) are zero. Embedding is present when
// First == 0 (or the head needs it for a tied classifier); FinalNorm and Output
// when Last == NLayers.
type Weights struct {
	Config    Config
	First     int // first layer held
	Last      int // one past the last layer held
	Embedding tensor.Tensor
	Layers    []Layer
	FinalNorm tensor.Tensor
	Output    tensor.Tensor // classifier [vocab, dim]; a copy of Embedding's view when tied
}

// HasEmbedding reports whether the token embedding is held.
func (w *Weights) HasEmbedding() bool { return w.First == 0 }

// HasHead reports whether the final norm and classifier are held.
func (w *Weights) HasHead() bool { return w.Last == w.Config.NLayers }

// Validate checks every held tensor's type, shape and byte length against the config.
func (w *Weights) Validate() error {
	c := &w.Config
	if err := c.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if w.First < 0 || w.First >= w.Last || w.Last > c.NLayers {
		return fmt.Errorf("layer range [%d, %d) is not within [0, %d)", w.First, w.Last, c.NLayers)
	}
	if len(w.Layers) != c.NLayers {
		return fmt.Errorf("weights hold %d layer slots, config says %d", len(w.Layers), c.NLayers)
	}
	want := func(t *tensor.Tensor, rows, cols int) error {
		if t.Rows != rows || t.Cols != cols {
			return fmt.Errorf("tensor %s is %dx%d, want %dx%d", t.Name, t.Rows, t.Cols, rows, cols)
		}
		return t.Check()
	}
	wantNorm := func(t *tensor.Tensor) error {
		if t.Type != tensor.F32 {
			return fmt.Errorf("norm tensor %s is %s, want f32", t.Name, t.Type)
		}
		return want(t, 1, c.Dim)
	}
	if w.HasEmbedding() {
		if err := want(&w.Embedding, c.VocabSize, c.Dim); err != nil {
			return err
		}
	}
	kv := c.KVDim()
	for i := w.First; i < w.Last; i++ {
		l := &w.Layers[i]
		checks := []error{
			wantNorm(&l.AttnNorm), want(&l.Wq, c.Dim, c.Dim), want(&l.Wk, kv, c.Dim), want(&l.Wv, kv, c.Dim),
			want(&l.Wo, c.Dim, c.Dim), wantNorm(&l.FFNNorm), want(&l.W1, c.HiddenDim, c.Dim),
			want(&l.W2, c.Dim, c.HiddenDim), want(&l.W3, c.HiddenDim, c.Dim),
		}
		for _, err := range checks {
			if err != nil {
				return fmt.Errorf("layer %d: %w", i, err)
			}
		}
	}
	if w.HasHead() {
		if err := wantNorm(&w.FinalNorm); err != nil {
			return err
		}
		if err := want(&w.Output, c.VocabSize, c.Dim); err != nil {
			return err
		}
	}
	return nil
}
