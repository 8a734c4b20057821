package synth

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/seamlm/seam/gguf"
	"github.com/seamlm/seam/internal/half"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// GGUFOptions chooses what a synthetic GGUF file holds.
type GGUFOptions struct {
	// Matrices is the type of each layer's seven matrices: Q8_0, Q4_0, F16
	// or F32.
	// The zero value (tensor.Invalid) means Q8_0.
	Matrices tensor.DType
	// Embedding is the type of the token embedding and of the untied
	// classifier: F16, Q8_0, Q4_0 or F32. The zero value means F16.
	Embedding tensor.DType
	// Seed selects the random weights; the same seed gives the same bytes.
	Seed uint64
	// Progress, if set, is called after each chunk of tensor data with the
	// tensor bytes written so far and the total (header and padding excluded).
	Progress func(done, total int64)
}

func (o GGUFOptions) types() (matrices, embedding tensor.DType, err error) {
	matrices, embedding = o.Matrices, o.Embedding
	if matrices == tensor.Invalid {
		matrices = tensor.Q8_0
	}
	if embedding == tensor.Invalid {
		embedding = tensor.F16
	}
	for _, d := range []tensor.DType{matrices, embedding} {
		if d != tensor.Q8_0 && d != tensor.Q4_0 && d != tensor.F16 && d != tensor.F32 {
			return 0, 0, fmt.Errorf("synthetic gguf: dtype %s is not one of q8_0, q4_0, f16, f32", d)
		}
	}
	return matrices, embedding, nil
}

// GGUFTensor is one tensor of a synthetic GGUF file, in file order.
type GGUFTensor struct {
	Name  string       // llama.cpp's name, e.g. "blk.0.attn_q.weight"
	Type  tensor.DType // element type
	Rows  int          // output dimension (1 for norm vectors)
	Cols  int          // input dimension: GGUF's first, fastest-varying dim
	Bytes int64        // exact size of its data

	vector bool    // stored as a 1-D tensor (norm weights)
	std    float64 // standard deviation of the random values; 0 means all ones
}

// Llama7BShape is the shape of LLaMA-7B (dim 4096, feed-forward 11008, 32
// heads without grouping, 32000 tokens, untied classifier) with n layers.
func Llama7BShape(n int) model.Config {
	return model.Config{Dim: 4096, HiddenDim: 11008, NLayers: n, NHeads: 32, NKVHeads: 32, VocabSize: 32000,
		SeqLen: 4096, RopeTheta: 10000, RopeDim: 128, NormEps: 1e-5, TiedOutput: false}
}

// GGUFLayout lists the tensors WriteGGUF writes for cfg, in file order: the
// token embedding, each layer's nine tensors, the final norm, then the
// classifier unless it is tied. It fails when a dimension is not a whole
// number of blocks of the chosen types.
func GGUFLayout(cfg model.Config, opts GGUFOptions) ([]GGUFTensor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("synthetic gguf: config: %w", err)
	}
	matrices, embedding, err := opts.types()
	if err != nil {
		return nil, err
	}
	dim, kv, hidden := cfg.Dim, cfg.KVDim(), cfg.HiddenDim
	var out []GGUFTensor
	var failed error
	add := func(name string, d tensor.DType, rows, cols int, vector bool, std float64) {
		if failed != nil {
			return
		}
		rowBytes, err := d.RowBytes(cols)
		if err == nil {
			rowBytes, err = tensor.MulSize(rows, rowBytes)
		}
		if err != nil {
			failed = fmt.Errorf("synthetic gguf: tensor %s (%d x %d %s): %w", name, rows, cols, d, err)
			return
		}
		out = append(out, GGUFTensor{Name: name, Type: d, Rows: rows, Cols: cols, Bytes: int64(rowBytes), vector: vector, std: std})
	}
	fanIn := func(cols int) float64 { return 1 / math.Sqrt(float64(cols)) }
	add("token_embd.weight", embedding, cfg.VocabSize, dim, false, 1)
	for i := 0; i < cfg.NLayers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		add(p+"attn_norm.weight", tensor.F32, 1, dim, true, 0)
		add(p+"attn_q.weight", matrices, dim, dim, false, fanIn(dim))
		add(p+"attn_k.weight", matrices, kv, dim, false, fanIn(dim))
		add(p+"attn_v.weight", matrices, kv, dim, false, fanIn(dim))
		add(p+"attn_output.weight", matrices, dim, dim, false, fanIn(dim))
		add(p+"ffn_norm.weight", tensor.F32, 1, dim, true, 0)
		add(p+"ffn_gate.weight", matrices, hidden, dim, false, fanIn(dim))
		add(p+"ffn_down.weight", matrices, dim, hidden, false, fanIn(hidden))
		add(p+"ffn_up.weight", matrices, hidden, dim, false, fanIn(dim))
	}
	add("output_norm.weight", tensor.F32, 1, dim, true, 0)
	if !cfg.TiedOutput {
		add("output.weight", embedding, cfg.VocabSize, dim, false, fanIn(dim))
	}
	return out, failed
}

// FitGGUFLayers returns base with NLayers chosen (at least 1) so that the
// tensor data of the file is as close to target bytes as possible.
func FitGGUFLayers(base model.Config, opts GGUFOptions, target int64) (model.Config, error) {
	sizeWith := func(n int) (int64, error) {
		c := base
		c.NLayers = n
		ts, err := GGUFLayout(c, opts)
		if err != nil {
			return 0, err
		}
		var total int64
		for _, t := range ts {
			total += t.Bytes
		}
		return total, nil
	}
	one, err := sizeWith(1)
	if err != nil {
		return model.Config{}, err
	}
	two, err := sizeWith(2)
	if err != nil {
		return model.Config{}, err
	}
	perLayer, fixed := two-one, 2*one-two
	n := int(math.Round(float64(target-fixed) / float64(perLayer)))
	if n < 1 || n > model.MaxLayers {
		return model.Config{}, fmt.Errorf("synthetic gguf: %d bytes needs %d layers of %d bytes over %d fixed bytes; want 1..%d layers",
			target, n, perLayer, fixed, model.MaxLayers)
	}
	base.NLayers = n
	return base, nil
}

// Q8_0 values are drawn uniformly from the 256 int8 values with -128 folded
// onto -127 (llama.cpp's quantizer never produces -128). Their standard
// deviation is sqrt(E[q^2] - E[q]^2) with E[q^2] = (sum_{k=-127}^{127} k^2 +
// 127^2)/256 = 5460.50 and E[q] = -127/256, which is 73.894.
const q80ValueStd = 73.894

// chunkBytes bounds the one buffer tensor data is generated into.
const chunkBytes = 1 << 20

// WriteGGUF streams a GGUF (version 3) llama model of shape cfg with random
// weights to w: the llama.* metadata, a vocabulary of cfg.VocabSize pieces
// (see Tokenizer) as tokenizer.ggml.* keys, and the tensors of GGUFLayout.
// Matrices have standard deviation 1/sqrt(fan-in), the embedding 1, norms are
// ones; Q8_0 scales are finite f16 and values lie in [-127, 127]. Memory use is
// one buffer of about 1 MiB plus the vocabulary, whatever the model's size.
func WriteGGUF(w io.Writer, cfg model.Config, opts GGUFOptions) error {
	layout, err := GGUFLayout(cfg, opts)
	if err != nil {
		return err
	}
	gw, err := gguf.NewWriter(w, 3)
	if err != nil {
		return err
	}
	if err := addLlamaMetadata(gw, cfg); err != nil {
		return fmt.Errorf("synthetic gguf: %w", err)
	}
	var total int64
	bufLen := 0
	for _, t := range layout {
		ggml, err := gguf.GGMLTypeOf(t.Type)
		if err != nil {
			return fmt.Errorf("synthetic gguf: tensor %s: %w", t.Name, err)
		}
		dims := []uint64{uint64(t.Cols), uint64(t.Rows)}
		if t.vector {
			dims = dims[:1]
		}
		if err := gw.AddTensor(t.Name, ggml, dims...); err != nil {
			return fmt.Errorf("synthetic gguf: %w", err)
		}
		total += t.Bytes
		bufLen = max(bufLen, chunkLen(t))
	}
	g := &generator{rng: rand.New(rand.NewPCG(opts.Seed, 0x67677566)), buf: make([]byte, bufLen), total: total, progress: opts.Progress}
	for _, t := range layout {
		if err := g.writeTensor(gw, t); err != nil {
			return fmt.Errorf("synthetic gguf: tensor %s: %w", t.Name, err)
		}
	}
	if err := gw.Finish(); err != nil {
		return fmt.Errorf("synthetic gguf: %w", err)
	}
	return nil
}

// addLlamaMetadata adds the keys gguf.File.LlamaConfig and Vocab read, with
// the types llama.cpp's converter writes (uint32 sizes, float32 floats).
func addLlamaMetadata(gw *gguf.Writer, cfg model.Config) error {
	tok, err := Tokenizer(cfg.VocabSize)
	if err != nil {
		return err
	}
	v := tok.Vocab()
	// SentencePiece vocabularies, and so GGUF files, spell spaces as U+2581.
	pieces := make([]string, len(v.Pieces))
	for i, p := range v.Pieces {
		pieces[i] = strings.ReplaceAll(p, " ", "\u2581")
	}
	kvs := []struct {
		key string
		val any
	}{
		{gguf.KeyArchitecture, "llama"},
		{"general.name", "seam synthetic (random weights)"},
		{"llama.context_length", uint32(cfg.SeqLen)},
		{"llama.embedding_length", uint32(cfg.Dim)},
		{"llama.block_count", uint32(cfg.NLayers)},
		{"llama.feed_forward_length", uint32(cfg.HiddenDim)},
		{"llama.attention.head_count", uint32(cfg.NHeads)},
		{"llama.attention.head_count_kv", uint32(cfg.NKVHeads)},
		{"llama.rope.dimension_count", uint32(cfg.RopeDim)},
		{"llama.rope.freq_base", cfg.RopeTheta},
		{"llama.attention.layer_norm_rms_epsilon", cfg.NormEps},
		{"llama.vocab_size", uint32(cfg.VocabSize)},
		{gguf.KeyTokenizerModel, "llama"},
		{gguf.KeyTokens, pieces},
		{gguf.KeyScores, v.Scores},
		{gguf.KeyTokenTypes, v.Types},
		{gguf.KeyBOS, uint32(v.BOS)},
		{gguf.KeyEOS, uint32(v.EOS)},
	}
	for _, kv := range kvs {
		if err := gw.Add(kv.key, kv.val); err != nil {
			return err
		}
	}
	return nil
}

// chunkLen is the size of the chunks t is generated in: whole rows, about
// chunkBytes (one row when a row is larger).
func chunkLen(t GGUFTensor) int {
	rowBytes := int(t.Bytes / int64(t.Rows))
	rows := min(t.Rows, max(1, chunkBytes/rowBytes))
	return rows * rowBytes
}

// generator fills one reused buffer with random tensor data.
type generator struct {
	rng      *rand.Rand
	buf      []byte
	done     int64
	total    int64
	progress func(done, total int64)
}

func (g *generator) writeTensor(w io.Writer, t GGUFTensor) error {
	fill, err := g.filler(t)
	if err != nil {
		return err
	}
	step := int64(chunkLen(t))
	for left := t.Bytes; left > 0; left -= step {
		chunk := g.buf[:min(step, left)]
		fill(chunk)
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		g.done += int64(len(chunk))
		if g.progress != nil {
			g.progress(g.done, g.total)
		}
	}
	return nil
}

// filler returns the function that fills a chunk of whole blocks of t.
func (g *generator) filler(t GGUFTensor) (func([]byte), error) {
	if t.std == 0 {
		return fillOnes, nil
	}
	// A uniform distribution on [-a, a] has standard deviation a/sqrt(3).
	amp := float32(t.std * math.Sqrt(3))
	switch t.Type {
	case tensor.F32:
		return func(b []byte) { g.fillUniform(b, 4, amp) }, nil
	case tensor.F16:
		return func(b []byte) { g.fillUniform(b, 2, amp) }, nil
	case tensor.Q8_0:
		d := half.FromF32(float32(t.std / q80ValueStd))
		if s := half.ToF32(d); s == 0 || math.IsInf(float64(s), 0) {
			return nil, fmt.Errorf("q8_0 scale %g for standard deviation %g is not a finite nonzero f16", t.std/q80ValueStd, t.std)
		}
		return func(b []byte) { g.fillQ80(b, d) }, nil
	case tensor.Q4_0:
		d := half.FromF32(float32(t.std / q40ValueStd))
		return func(b []byte) { g.fillQ40(b, d) }, nil
	}
	return nil, fmt.Errorf("no generator for dtype %s", t.Type)
}

func fillOnes(b []byte) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(1))
	}
}

// fillUniform writes values uniform on (-amp, amp) as f32 (size 4) or f16
// (size 2), each from 16 random bits.
func (g *generator) fillUniform(b []byte, size int, amp float32) {
	var bits uint64
	for i, k := 0, 0; i+size <= len(b); i, k = i+size, k+1 {
		if k%4 == 0 {
			bits = g.rng.Uint64()
		}
		u := (float32(int16(bits)) + 0.5) / 32768 // in (-1, 1), symmetric
		bits >>= 16
		if size == 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(u*amp))
		} else {
			binary.LittleEndian.PutUint16(b[i:], half.FromF32(u*amp))
		}
	}
}

// fillQ80 writes Q8_0 blocks: the f16 scale d, then 32 random int8 values.
func (g *generator) fillQ80(b []byte, d uint16) {
	const block = 34
	for i := 0; i+block <= len(b); i += block {
		binary.LittleEndian.PutUint16(b[i:], d)
		q := b[i+2 : i+block]
		for j := 0; j < 32; j += 8 {
			binary.LittleEndian.PutUint64(q[j:], g.rng.Uint64())
		}
		for j, v := range q {
			if v == 0x80 { // -128 -> -127
				q[j] = 0x81
			}
		}
	}
}
