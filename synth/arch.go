package synth

import (
	"fmt"
	"os"

	"github.com/seamlm/seam/gguf"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

// Archs are the --arch values of ArchConfig: Llama 3 and Qwen 2 / 3 shapes.
var Archs = []string{"llama3", "qwen2", "qwen3"}

// ArchConfig returns a small model of a real family's architecture and the
// GGUF general.architecture it is written under: width 256, 4 layers, 4 query
// heads sharing 2 key/value heads, feed-forward width 768 (a whole number of
// Q4_K blocks), context 1024, and the family's variants:
//   - llama3: "llama", head size 64, RoPE base 500000 with Llama 3.1's
//     scaling (a rope_freqs tensor), untied classifier;
//   - qwen2: "qwen2", Q/K/V biases, NeoX RoPE, base 1000000, tied classifier;
//   - qwen3: "qwen3", head size 128 (not 256/4), per-head Q/K norms, NeoX
//     RoPE, base 1000000, tied classifier.
func ArchConfig(arch string, vocabSize int) (model.Config, string, error) {
	c := model.Config{Dim: 256, HiddenDim: 768, NLayers: 4, NHeads: 4, NKVHeads: 2, VocabSize: vocabSize,
		SeqLen: 1024, RopeTheta: 1000000, RopeDim: 64, NormEps: 1e-6}
	switch arch {
	case "llama3":
		c.RopeTheta, c.NormEps, c.RopeFreqs = 500000, 1e-5, true
		return c, "llama", c.Validate()
	case "qwen2":
		c.QKVBias, c.RopeNeox, c.TiedOutput = true, true, true
		return c, "qwen2", c.Validate()
	case "qwen3":
		c.QKNorm, c.RopeNeox, c.TiedOutput, c.HeadSize, c.RopeDim = true, true, true, 128, 128
		return c, "qwen3", c.Validate()
	}
	return model.Config{}, "", fmt.Errorf("architecture %q: want one of %v", arch, Archs)
}

func archName(arch string) string {
	if arch == "" {
		return "llama"
	}
	return arch
}

// CheckArch refuses a config that the GGUF architecture arch cannot express
// the way llama.cpp (and so gguf.File.LlamaConfig) reads it.
func CheckArch(arch string, cfg *model.Config) error {
	arch = archName(arch)
	var bad []string
	switch arch {
	case "llama":
		if cfg.RopeNeox {
			bad = append(bad, "NeoX RoPE")
		}
		if cfg.QKNorm {
			bad = append(bad, "Q/K norms")
		}
	case "qwen2", "qwen3":
		if !cfg.RopeNeox {
			bad = append(bad, "adjacent-pair RoPE")
		}
		if cfg.RopeFreqs {
			bad = append(bad, "RoPE frequency factors")
		}
		if arch == "qwen2" && (!cfg.QKVBias || cfg.QKNorm) {
			bad = append(bad, "Q/K/V biases absent or Q/K norms present")
		}
		if arch == "qwen3" && !cfg.QKNorm {
			bad = append(bad, "no Q/K norms")
		}
	default:
		return fmt.Errorf("synthetic gguf: architecture %q: want llama, qwen2 or qwen3", arch)
	}
	if len(bad) > 0 {
		return fmt.Errorf("synthetic gguf: a %s file cannot hold a model with %v", arch, bad)
	}
	return nil
}

// addArchMetadata adds general.* and the arch.* keys gguf.File.LlamaConfig
// reads, with the types llama.cpp's converter writes (uint32 sizes, float32
// floats).
func addArchMetadata(gw *gguf.Writer, arch string, cfg *model.Config) error {
	p := arch + "."
	kvs := []keyValue{
		{gguf.KeyArchitecture, arch},
		{"general.name", "seam synthetic (random weights)"},
		{p + "context_length", uint32(cfg.SeqLen)},
		{p + "embedding_length", uint32(cfg.Dim)},
		{p + "block_count", uint32(cfg.NLayers)},
		{p + "feed_forward_length", uint32(cfg.HiddenDim)},
		{p + "attention.head_count", uint32(cfg.NHeads)},
		{p + "attention.head_count_kv", uint32(cfg.NKVHeads)},
		{p + "rope.dimension_count", uint32(cfg.RopeDim)},
		{p + "rope.freq_base", cfg.RopeTheta},
		{p + "attention.layer_norm_rms_epsilon", cfg.NormEps},
		{p + "vocab_size", uint32(cfg.VocabSize)},
	}
	if cfg.HeadSize != 0 {
		kvs = append(kvs, keyValue{p + "attention.key_length", uint32(cfg.HeadSize)},
			keyValue{p + "attention.value_length", uint32(cfg.HeadSize)})
	}
	if cfg.RopeLinear != 0 {
		kvs = append(kvs, keyValue{p + "rope.scaling.type", "linear"}, keyValue{p + "rope.scaling.factor", cfg.RopeLinear})
	}
	return addAll(gw, kvs)
}

// ArchFile describes a synthetic GGUF of a real family's architecture.
type ArchFile struct {
	Arch     string               // one of Archs
	Vocab    *tokenizer.GGUFVocab // nil: a synthetic 512-piece SentencePiece vocabulary
	DType    tensor.DType         // every matrix, the embedding and the classifier; default Q8_0
	Layers   int                  // 0: ArchConfig's 4
	Seed     uint64
	LogitStd float64 // see GGUFOptions.LogitStd
	Progress func(done, total int64)
}

// WriteArchFile writes the model a describes to path, through path.tmp
// renamed into place once complete and synced, and returns its config.
func WriteArchFile(path string, a ArchFile) (model.Config, error) {
	vocabSize := 512
	if a.Vocab != nil {
		vocabSize = len(a.Vocab.Tokens)
	}
	cfg, ggufArch, err := ArchConfig(a.Arch, vocabSize)
	if err != nil {
		return cfg, err
	}
	if a.Layers != 0 {
		cfg.NLayers = a.Layers
	}
	dt := a.DType
	if dt == tensor.Invalid {
		dt = tensor.Q8_0
	}
	opts := GGUFOptions{Arch: ggufArch, Vocab: a.Vocab, Matrices: dt, Embedding: dt, Seed: a.Seed, LogitStd: a.LogitStd, Progress: a.Progress}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return cfg, err
	}
	err = WriteGGUF(f, cfg, opts)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}
