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
	"github.com/seamlm/seam/tokenizer"
)

// GGUFOptions chooses what a synthetic GGUF file holds.
type GGUFOptions struct {
	// Arch is the file's general.architecture: "llama" (also for ""),
	// "qwen2" or "qwen3". The config must have that architecture's
	// variants (see CheckArch); ArchConfig gives ready-made shapes.
	Arch string
	// Vocab, when set, is written as the tokenizer.ggml.* metadata and must
	// have cfg.VocabSize tokens; otherwise a synthetic SentencePiece
	// vocabulary (see Tokenizer) is.
	Vocab *tokenizer.GGUFVocab
	// Matrices is the type of each layer's seven matrices: Q8_0, Q4_0,
	// Q4_K, Q6_K, F16 or F32. The zero value (tensor.Invalid) means Q8_0.
	Matrices tensor.DType
	// Embedding is the type of the token embedding and of the untied
	// classifier: F16, Q8_0, Q4_0, Q4_K, Q6_K or F32. The zero value means F16.
	Embedding tensor.DType
	// LogitStd, when positive, sets the final norm's weights (all equal) so
	// that the logits of a random hidden state have about this standard
	// deviation; 0 leaves them at 1. Random weights otherwise give nearly
	// flat next-token distributions over a large vocabulary (logit standard
	// deviation 1), which makes greedy decoding hinge on near-ties; a larger
	// spread makes the model "peaked".
	LogitStd float64
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
		if d != tensor.Q8_0 && d != tensor.Q4_0 && d != tensor.Q4_K && d != tensor.Q6_K && d != tensor.F16 && d != tensor.F32 {
			return 0, 0, fmt.Errorf("synthetic gguf: dtype %s is not one of q8_0, q4_0, q4_k, q6_k, f16, f32", d)
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

	vector bool     // stored as a 1-D tensor (norms, biases, RoPE factors)
	fill   fillKind // how its values are made
	std    float64  // standard deviation of random values (fillRandom, fillNearOnes)
	value  float32  // every value (fillConst)
	values []float32
}

// fillKind says how a synthetic tensor's values are made.
type fillKind int

const (
	fillRandom   fillKind = iota // zero-mean, standard deviation std
	fillConst                    // every value is value
	fillNearOnes                 // 1 plus zero-mean noise of standard deviation std
	fillValues                   // values, as given
)

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
	if err := CheckArch(opts.Arch, &cfg); err != nil {
		return nil, err
	}
	dim, kv, q, hidden := cfg.Dim, cfg.KVDim(), cfg.QDim(), cfg.HiddenDim
	var out []GGUFTensor
	var failed error
	add := func(t GGUFTensor) {
		if failed != nil {
			return
		}
		rowBytes, err := t.Type.RowBytes(t.Cols)
		if err == nil {
			rowBytes, err = tensor.MulSize(t.Rows, rowBytes)
		}
		if err != nil {
			failed = fmt.Errorf("synthetic gguf: tensor %s (%d x %d %s): %w", t.Name, t.Rows, t.Cols, t.Type, err)
			return
		}
		t.Bytes = int64(rowBytes)
		out = append(out, t)
	}
	matrix := func(name string, d tensor.DType, rows, cols int, std float64) {
		add(GGUFTensor{Name: name, Type: d, Rows: rows, Cols: cols, std: std})
	}
	vector := func(name string, n int, fill fillKind, std float64, value float32) {
		add(GGUFTensor{Name: name, Type: tensor.F32, Rows: 1, Cols: n, vector: true, fill: fill, std: std, value: value})
	}
	fanIn := func(cols int) float64 { return 1 / math.Sqrt(float64(cols)) }
	// An embedding tied to the classifier gets the classifier's scale,
	// 1/sqrt(dim): at 1 its rows would dominate the residual stream, and
	// a random model would predict the token it was just fed every time.
	embStd := 1.0
	if cfg.TiedOutput {
		embStd = fanIn(dim)
	}
	matrix("token_embd.weight", embedding, cfg.VocabSize, dim, embStd)
	if cfg.RopeFreqs {
		factors, err := model.Llama3RopeFactors(cfg.RopeTheta, cfg.RopeDim, Llama3Scaling)
		if err != nil {
			return nil, fmt.Errorf("synthetic gguf: %w", err)
		}
		add(GGUFTensor{Name: "rope_freqs.weight", Type: tensor.F32, Rows: 1, Cols: len(factors), vector: true, fill: fillValues, values: factors})
	}
	for i := 0; i < cfg.NLayers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		vector(p+"attn_norm.weight", dim, fillConst, 0, 1)
		matrix(p+"attn_q.weight", matrices, q, dim, fanIn(dim))
		matrix(p+"attn_k.weight", matrices, kv, dim, fanIn(dim))
		matrix(p+"attn_v.weight", matrices, kv, dim, fanIn(dim))
		if cfg.QKVBias {
			vector(p+"attn_q.bias", q, fillRandom, biasStd, 0)
			vector(p+"attn_k.bias", kv, fillRandom, biasStd, 0)
			vector(p+"attn_v.bias", kv, fillRandom, biasStd, 0)
		}
		if cfg.QKNorm {
			vector(p+"attn_q_norm.weight", cfg.HeadDim(), fillNearOnes, headNormStd, 0)
			vector(p+"attn_k_norm.weight", cfg.HeadDim(), fillNearOnes, headNormStd, 0)
		}
		matrix(p+"attn_output.weight", matrices, dim, q, fanIn(q))
		vector(p+"ffn_norm.weight", dim, fillConst, 0, 1)
		matrix(p+"ffn_gate.weight", matrices, hidden, dim, fanIn(dim))
		matrix(p+"ffn_down.weight", matrices, dim, hidden, fanIn(hidden))
		matrix(p+"ffn_up.weight", matrices, hidden, dim, fanIn(dim))
	}
	vector("output_norm.weight", dim, fillConst, 0, outputNorm(opts.LogitStd))
	if !cfg.TiedOutput {
		matrix("output.weight", embedding, cfg.VocabSize, dim, fanIn(dim))
	}
	return out, failed
}

// outputNorm is the final norm weight that gives logits of standard
// deviation logitStd (1 when logitStd is 0): a normalised hidden state has
// norm sqrt(dim), and classifier rows (tied or not) standard deviation
// 1/sqrt(dim).
func outputNorm(logitStd float64) float32 {
	if logitStd <= 0 {
		return 1
	}
	return float32(logitStd)
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

// WriteGGUF streams a GGUF (version 3) model of shape cfg with random
// weights to w: the architecture's metadata (opts.Arch), a vocabulary
// (opts.Vocab, or a synthetic one of cfg.VocabSize pieces, see Tokenizer) as
// tokenizer.ggml.* keys, and the tensors of GGUFLayout. Matrices have
// standard deviation 1/sqrt(fan-in), the embedding 1, biases 0.5; norms are
// ones (the final norm as opts.LogitStd sets it, Q/K norms near one); a
// tied embedding has standard deviation 1/sqrt(dim); Q8_0
// and Q4_K scales are finite f16. Memory use is one buffer of about 1 MiB
// plus the vocabulary, whatever the model's size.
func WriteGGUF(w io.Writer, cfg model.Config, opts GGUFOptions) error {
	layout, err := GGUFLayout(cfg, opts)
	if err != nil {
		return err
	}
	gw, err := gguf.NewWriter(w, 3)
	if err != nil {
		return err
	}
	if err := addArchMetadata(gw, archName(opts.Arch), &cfg); err != nil {
		return fmt.Errorf("synthetic gguf: %w", err)
	}
	if err := addVocab(gw, &cfg, opts.Vocab); err != nil {
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

// addVocab adds the tokenizer.ggml.* keys: v's, or for nil the synthetic
// SentencePiece vocabulary of cfg.VocabSize pieces.
func addVocab(gw *gguf.Writer, cfg *model.Config, v *tokenizer.GGUFVocab) error {
	if v != nil {
		if len(v.Tokens) != cfg.VocabSize {
			return fmt.Errorf("vocabulary has %d tokens, the model %d", len(v.Tokens), cfg.VocabSize)
		}
		return v.AddTo(gw)
	}
	tok, err := Tokenizer(cfg.VocabSize)
	if err != nil {
		return err
	}
	sp := tok.Vocab()
	// SentencePiece vocabularies, and so GGUF files, spell spaces as U+2581.
	pieces := make([]string, len(sp.Pieces))
	for i, p := range sp.Pieces {
		pieces[i] = strings.ReplaceAll(p, " ", "\u2581")
	}
	return addAll(gw, []keyValue{
		{gguf.KeyTokenizerModel, "llama"},
		{gguf.KeyTokens, pieces},
		{gguf.KeyScores, sp.Scores},
		{gguf.KeyTokenTypes, sp.Types},
		{gguf.KeyBOS, uint32(sp.BOS)},
		{gguf.KeyEOS, uint32(sp.EOS)},
	})
}

type keyValue struct {
	key string
	val any
}

func addAll(gw *gguf.Writer, kvs []keyValue) error {
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
	switch t.fill {
	case fillConst:
		return func(b []byte) { fillFloat(b, t.value) }, nil
	case fillValues:
		data := tensor.BytesOfF32(t.values)
		return func(b []byte) { copy(b, data) }, nil // vectors: one chunk
	case fillNearOnes:
		amp := float32(t.std * math.Sqrt(3))
		return func(b []byte) { g.fillUniform(b, 4, amp, 1) }, nil
	}
	// A uniform distribution on [-a, a] has standard deviation a/sqrt(3).
	amp := float32(t.std * math.Sqrt(3))
	switch t.Type {
	case tensor.F32:
		return func(b []byte) { g.fillUniform(b, 4, amp, 0) }, nil
	case tensor.F16:
		return func(b []byte) { g.fillUniform(b, 2, amp, 0) }, nil
	case tensor.Q8_0:
		d := half.FromF32(float32(t.std / q80ValueStd))
		if s := half.ToF32(d); s == 0 || math.IsInf(float64(s), 0) {
			return nil, fmt.Errorf("q8_0 scale %g for standard deviation %g is not a finite nonzero f16", t.std/q80ValueStd, t.std)
		}
		return func(b []byte) { g.fillQ80(b, d) }, nil
	case tensor.Q4_0:
		d := half.FromF32(float32(t.std / q40ValueStd))
		return func(b []byte) { g.fillQ40(b, d) }, nil
	case tensor.Q4_K:
		d := half.FromF32(float32(t.std / q4KValueStd))
		if s := half.ToF32(d); s == 0 || math.IsInf(float64(s), 0) {
			return nil, fmt.Errorf("q4_k scale %g for standard deviation %g is not a finite nonzero f16", t.std/q4KValueStd, t.std)
		}
		return func(b []byte) { g.fillQ4K(b, d) }, nil
	case tensor.Q6_K:
		d := half.FromF32(float32(t.std / q6KValueStd))
		if s := half.ToF32(d); s == 0 || math.IsInf(float64(s), 0) {
			return nil, fmt.Errorf("q6_k scale %g for standard deviation %g is not a finite nonzero f16", t.std/q6KValueStd, t.std)
		}
		return func(b []byte) { g.fillQ6K(b, d) }, nil
	}
	return nil, fmt.Errorf("no generator for dtype %s", t.Type)
}

func fillFloat(b []byte, v float32) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
}

// fillUniform writes values uniform on (center-amp, center+amp) as f32
// (size 4) or f16 (size 2), each from 16 random bits.
func (g *generator) fillUniform(b []byte, size int, amp, center float32) {
	var bits uint64
	for i, k := 0, 0; i+size <= len(b); i, k = i+size, k+1 {
		if k%4 == 0 {
			bits = g.rng.Uint64()
		}
		u := (float32(int16(bits)) + 0.5) / 32768 // in (-1, 1), symmetric
		bits >>= 16
		if size == 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(center+u*amp))
		} else {
			binary.LittleEndian.PutUint16(b[i:], half.FromF32(center+u*amp))
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

// Q4_K blocks are written with every sub-block scale 2 and min 15 and dmin
// equal to d, so a value is d*(2q - 15) for a uniform 4-bit q: the odd
// integers -15..15, mean 0, standard deviation 2*sqrt((16^2-1)/12) = 9.2195.
const q4KValueStd = 9.2195

// q4KScales12 packs scale 2 and min 15 for all eight sub-blocks in GGML's
// 12-byte layout: bytes 0-3 the scales of sub-blocks 0-3, 4-7 their mins,
// 8-11 low nibble the scale and high nibble the min of sub-blocks 4-7 (the
// top two bits, kept in bytes 0-7, are zero).
var q4KScales12 = [12]byte{2, 2, 2, 2, 15, 15, 15, 15, 0xF2, 0xF2, 0xF2, 0xF2}

// fillQ4K writes Q4_K super-blocks of 256 values: f16 d, f16 dmin (= d),
// the 12 scale bytes, then 128 bytes of random 4-bit quants.
func (g *generator) fillQ4K(b []byte, d uint16) {
	const block = 144
	for i := 0; i+block <= len(b); i += block {
		binary.LittleEndian.PutUint16(b[i:], d)
		binary.LittleEndian.PutUint16(b[i+2:], d)
		copy(b[i+4:i+16], q4KScales12[:])
		for j := i + 16; j < i+block; j += 8 {
			binary.LittleEndian.PutUint64(b[j:], g.rng.Uint64())
		}
	}
}

// Q6_K blocks are written with the sub-block scales alternating +1 and -1,
// so a value is +-d*(q - 32) for a uniform 6-bit q: the integers -32..31
// (or -31..32), mean 0 over a super-block, root mean square
// sqrt((64^2 - 1)/12 + 1/4) = 18.4797.
const q6KValueStd = 18.4797

// fillQ6K writes Q6_K super-blocks of 256 values: 128 bytes of low 4-bit
// quants and 64 of high 2-bit quants (random), the 16 int8 scales, f16 d.
func (g *generator) fillQ6K(b []byte, d uint16) {
	const block = 210
	for i := 0; i+block <= len(b); i += block {
		for j := i; j < i+192; j += 8 {
			binary.LittleEndian.PutUint64(b[j:], g.rng.Uint64())
		}
		for k := range 16 {
			b[i+192+k] = 1
			if k%2 == 1 {
				b[i+192+k] = 0xff // -1
			}
		}
		binary.LittleEndian.PutUint16(b[i+208:], d)
	}
}
