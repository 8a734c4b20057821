package synth

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/seamlm/seam/gguf"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

// tinyShape has grouped-query attention, a feed-forward width that is three
// Q8_0 blocks, and the smallest vocabulary the synthetic tokenizer allows.
func tinyShape() model.Config {
	return model.Config{Dim: 64, HiddenDim: 96, NLayers: 2, NHeads: 4, NKVHeads: 2, VocabSize: 300,
		SeqLen: 16, RopeTheta: 10000, RopeDim: 16, NormEps: 1e-5}
}

func writeTiny(t *testing.T, cfg model.Config, opts GGUFOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteGGUF(f, cfg, opts); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// The tensor bytes of the tiny shape, by hand: Q8_0 is 34 bytes per 32
// values, f16 2 bytes per value, norms 64 f32.
func TestLayoutSizes(t *testing.T) {
	ts, err := GGUFLayout(tinyShape(), GGUFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const (
		embed = 300 * 64 * 2 // 38400, f16
		norm  = 64 * 4       // 256
		wq    = 64 * 64 / 32 * 34
		wk    = 32 * 64 / 32 * 34 // kv dim = 64/4*2 = 32
		w1    = 96 * 64 / 32 * 34
		layer = 2*norm + 2*wq + 2*wk + 3*w1 // 33152
	)
	want := int64(embed + 2*layer + norm + embed)
	var got int64
	for _, x := range ts {
		got += x.Bytes
	}
	if len(ts) != 1+2*9+2 || got != want {
		t.Fatalf("layout: %d tensors, %d bytes; want 21 tensors, %d bytes", len(ts), got, want)
	}
	if ts[2].Name != "blk.0.attn_q.weight" || ts[2].Type != tensor.Q8_0 || ts[2].Bytes != wq {
		t.Errorf("tensor 2 is %+v, want blk.0.attn_q.weight q8_0 of %d bytes", ts[2], wq)
	}
}

func TestFitLayers(t *testing.T) {
	// LLaMA-7B shapes: a layer is 4*4096^2 + 3*4096*11008 values of Q8_0
	// (1.0625 bytes each) = 215,023,616 bytes plus two 16 KiB norms; the
	// f16 embedding and classifier are 2*32000*4096*2 = 524,288,000 bytes.
	const perLayer = 215023616 + 2*16384
	const fixed = 524288000 + 16384
	for _, c := range []struct {
		target int64
		want   int
	}{
		{fixed + 8*perLayer, 8},
		{fixed + 8*perLayer + perLayer/2 - 1, 8},
		{fixed + 8*perLayer + perLayer/2 + 1, 9},
		{2 << 30, 8}, // (2147483648 - 524304384) / 215056384 = 7.55
	} {
		cfg, err := FitGGUFLayers(Llama7BShape(1), GGUFOptions{}, c.target)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.NLayers != c.want {
			t.Errorf("target %d: %d layers, want %d", c.target, cfg.NLayers, c.want)
		}
	}
	// Less than the embedding and classifier alone cannot be met.
	if cfg, err := FitGGUFLayers(Llama7BShape(1), GGUFOptions{}, fixed); err == nil {
		t.Errorf("target %d: %d layers, want an error", int64(fixed), cfg.NLayers)
	}
}

// A tiny synthetic GGUF opens through the gguf reader with the config it
// was written for, loads its own tokenizer, and runs a forward step with
// finite logits.
func TestTinyGGUFOpensAndRuns(t *testing.T) {
	cfg := tinyShape()
	path := writeTiny(t, cfg, GGUFOptions{Seed: 7})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version() != 3 {
		t.Errorf("version %d, want 3", f.Version())
	}
	got, err := f.LlamaConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got != cfg {
		t.Fatalf("config read back:\n %+v\nwant\n %+v", got, cfg)
	}
	w, err := f.LlamaWeights()
	if err != nil {
		t.Fatal(err)
	}
	if w.Embedding.Type != tensor.F16 || w.Output.Type != tensor.F16 || w.Layers[1].W2.Type != tensor.Q8_0 || w.FinalNorm.Type != tensor.F32 {
		t.Errorf("types: embedding %s, output %s, w2 %s, final norm %s; want f16, f16, q8_0, f32",
			w.Embedding.Type, w.Output.Type, w.Layers[1].W2.Type, w.FinalNorm.Type)
	}
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewState(0, cfg.NLayers)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, cfg.Dim)
	logits := make([]float32, cfg.VocabSize)
	if err := m.Embed(1, x); err != nil {
		t.Fatal(err)
	}
	if err := m.Layers(s, x, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Head(x, logits); err != nil {
		t.Fatal(err)
	}
	lo, hi := logits[0], logits[0]
	for i, l := range logits {
		if math.IsNaN(float64(l)) || math.IsInf(float64(l), 0) {
			t.Fatalf("logit %d is %v", i, l)
		}
		lo, hi = min(lo, l), max(hi, l)
	}
	if !(hi > lo) {
		t.Fatalf("all logits equal %v", lo)
	}

	// The loader takes the file without a tokenizer path, as `seam import` does.
	lm, err := loader.Open(path, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	v := lm.Tokenizer.(*tokenizer.SentencePiece).Vocab()
	if len(v.Pieces) != cfg.VocabSize || v.BOS != 1 || v.EOS != 2 || v.Pieces[259] != " " {
		t.Errorf("vocabulary: %d pieces, bos %d, eos %d, piece 259 %q; want %d, 1, 2, \" \"",
			len(v.Pieces), v.BOS, v.EOS, v.Pieces[259], cfg.VocabSize)
	}
	if text := "hello, world"; lm.Tokenizer.DecodeAll(lm.Tokenizer.Encode(text, false, false)) != text {
		t.Errorf("vocabulary does not round-trip %q", text)
	}
}

// f16ToF64 decodes IEEE binary16, written here independently of internal/half.
func f16ToF64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, frac := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * frac * math.Pow(2, -24)
	case 31:
		if frac == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * (1 + frac/1024) * math.Pow(2, float64(exp-15))
}

// Every Q8_0 block has a finite positive scale and values in [-127, 127],
// every f16 value is finite, and each matrix's values have the standard
// deviation 1/sqrt(fan-in) (the embedding 1, norms exactly 1).
func TestValuesAreValidAndScaled(t *testing.T) {
	cfg := tinyShape()
	path := writeTiny(t, cfg, GGUFOptions{Seed: 3})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, info := range f.Tensors() {
		tt, err := f.Tensor(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		vals := decode(t, &tt)
		var sum, sq float64
		for _, v := range vals {
			sum += v
			sq += v * v
		}
		n := float64(len(vals))
		std := math.Sqrt(sq/n - (sum/n)*(sum/n))
		want := 1 / math.Sqrt(float64(tt.Cols))
		switch {
		case info.Name == "token_embd.weight":
			want = 1
		case len(info.Dims) == 1: // norms: all ones
			if sum != n || sq != n {
				t.Errorf("%s: values are not all 1 (sum %v, sum of squares %v, n %v)", info.Name, sum, sq, n)
			}
			continue
		}
		// The smallest tensor has 2048 values; the sample standard deviation
		// of n uniform values has relative standard error sqrt((kurtosis-1)/n)/2
		// = sqrt(0.8/2048)/2 = 1%; 6% is six standard errors. The f16
		// rounding of scales and values (2^-11 relative) is negligible.
		if math.Abs(std/want-1) > 0.06 {
			t.Errorf("%s: standard deviation %.5f, want %.5f", info.Name, std, want)
		}
	}
}

// decode dequantizes a tensor with a reference decoder, failing the test on
// an invalid value.
func decode(t *testing.T, tt *tensor.Tensor) []float64 {
	t.Helper()
	var out []float64
	le := binary.LittleEndian
	switch tt.Type {
	case tensor.F32:
		for i := 0; i < len(tt.Data); i += 4 {
			out = append(out, float64(math.Float32frombits(le.Uint32(tt.Data[i:]))))
		}
	case tensor.F16:
		for i := 0; i < len(tt.Data); i += 2 {
			v := f16ToF64(le.Uint16(tt.Data[i:]))
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s: f16 value %d is %v", tt.Name, i/2, v)
			}
			out = append(out, v)
		}
	case tensor.Q8_0:
		for i := 0; i < len(tt.Data); i += 34 {
			d := f16ToF64(le.Uint16(tt.Data[i:]))
			if !(d > 0) || math.IsInf(d, 0) {
				t.Fatalf("%s: block %d has scale %v", tt.Name, i/34, d)
			}
			for _, b := range tt.Data[i+2 : i+34] {
				if int8(b) == -128 {
					t.Fatalf("%s: block %d holds -128", tt.Name, i/34)
				}
				out = append(out, d*float64(int8(b)))
			}
		}
	default:
		t.Fatalf("%s: unexpected dtype %s", tt.Name, tt.Type)
	}
	return out
}

func TestSameSeedSameBytes(t *testing.T) {
	cfg := tinyShape()
	var a, b, c bytes.Buffer
	for _, x := range []struct {
		buf  *bytes.Buffer
		seed uint64
	}{{&a, 1}, {&b, 1}, {&c, 2}} {
		if err := WriteGGUF(x.buf, cfg, GGUFOptions{Seed: x.seed}); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two files with seed 1 differ")
	}
	if bytes.Equal(a.Bytes(), c.Bytes()) {
		t.Error("seeds 1 and 2 give the same file")
	}
}

func TestOtherTypesAndTiedOutput(t *testing.T) {
	cfg := tinyShape()
	cfg.TiedOutput = true
	path := writeTiny(t, cfg, GGUFOptions{Matrices: tensor.F16, Embedding: tensor.Q8_0})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := f.LlamaWeights()
	if err != nil {
		t.Fatal(err)
	}
	if !w.Config.TiedOutput || f.HasTensor("output.weight") || w.Embedding.Type != tensor.Q8_0 || w.Layers[0].Wq.Type != tensor.F16 {
		t.Errorf("tied %v, output present %v, embedding %s, wq %s; want true, false, q8_0, f16",
			w.Config.TiedOutput, f.HasTensor("output.weight"), w.Embedding.Type, w.Layers[0].Wq.Type)
	}
}

func TestRefusals(t *testing.T) {
	notBlocks := tinyShape()
	notBlocks.HiddenDim = 100 // not a multiple of 32
	smallVocab := tinyShape()
	smallVocab.VocabSize = 100
	for name, c := range map[string]struct {
		cfg  model.Config
		opts GGUFOptions
	}{
		"hidden not whole q8_0 blocks": {notBlocks, GGUFOptions{}},
		"bf16 matrices":                {tinyShape(), GGUFOptions{Matrices: tensor.BF16}},
		"q8g embedding":                {tinyShape(), GGUFOptions{Embedding: tensor.Q8G}},
		"vocabulary too small":         {smallVocab, GGUFOptions{}},
		"invalid config":               {model.Config{}, GGUFOptions{}},
	} {
		var buf bytes.Buffer
		if err := WriteGGUF(&buf, c.cfg, c.opts); err == nil {
			t.Errorf("%s: WriteGGUF succeeded", name)
		}
	}
}

// The writer streams: generating a 23 MB file (8 MiB of f16 embedding and
// classifier, 4 layers of 3.6 MB) allocates far less than the file.
func TestWriteGGUFStreams(t *testing.T) {
	cfg := model.Config{Dim: 512, HiddenDim: 1536, NLayers: 4, NHeads: 8, NKVHeads: 8, VocabSize: 4096,
		SeqLen: 64, RopeTheta: 10000, RopeDim: 64, NormEps: 1e-5}
	var written int64
	counter := writerFunc(func(p []byte) (int, error) { written += int64(len(p)); return len(p), nil })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := WriteGGUF(counter, cfg, GGUFOptions{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	// Expected: the 1 MiB chunk, the gguf writer's 64 KiB buffer, and the
	// 4096-piece vocabulary with its tokenizer; 4 MiB leaves room for those
	// and is a fifth of the file.
	if written < 20<<20 || alloc > 4<<20 {
		t.Fatalf("wrote %d bytes, allocated %d; want >= 20 MiB written with <= 4 MiB allocated", written, alloc)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

var _ io.Writer = writerFunc(nil)

func TestProgressReachesTotal(t *testing.T) {
	ts, _ := GGUFLayout(tinyShape(), GGUFOptions{})
	var total int64
	for _, x := range ts {
		total += x.Bytes
	}
	var last, lastTotal int64
	calls := 0
	opts := GGUFOptions{Progress: func(done, tot int64) {
		if done <= last {
			t.Fatalf("progress went from %d to %d", last, done)
		}
		last, lastTotal = done, tot
		calls++
	}}
	if err := WriteGGUF(io.Discard, tinyShape(), opts); err != nil {
		t.Fatal(err)
	}
	if last != total || lastTotal != total || calls < len(ts) {
		t.Fatalf("progress ended at %d of %d after %d calls; want %d of %d, at least one call per tensor", last, lastTotal, calls, total, total)
	}
}
