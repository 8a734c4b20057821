// Package synth makes small deterministic models with random weights: the
// model `seam demo` runs without a download, and the fixtures tests and
// benchmarks use. Nothing it makes has learned anything; its text is noise.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

// DemoConfig is the shape of the demo model: small enough to start at once,
// with grouped-query attention and several layers to split.
func DemoConfig() model.Config {
	return model.Config{Dim: 128, HiddenDim: 344, NLayers: 6, NHeads: 8, NKVHeads: 4, VocabSize: 512,
		SeqLen: 256, RopeTheta: 10000, RopeDim: 16, NormEps: 1e-5, TiedOutput: false}
}

// WideConfig is a shallow, wide model (dim 1024) with a small vocabulary:
// compute is light but every activation crossing a stage boundary is 4 KiB
// in f32, so link benchmarks show what the wire encoding costs.
func WideConfig() model.Config {
	return model.Config{Dim: 1024, HiddenDim: 2816, NLayers: 4, NHeads: 16, NKVHeads: 16, VocabSize: 512,
		SeqLen: 512, RopeTheta: 10000, RopeDim: 64, NormEps: 1e-5, TiedOutput: false}
}

// Stories110MConfig has the shape of llama2.c's stories110M, for benchmarks.
func Stories110MConfig() model.Config {
	return model.Config{Dim: 768, HiddenDim: 2048, NLayers: 12, NHeads: 12, NKVHeads: 12, VocabSize: 32000,
		SeqLen: 1024, RopeTheta: 10000, RopeDim: 64, NormEps: 1e-5, TiedOutput: true}
}

// Weights returns f32 weights for cfg drawn from a generator seeded by seed.
// Matrices are scaled by 1/sqrt(fan-in) so activations stay in range.
func Weights(cfg model.Config, seed uint64) (*model.Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x73796e7468))
	w := &model.Weights{Config: cfg, First: 0, Last: cfg.NLayers, Layers: make([]model.Layer, cfg.NLayers)}
	w.Embedding = randomMatrix(rng, "token_embedding", cfg.VocabSize, cfg.Dim, 1)
	kv, q := cfg.KVDim(), cfg.QDim()
	var factors []float32
	if cfg.RopeFreqs {
		var err error
		if factors, err = model.Llama3RopeFactors(cfg.RopeTheta, cfg.RopeDim, Llama3Scaling); err != nil {
			return nil, err
		}
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		name := func(role string) string { return fmt.Sprintf("layer %d %s", i, role) }
		l.AttnNorm = ones(name("attn_norm"), cfg.Dim)
		l.Wq = randomMatrix(rng, name("wq"), q, cfg.Dim, 0)
		l.Wk = randomMatrix(rng, name("wk"), kv, cfg.Dim, 0)
		l.Wv = randomMatrix(rng, name("wv"), kv, cfg.Dim, 0)
		l.Wo = randomMatrix(rng, name("wo"), cfg.Dim, q, 0)
		l.FFNNorm = ones(name("ffn_norm"), cfg.Dim)
		l.W1 = randomMatrix(rng, name("w1"), cfg.HiddenDim, cfg.Dim, 0)
		l.W2 = randomMatrix(rng, name("w2"), cfg.Dim, cfg.HiddenDim, 0)
		l.W3 = randomMatrix(rng, name("w3"), cfg.HiddenDim, cfg.Dim, 0)
		if cfg.QKVBias {
			l.Bq = randomMatrix(rng, name("bq"), 1, q, biasStd)
			l.Bk = randomMatrix(rng, name("bk"), 1, kv, biasStd)
			l.Bv = randomMatrix(rng, name("bv"), 1, kv, biasStd)
		}
		if cfg.QKNorm {
			l.QNorm = nearOnes(rng, name("q_norm"), cfg.HeadDim())
			l.KNorm = nearOnes(rng, name("k_norm"), cfg.HeadDim())
		}
		if cfg.RopeFreqs {
			l.RopeFreqs = tensor.Tensor{Name: name("rope_freqs"), Type: tensor.F32, Rows: 1, Cols: len(factors), Data: tensor.BytesOfF32(factors)}
		}
	}
	w.FinalNorm = ones("final_norm", cfg.Dim)
	if cfg.TiedOutput {
		w.Output = w.Embedding
	} else {
		w.Output = randomMatrix(rng, "output", cfg.VocabSize, cfg.Dim, 0)
	}
	return w, w.Validate()
}

// randomMatrix draws normal values with standard deviation std, or
// 1/sqrt(cols) when std is 0.
func randomMatrix(rng *rand.Rand, name string, rows, cols int, std float64) tensor.Tensor {
	if std == 0 {
		std = 1 / math.Sqrt(float64(cols))
	}
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * std)
	}
	return tensor.Tensor{Name: name, Type: tensor.F32, Rows: rows, Cols: cols, Data: tensor.BytesOfF32(v)}
}

// Random biases and per-head norm weights: large enough that a forward pass
// that skipped them would differ visibly, small enough to keep activations
// in range.
const (
	biasStd     = 0.5
	headNormStd = 0.2
)

// Llama3Scaling is the RoPE scaling of Llama 3.1 (factor 8, low and high
// frequency factors 1 and 4, original context 8192): what synthetic models
// with Config.RopeFreqs carry as their rope_freqs.
var Llama3Scaling = model.Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}

// nearOnes draws n values around 1 (standard deviation headNormStd).
func nearOnes(rng *rand.Rand, name string, n int) tensor.Tensor {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(1 + rng.NormFloat64()*headNormStd)
	}
	return tensor.Tensor{Name: name, Type: tensor.F32, Rows: 1, Cols: n, Data: tensor.BytesOfF32(v)}
}

func ones(name string, n int) tensor.Tensor {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return tensor.Tensor{Name: name, Type: tensor.F32, Rows: 1, Cols: n, Data: tensor.BytesOfF32(v)}
}

// Tokenizer returns a vocabulary of vocabSize pieces (at least 259): the
// three specials, the 256 byte pieces, printable ASCII characters, then
// common English pairs, so that text encodes and decodes readably.
func Tokenizer(vocabSize int) (*tokenizer.SentencePiece, error) {
	if vocabSize < 3+256 {
		return nil, fmt.Errorf("synthetic vocabulary needs at least 259 pieces, asked for %d", vocabSize)
	}
	pieces := []string{"<unk>", "<s>", "</s>"}
	for b := 0; b < 256; b++ {
		pieces = append(pieces, fmt.Sprintf("<0x%02X>", b))
	}
	for c := byte(' '); c <= '~' && len(pieces) < vocabSize; c++ {
		pieces = append(pieces, string(c))
	}
	letters := " etaoinshrdlucmwfgypbvk"
	for _, a := range letters {
		for _, b := range letters {
			if len(pieces) < vocabSize {
				pieces = append(pieces, string(a)+string(b))
			}
		}
	}
	for len(pieces) < vocabSize {
		pieces = append(pieces, fmt.Sprintf("<unused%d>", len(pieces)))
	}
	scores := make([]float32, len(pieces))
	types := make([]int32, len(pieces))
	for i := range pieces {
		scores[i] = -float32(i)
		switch {
		case i < 3:
			types[i] = 3 // control
		case i < 3+256:
			types[i] = 6 // byte
		default:
			types[i] = 1
		}
	}
	types[0] = 2 // unknown
	return tokenizer.New(tokenizer.Vocab{Pieces: pieces, Scores: scores, Types: types, BOS: 1, EOS: 2})
}

// DemoWeights are Weights(DemoConfig(), seed) with the classifier biased
// towards printable pieces: the rows of the specials and the 256 byte pieces
// (ids below 259 in Tokenizer's vocabulary) are zeroed and the rest scaled
// by 3, so that sampled noise reads as characters rather than stray bytes.
func DemoWeights(seed uint64) (*model.Weights, error) {
	w, err := Weights(DemoConfig(), seed)
	if err != nil {
		return nil, err
	}
	out := tensor.AsF32(w.Output.Data)
	cols := w.Output.Cols
	for r := 0; r < w.Output.Rows; r++ {
		row := out[r*cols : (r+1)*cols]
		for i := range row {
			if r < 3+256 {
				row[i] = 0
			} else {
				row[i] *= 3
			}
		}
	}
	return w, nil
}
