package llama2c

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// WriteQ8 writes f32 weights as a version 2 checkpoint, the group-quantized
// int8 format llama2.c's runq.c reads, quantizing each run of groupSize
// values as llama2.c's export.py does: scale = max |w| / 127, q =
// round-half-even(w / scale). Benchmarks use it to give Seam and runq.c the
// same synthetic model. groupSize must divide dim (llama2.c's rule).
func WriteQ8(w io.Writer, m *model.Weights, groupSize int) error {
	c := m.Config
	if m.First != 0 || m.Last != c.NLayers {
		return fmt.Errorf("llama2.c writer needs every layer, have [%d, %d) of %d", m.First, m.Last, c.NLayers)
	}
	if groupSize <= 0 || groupSize > maxGroupSize || c.Dim%groupSize != 0 {
		return fmt.Errorf("group size %d must divide dim %d", groupSize, c.Dim)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	hdr := make([]byte, headerBytes)
	binary.LittleEndian.PutUint32(hdr, Magic)
	binary.LittleEndian.PutUint32(hdr[4:], 2)
	for i, v := range []int{c.Dim, c.HiddenDim, c.NLayers, c.NHeads, c.NKVHeads, c.VocabSize, c.SeqLen} {
		binary.LittleEndian.PutUint32(hdr[8+4*i:], uint32(int32(v)))
	}
	if c.TiedOutput {
		hdr[36] = 1
	}
	binary.LittleEndian.PutUint32(hdr[37:], uint32(groupSize))
	if _, err := bw.Write(hdr); err != nil {
		return err
	}
	var norms, mats []*tensor.Tensor
	perLayer := func(list *[]*tensor.Tensor, get func(*model.Layer) *tensor.Tensor) {
		for i := range m.Layers {
			*list = append(*list, get(&m.Layers[i]))
		}
	}
	perLayer(&norms, func(l *model.Layer) *tensor.Tensor { return &l.AttnNorm })
	perLayer(&norms, func(l *model.Layer) *tensor.Tensor { return &l.FFNNorm })
	norms = append(norms, &m.FinalNorm)
	mats = append(mats, &m.Embedding)
	for _, get := range []func(*model.Layer) *tensor.Tensor{
		func(l *model.Layer) *tensor.Tensor { return &l.Wq },
		func(l *model.Layer) *tensor.Tensor { return &l.Wk },
		func(l *model.Layer) *tensor.Tensor { return &l.Wv },
		func(l *model.Layer) *tensor.Tensor { return &l.Wo },
		func(l *model.Layer) *tensor.Tensor { return &l.W1 },
		func(l *model.Layer) *tensor.Tensor { return &l.W2 },
		func(l *model.Layer) *tensor.Tensor { return &l.W3 },
	} {
		perLayer(&mats, get)
	}
	if !c.TiedOutput {
		mats = append(mats, &m.Output)
	}
	for _, t := range norms {
		if err := writeF32(bw, t); err != nil {
			return err
		}
	}
	for _, t := range mats {
		if err := writeQ8(bw, t, groupSize); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// writeQ8 writes the int8 values of f32 tensor t, then its group scales.
func writeQ8(w io.Writer, t *tensor.Tensor, gs int) error {
	if t.Type != tensor.F32 {
		return fmt.Errorf("WriteQ8 quantizes f32 tensors; %s is %s", t.Name, t.Type)
	}
	v := tensor.AsF32(t.Data)
	if len(v)%gs != 0 {
		return fmt.Errorf("tensor %s: %d values are not whole groups of %d", t.Name, len(v), gs)
	}
	q := make([]byte, len(v))
	scales := make([]byte, len(v)/gs*4)
	for g := range len(v) / gs {
		group := v[g*gs : (g+1)*gs]
		var wmax float32
		for _, x := range group {
			wmax = max(wmax, float32(math.Abs(float64(x))))
		}
		scale := wmax / 127
		for i, x := range group {
			if scale != 0 {
				q[g*gs+i] = byte(int8(math.RoundToEven(float64(x / scale))))
			}
		}
		binary.LittleEndian.PutUint32(scales[4*g:], math.Float32bits(scale))
	}
	if _, err := w.Write(q); err != nil {
		return err
	}
	_, err := w.Write(scales)
	return err
}
