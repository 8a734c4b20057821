package model

import (
	"bytes"
	"fmt"
	"math"

	"github.com/seamlm/seam/tensor"
)

// Layer holds the weights of one transformer block. Matrices are stored
// [out, in]: Wq is [q_dim, dim], Wk and Wv are [kv_dim, dim], Wo is
// [dim, q_dim], W1 (gate) and W3 (up) are [hidden, dim], W2 (down) is
// [dim, hidden] (q_dim = n_heads x head_dim; it is dim unless the config sets
// a head size). Norm weights, biases and RoPE factors are 1 x N f32 tensors.
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

	// Present only when the config asks for them (see Config.LayerRoles).
	Bq, Bk, Bv   tensor.Tensor // 1 x q_dim, 1 x kv_dim, 1 x kv_dim (QKVBias)
	QNorm, KNorm tensor.Tensor // 1 x head_dim each (QKNorm)
	RopeFreqs    tensor.Tensor // 1 x rope_dim/2 divisors of the RoPE frequencies (RopeFreqs)
}

// Tensors lists the nine tensors every layer has, in LayerRoles order.
func (l *Layer) Tensors() []*tensor.Tensor {
	return []*tensor.Tensor{&l.AttnNorm, &l.Wq, &l.Wk, &l.Wv, &l.Wo, &l.FFNNorm, &l.W1, &l.W2, &l.W3}
}

// LayerRoles names the entries of Layer.Tensors, in the same order.
var LayerRoles = []string{"attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"}

// Roles of the optional layer tensors, in canonical order after LayerRoles.
const (
	RoleBq        = "bq"
	RoleBk        = "bk"
	RoleBv        = "bv"
	RoleQNorm     = "q_norm"
	RoleKNorm     = "k_norm"
	RoleRopeFreqs = "rope_freqs"
)

// LayerRoles lists the roles of the tensors each layer of this config holds,
// in canonical order: LayerRoles, then bq bk bv (QKVBias), q_norm k_norm
// (QKNorm), rope_freqs (RopeFreqs).
func (c *Config) LayerRoles() []string {
	roles := append([]string(nil), LayerRoles...)
	if c.QKVBias {
		roles = append(roles, RoleBq, RoleBk, RoleBv)
	}
	if c.QKNorm {
		roles = append(roles, RoleQNorm, RoleKNorm)
	}
	if c.RopeFreqs {
		roles = append(roles, RoleRopeFreqs)
	}
	return roles
}

// Tensor returns the layer's tensor of role, or nil for an unknown role.
func (l *Layer) Tensor(role string) *tensor.Tensor {
	for i, r := range LayerRoles {
		if r == role {
			return l.Tensors()[i]
		}
	}
	switch role {
	case RoleBq:
		return &l.Bq
	case RoleBk:
		return &l.Bk
	case RoleBv:
		return &l.Bv
	case RoleQNorm:
		return &l.QNorm
	case RoleKNorm:
		return &l.KNorm
	case RoleRopeFreqs:
		return &l.RopeFreqs
	}
	return nil
}

// TensorsOf lists the layer's tensors of c.LayerRoles(), in that order.
func (l *Layer) TensorsOf(c *Config) []*tensor.Tensor {
	roles := c.LayerRoles()
	out := make([]*tensor.Tensor, len(roles))
	for i, r := range roles {
		out[i] = l.Tensor(r)
	}
	return out
}

// RoleShape is the shape the config requires of a layer tensor role, and
// whether it must be f32 (norms, biases and RoPE factors are). ok is false
// for a role this config's layers do not hold.
func (c *Config) RoleShape(role string) (rows, cols int, mustF32, ok bool) {
	q, kv := c.QDim(), c.KVDim()
	switch role {
	case "attn_norm", "ffn_norm":
		return 1, c.Dim, true, true
	case "wq":
		return q, c.Dim, false, true
	case "wk", "wv":
		return kv, c.Dim, false, true
	case "wo":
		return c.Dim, q, false, true
	case "w1", "w3":
		return c.HiddenDim, c.Dim, false, true
	case "w2":
		return c.Dim, c.HiddenDim, false, true
	case RoleBq:
		return 1, q, true, c.QKVBias
	case RoleBk, RoleBv:
		return 1, kv, true, c.QKVBias
	case RoleQNorm, RoleKNorm:
		return 1, c.HeadDim(), true, c.QKNorm
	case RoleRopeFreqs:
		return 1, c.RopeDim / 2, true, c.RopeFreqs
	}
	return 0, 0, false, false
}

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

// Validate checks every held tensor's type, shape and byte length against the
// config, and the values of the RoPE factors.
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
	wantF32 := func(t *tensor.Tensor, cols int) error {
		if t.Type != tensor.F32 {
			return fmt.Errorf("tensor %s is %s, want f32", t.Name, t.Type)
		}
		return want(t, 1, cols)
	}
	if w.HasEmbedding() {
		if err := want(&w.Embedding, c.VocabSize, c.Dim); err != nil {
			return err
		}
	}
	for i := w.First; i < w.Last; i++ {
		l := &w.Layers[i]
		for _, role := range c.LayerRoles() {
			rows, cols, mustF32, _ := c.RoleShape(role)
			t := l.Tensor(role)
			var err error
			if mustF32 {
				err = wantF32(t, cols)
			} else {
				err = want(t, rows, cols)
			}
			if err != nil {
				return fmt.Errorf("layer %d: %s: %w", i, role, err)
			}
		}
		if c.RopeFreqs {
			if err := checkRopeFreqs(l, &w.Layers[w.First]); err != nil {
				return fmt.Errorf("layer %d: %w", i, err)
			}
		}
	}
	if w.HasHead() {
		if err := wantF32(&w.FinalNorm, c.Dim); err != nil {
			return err
		}
		if err := want(&w.Output, c.VocabSize, c.Dim); err != nil {
			return err
		}
	}
	return nil
}

// checkRopeFreqs requires positive finite factors, equal in every layer:
// the model computes one rotation table from the first held layer's.
func checkRopeFreqs(l, first *Layer) error {
	for k, f := range tensor.AsF32(l.RopeFreqs.Data) {
		if !(f > 0) || math.IsInf(float64(f), 0) {
			return fmt.Errorf("rope_freqs %s[%d] is %v, want a positive finite divisor", l.RopeFreqs.Name, k, f)
		}
	}
	if !bytes.Equal(l.RopeFreqs.Data, first.RopeFreqs.Data) {
		return fmt.Errorf("rope_freqs %s differs from the first held layer's %s; every layer must share one set of factors",
			l.RopeFreqs.Name, first.RopeFreqs.Name)
	}
	return nil
}
