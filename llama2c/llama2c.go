// Package llama2c reads model checkpoints written by llama2.c's export script:
// the legacy version 0 (a 7 x int32 header, then f32 weights), version 1 (the
// 256-byte "ak42" header, f32 weights) and version 2 (the "ak42" header with
// Q8 group-quantized weights and f32 norms).
//
// Tensors are views into the memory-mapped file; nothing is copied. llama2.c's
// query and key weights rotate adjacent pairs under RoPE, as GGUF's do.
package llama2c

import (
	"encoding/binary"
	"fmt"

	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// Magic opens version 1 and 2 files ("ak42" as a little-endian uint32).
const Magic = 0x616b3432

const (
	legacyHeaderBytes = 7 * 4
	headerBytes       = 256 // versions 1 and 2 pad their header to this size
	maxGroupSize      = 1 << 16
)

// Checkpoint is an open llama2.c model file.
type Checkpoint struct {
	Version   int
	GroupSize int // version 2 only
	Weights   *model.Weights
	file      *mapped.File
}

// Close unmaps the file; the weights must not be used afterwards.
func (c *Checkpoint) Close() error { return c.file.Close() }

// Open maps and parses a checkpoint.
func Open(path string) (*Checkpoint, error) {
	f, err := mapped.Open(path)
	if err != nil {
		return nil, fmt.Errorf("llama2.c checkpoint: %w", err)
	}
	c, err := Parse(f.Bytes(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	c.file = f
	return c, nil
}

// Parse reads a checkpoint from its bytes; name is used in errors. The
// returned tensors alias data.
func Parse(data []byte, name string) (*Checkpoint, error) {
	if len(data) < legacyHeaderBytes {
		return nil, fmt.Errorf("%s: %d bytes is too short for a llama2.c checkpoint header", name, len(data))
	}
	var (
		c   *Checkpoint
		err error
	)
	if binary.LittleEndian.Uint32(data) == Magic {
		c, err = parseVersioned(data, name)
	} else {
		c, err = parseLegacy(data, name)
	}
	if err != nil {
		return nil, err
	}
	if err := c.Weights.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

func readConfig(h []byte) (model.Config, error) {
	var v [7]int32
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(h[4*i:]))
	}
	cfg := model.Config{
		Dim: int(v[0]), HiddenDim: int(v[1]), NLayers: int(v[2]), NHeads: int(v[3]),
		NKVHeads: int(v[4]), VocabSize: int(v[5]), SeqLen: int(v[6]),
		RopeTheta: 10000, NormEps: 1e-5,
	}
	if cfg.NHeads > 0 && cfg.Dim%cfg.NHeads == 0 {
		cfg.RopeDim = cfg.Dim / cfg.NHeads
	}
	return cfg, nil
}

func parseLegacy(data []byte, name string) (*Checkpoint, error) {
	cfg, _ := readConfig(data)
	// A negative vocabulary size marks an untied classifier stored at the end.
	cfg.TiedOutput = cfg.VocabSize > 0
	if cfg.VocabSize < 0 {
		cfg.VocabSize = -cfg.VocabSize
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: not a usable llama2.c checkpoint (legacy header): %w", name, err)
	}
	r := &reader{data: data, off: legacyHeaderBytes, name: name}
	w := newWeights(cfg)
	w.Embedding = r.matrix("token_embedding", cfg.VocabSize, cfg.Dim)
	r.layered(w, func(l *model.Layer) *tensor.Tensor { return &l.AttnNorm }, "attn_norm", 1, cfg.Dim)
	r.layeredMatrices(w, cfg)
	r.layered(w, func(l *model.Layer) *tensor.Tensor { return &l.FFNNorm }, "ffn_norm", 1, cfg.Dim)
	r.layeredFFN(w, cfg)
	w.FinalNorm = r.f32("final_norm", 1, cfg.Dim)
	// Precomputed RoPE tables (real and imaginary), which Seam recomputes.
	r.skip("freq_cis", 2*cfg.SeqLen*(cfg.HeadDim()/2)*4)
	r.output(w)
	return r.finish(&Checkpoint{Version: 0, Weights: w})
}

func parseVersioned(data []byte, name string) (*Checkpoint, error) {
	if len(data) < headerBytes {
		return nil, fmt.Errorf("%s: %d bytes is too short for a llama2.c version 1/2 header of %d", name, len(data), headerBytes)
	}
	version := int32(binary.LittleEndian.Uint32(data[4:]))
	cfg, _ := readConfig(data[8:])
	cfg.TiedOutput = data[36] != 0
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: not a usable llama2.c checkpoint (version %d header): %w", name, version, err)
	}
	r := &reader{data: data, off: headerBytes, name: name}
	w := newWeights(cfg)
	c := &Checkpoint{Version: int(version), Weights: w}
	switch version {
	case 1:
		r.norms(w, cfg)
		w.Embedding = r.matrix("token_embedding", cfg.VocabSize, cfg.Dim)
		r.layeredMatrices(w, cfg)
		r.layeredFFN(w, cfg)
		r.output(w)
	case 2:
		gs := int(int32(binary.LittleEndian.Uint32(data[37:])))
		if gs <= 0 || gs > maxGroupSize {
			return nil, fmt.Errorf("%s: version 2 group size %d, want 1..%d", name, gs, maxGroupSize)
		}
		c.GroupSize = gs
		r.groupSize = gs
		r.norms(w, cfg)
		r.quantized = true
		w.Embedding = r.matrix("token_embedding", cfg.VocabSize, cfg.Dim)
		r.layeredMatrices(w, cfg)
		r.layeredFFN(w, cfg)
		r.output(w)
	default:
		return nil, fmt.Errorf("%s: llama2.c checkpoint version %d is not supported (supported: 0, 1, 2)", name, version)
	}
	return r.finish(c)
}

func newWeights(cfg model.Config) *model.Weights {
	return &model.Weights{Config: cfg, First: 0, Last: cfg.NLayers, Layers: make([]model.Layer, cfg.NLayers)}
}
