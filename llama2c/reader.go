package llama2c

import (
	"fmt"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// reader walks the weight arrays in file order. The first failure sticks and
// later calls do nothing, so the layout code reads as a plain list of arrays.
type reader struct {
	data      []byte
	off       int
	name      string
	err       error
	quantized bool // matrices are Q8G (version 2); norms stay f32
	groupSize int
}

func (r *reader) take(what string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.data)-r.off {
		r.err = fmt.Errorf("%s: truncated: %s needs %d bytes at offset %d, file has %d", r.name, what, n, r.off, len(r.data))
		return nil
	}
	b := r.data[r.off : r.off+n]
	r.off += n
	return b
}

func (r *reader) skip(what string, n int) { r.take(what, n) }

func (r *reader) size(what string, rows, cols, elemBytes int) int {
	n, err := tensor.MulSize(rows, cols)
	if err == nil {
		n, err = tensor.MulSize(n, elemBytes)
	}
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("%s: %s: %w", r.name, what, err)
	}
	return n
}

// f32 reads an f32 array of rows x cols.
func (r *reader) f32(name string, rows, cols int) tensor.Tensor {
	b := r.take(name, r.size(name, rows, cols, 4))
	return tensor.Tensor{Name: name, Type: tensor.F32, Rows: rows, Cols: cols, Data: b}
}

// matrix reads a weight matrix: f32, or for version 2 int8 values followed
// by one f32 scale per group.
func (r *reader) matrix(name string, rows, cols int) tensor.Tensor {
	if !r.quantized {
		return r.f32(name, rows, cols)
	}
	n := r.size(name, rows, cols, 1)
	if r.err == nil && n%r.groupSize != 0 {
		r.err = fmt.Errorf("%s: %s has %d values, not a multiple of group size %d", r.name, name, n, r.groupSize)
	}
	q := r.take(name, n)
	s := r.take(name+" scales", n/r.groupSize*4)
	return tensor.Tensor{Name: name, Type: tensor.Q8G, Rows: rows, Cols: cols, Data: q, Scales: s, GroupSize: r.groupSize}
}

type layerField func(*model.Layer) *tensor.Tensor

func (r *reader) layered(w *model.Weights, field layerField, role string, rows, cols int) {
	for i := range w.Layers {
		*field(&w.Layers[i]) = r.f32(fmt.Sprintf("layer %d %s", i, role), rows, cols)
	}
}

func (r *reader) layeredMatrix(w *model.Weights, field layerField, role string, rows, cols int) {
	for i := range w.Layers {
		*field(&w.Layers[i]) = r.matrix(fmt.Sprintf("layer %d %s", i, role), rows, cols)
	}
}

// norms reads the version 1/2 order: all attention norms, all FFN norms, the final norm.
func (r *reader) norms(w *model.Weights, cfg model.Config) {
	r.layered(w, func(l *model.Layer) *tensor.Tensor { return &l.AttnNorm }, "attn_norm", 1, cfg.Dim)
	r.layered(w, func(l *model.Layer) *tensor.Tensor { return &l.FFNNorm }, "ffn_norm", 1, cfg.Dim)
	w.FinalNorm = r.f32("final_norm", 1, cfg.Dim)
}

func (r *reader) layeredMatrices(w *model.Weights, cfg model.Config) {
	kv := cfg.KVDim()
	r.layeredMatrix(w, func(l *model.Layer) *tensor.Tensor { return &l.Wq }, "wq", cfg.Dim, cfg.Dim)
	r.layeredMatrix(w, func(l *model.Layer) *tensor.Tensor { return &l.Wk }, "wk", kv, cfg.Dim)
	r.layeredMatrix(w, func(l *model.Layer) *tensor.Tensor { return &l.Wv }, "wv", kv, cfg.Dim)
	r.layeredMatrix(w, func(l *model.Layer) *tensor.Tensor { return &l.Wo }, "wo", cfg.Dim, cfg.Dim)
}

func (r *reader) layeredFFN(w *model.Weights, cfg model.Config) {
	r.layeredMatrix(w, func(l *model.Layer) *tensor.Tensor { return &l.W1 }, "w1", cfg.HiddenDim, cfg.Dim)
	r.layeredMatrix(w, func(l *model.Layer) *tensor.Tensor { return &l.W2 }, "w2", cfg.Dim, cfg.HiddenDim)
	r.layeredMatrix(w, func(l *model.Layer) *tensor.Tensor { return &l.W3 }, "w3", cfg.HiddenDim, cfg.Dim)
}

// output sets the classifier: the embedding when tied, else the next matrix.
func (r *reader) output(w *model.Weights) {
	if w.Config.TiedOutput {
		w.Output = w.Embedding
		w.Output.Name = "output (tied to token_embedding)"
		return
	}
	w.Output = r.matrix("output", w.Config.VocabSize, w.Config.Dim)
}

func (r *reader) finish(c *Checkpoint) (*Checkpoint, error) {
	if r.err != nil {
		return nil, r.err
	}
	if extra := len(r.data) - r.off; extra != 0 {
		return nil, fmt.Errorf("%s: %d unexpected bytes after the weights (offset %d of %d); the header may not match the file", r.name, extra, r.off, len(r.data))
	}
	return c, nil
}
