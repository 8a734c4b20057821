package container

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zeebo/blake3"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// identityDomain starts every identity preimage. It versions the identity
// scheme, which is independent of the container generation: a new file layout
// holding the same weights keeps the same identity. Version 2 extends
// version 1 with the config fields of the family's variants; a config that
// uses none of them keeps its version 1 identity (model.Config.Extended).
const (
	identityDomain  = "seam model identity 1\n"
	identityDomain2 = "seam model identity 2\n"
)

// computeIdentity hashes the config and every tensor's role, type, shape and
// checksums in canonical order: embedding, layers 0..n-1 each in
// Config.LayerRoles order, final_norm, then output when untied. Offsets,
// region names and alignment are left out: they are layout, not weights.
// docs/container.md gives the preimage byte by byte.
func computeIdentity(cfg *model.Config, segments []Segment) [32]byte {
	b := []byte(identityDomain)
	if cfg.Extended() {
		b = []byte(identityDomain2)
	}
	b = appendConfig(b, cfg)
	var tensors [][]byte
	for _, s := range segments {
		for _, role := range segmentRoles(s.Name, cfg) {
			tensors = append(tensors, tensorRecord(s, role))
		}
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(tensors)))
	for _, t := range tensors {
		b = append(b, t...)
	}
	return blake3.Sum256(b)
}

func appendConfig(b []byte, c *model.Config) []byte {
	le := binary.LittleEndian
	for _, v := range []int{c.Dim, c.HiddenDim, c.NLayers, c.NHeads, c.NKVHeads, c.VocabSize, c.SeqLen} {
		b = le.AppendUint64(b, uint64(v))
	}
	b = le.AppendUint32(b, math.Float32bits(c.RopeTheta))
	b = le.AppendUint64(b, uint64(c.RopeDim))
	b = le.AppendUint32(b, math.Float32bits(c.NormEps))
	b = append(b, flag(c.TiedOutput))
	if !c.Extended() {
		return b
	}
	b = le.AppendUint64(b, uint64(c.HeadSize))
	b = append(b, flag(c.RopeNeox))
	b = le.AppendUint32(b, math.Float32bits(c.RopeLinear))
	return append(b, flag(c.RopeFreqs), flag(c.QKVBias), flag(c.QKNorm))
}

func flag(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// tensorRecord encodes the tensor of role in segment s. The segment has been
// validated, so the role and any scales region are present.
func tensorRecord(s Segment, role string) []byte {
	le := binary.LittleEndian
	var r, scales Region
	for _, x := range s.Regions {
		if x.Role == role {
			r = x
		}
	}
	for _, x := range s.Regions {
		if r.Scales != "" && x.Name == r.Scales {
			scales = x
		}
	}
	b := le.AppendUint64(nil, uint64(int64(s.Layer))) // -1 (all ones) outside layers
	b = append(b, byte(len(role)))
	b = append(b, role...)
	dt := r.DType.String()
	b = append(b, byte(len(dt)))
	b = append(b, dt...)
	b = le.AppendUint64(b, uint64(r.Rows))
	b = le.AppendUint64(b, uint64(r.Cols))
	b = le.AppendUint64(b, uint64(r.GroupSize))
	b = append(b, r.Checksum[:]...)
	return append(b, scales.Checksum[:]...) // zeros when there are no scales
}

// WeightsIdentity computes, from weights held in memory (a GGUF file or a
// llama2.c checkpoint opened directly), the identity that importing them
// would give the container. A stage serving the container and a head holding
// the source file therefore agree on the model at handshake. It hashes every
// tensor, so it reads the whole model once.
func WeightsIdentity(w *model.Weights) ([32]byte, error) {
	c := &w.Config
	if w.First != 0 || w.Last != c.NLayers {
		return [32]byte{}, fmt.Errorf("model identity needs every layer, have [%d, %d) of %d", w.First, w.Last, c.NLayers)
	}
	seg := func(name string, layer int, roles []string, ts []*tensor.Tensor) Segment {
		s := Segment{Name: name, Layer: layer}
		for i, t := range ts {
			r := Region{Role: roles[i], DType: t.Type, Rows: t.Rows, Cols: t.Cols, GroupSize: t.GroupSize, Checksum: blake3.Sum256(t.Data)}
			if t.Type == tensor.Q8G {
				r.Scales = roles[i] + ".scales"
				s.Regions = append(s.Regions, Region{Name: r.Scales, Role: RoleScales, Checksum: blake3.Sum256(t.Scales)})
			}
			s.Regions = append(s.Regions, r)
		}
		return s
	}
	segs := []Segment{seg(EmbedSegment, -1, []string{RoleEmbedding}, []*tensor.Tensor{&w.Embedding})}
	for i := range w.Layers {
		segs = append(segs, seg(LayerSegment(i), i, c.LayerRoles(), w.Layers[i].TensorsOf(c)))
	}
	head := []*tensor.Tensor{&w.FinalNorm}
	if !c.TiedOutput {
		head = append(head, &w.Output)
	}
	segs = append(segs, seg(HeadSegment, -1, segmentRoles(HeadSegment, c), head))
	return computeIdentity(c, segs), nil
}
