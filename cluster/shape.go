package cluster

import (
	"fmt"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// Shape is what the planner needs to know of a model: its configuration
// and the bytes each part occupies on a stage.
type Shape struct {
	Config model.Config
	// LayerBytes is one layer's weights as mapped (the largest layer, if
	// they differ).
	LayerBytes int64
	// EmbedBytes is the token embedding, held by the first stage.
	EmbedBytes int64
	// HeadBytes is the final norm and classifier, held by the last stage.
	// For a tied classifier it is the embedding again: a last stage that is
	// not also the first maps the embedding for its classifier.
	HeadBytes int64
}

// KVBytesPerLayer is one session's KV cache for one layer: keys and values,
// f32, for the whole context.
func (s *Shape) KVBytesPerLayer() int64 {
	c := &s.Config
	return 2 * int64(c.SeqLen) * int64(c.KVDim()) * 4
}

// ShapeOf measures a model's shape from its weights. Only the held layers,
// and the embedding and head when held, are measured; w must hold at least
// one layer. A missing embedding or head is estimated from the
// configuration at the layers' element type.
func ShapeOf(w *model.Weights) (Shape, error) {
	s := Shape{Config: w.Config}
	for l := w.First; l < w.Last; l++ {
		var n int64
		for _, t := range w.Layers[l].Tensors() {
			n += int64(len(t.Data))
		}
		s.LayerBytes = max(s.LayerBytes, n)
	}
	if s.LayerBytes == 0 {
		return s, fmt.Errorf("weights hold no layer to measure")
	}
	c := &w.Config
	if w.HasEmbedding() {
		s.EmbedBytes = int64(len(w.Embedding.Data))
	} else {
		dt := w.Layers[w.First].Wq.Type
		rb, err := dt.RowBytes(c.Dim)
		if err != nil {
			rb = 4 * c.Dim
		}
		s.EmbedBytes = int64(rb) * int64(c.VocabSize)
	}
	if w.HasHead() {
		s.HeadBytes = int64(len(w.FinalNorm.Data)) + int64(len(w.Output.Data))
	} else {
		s.HeadBytes = s.EmbedBytes + 4*int64(c.Dim)
	}
	return s, nil
}

// ShapeFromConfig computes a shape for a model whose matrices are all of
// type dt (embedding included), with f32 norms.
func ShapeFromConfig(c model.Config, dt tensor.DType) (Shape, error) {
	if err := c.Validate(); err != nil {
		return Shape{}, err
	}
	mat := func(rows, cols int) (int64, error) {
		rb, err := dt.RowBytes(cols)
		if err != nil {
			return 0, err
		}
		return int64(rb) * int64(rows), nil
	}
	kv := c.KVDim()
	var layer int64
	for _, m := range [][2]int{{c.Dim, c.Dim}, {kv, c.Dim}, {kv, c.Dim}, {c.Dim, c.Dim}, {c.HiddenDim, c.Dim}, {c.Dim, c.HiddenDim}, {c.HiddenDim, c.Dim}} {
		n, err := mat(m[0], m[1])
		if err != nil {
			return Shape{}, fmt.Errorf("%s matrix %dx%d: %w", dt, m[0], m[1], err)
		}
		layer += n
	}
	layer += 2 * 4 * int64(c.Dim)
	embed, err := mat(c.VocabSize, c.Dim)
	if err != nil {
		return Shape{}, err
	}
	return Shape{Config: c, LayerBytes: layer, EmbedBytes: embed, HeadBytes: embed + 4*int64(c.Dim)}, nil
}
