package llama2c

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// WriteLegacy writes f32 weights as a version 0 checkpoint, the format
// llama2.c's run.c reads. Benchmarks use it to build synthetic models that
// both Seam and run.c can load. The RoPE tables that format reserves space
// for are written as zeros: no reader uses them.
func WriteLegacy(w io.Writer, m *model.Weights) error {
	c := m.Config
	if m.First != 0 || m.Last != c.NLayers {
		return fmt.Errorf("llama2.c writer needs every layer, have [%d, %d) of %d", m.First, m.Last, c.NLayers)
	}
	vocab := int32(c.VocabSize)
	if !c.TiedOutput {
		vocab = -vocab
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	hdr := []int32{int32(c.Dim), int32(c.HiddenDim), int32(c.NLayers), int32(c.NHeads), int32(c.NKVHeads), vocab, int32(c.SeqLen)}
	if err := binary.Write(bw, binary.LittleEndian, hdr); err != nil {
		return err
	}
	var order []*tensor.Tensor
	perLayer := func(get func(*model.Layer) *tensor.Tensor) {
		for i := range m.Layers {
			order = append(order, get(&m.Layers[i]))
		}
	}
	order = append(order, &m.Embedding)
	perLayer(func(l *model.Layer) *tensor.Tensor { return &l.AttnNorm })
	perLayer(func(l *model.Layer) *tensor.Tensor { return &l.Wq })
	perLayer(func(l *model.Layer) *tensor.Tensor { return &l.Wk })
	perLayer(func(l *model.Layer) *tensor.Tensor { return &l.Wv })
	perLayer(func(l *model.Layer) *tensor.Tensor { return &l.Wo })
	perLayer(func(l *model.Layer) *tensor.Tensor { return &l.FFNNorm })
	perLayer(func(l *model.Layer) *tensor.Tensor { return &l.W1 })
	perLayer(func(l *model.Layer) *tensor.Tensor { return &l.W2 })
	perLayer(func(l *model.Layer) *tensor.Tensor { return &l.W3 })
	order = append(order, &m.FinalNorm)
	for _, t := range order {
		if err := writeF32(bw, t); err != nil {
			return err
		}
	}
	if _, err := bw.Write(make([]byte, 2*c.SeqLen*(c.HeadDim()/2)*4)); err != nil {
		return err
	}
	if !c.TiedOutput {
		if err := writeF32(bw, &m.Output); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func writeF32(w io.Writer, t *tensor.Tensor) error {
	if t.Type != tensor.F32 {
		return fmt.Errorf("llama2.c version 0 holds f32 only; tensor %s is %s", t.Name, t.Type)
	}
	_, err := w.Write(t.Data)
	return err
}
