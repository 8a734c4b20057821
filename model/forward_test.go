package model_test

import (
	"math"
	"strings"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/llama2c"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
)

// reference is an independent, deliberately plain llama forward pass in
// float64 over f32 weights, written from the architecture's definition and
// sharing no code with package model (not even its kernels).
type reference struct {
	w       *model.Weights
	scaling model.Llama3Scaling // of the rope_freqs, when the config has them
	keys    [][][]float64       // layer, position, kv dim
	values  [][][]float64
}

func f64(t *tensor.Tensor) []float64 {
	f := tensor.AsF32(t.Data)
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out
}

func matvec(t *tensor.Tensor, x []float64) []float64 {
	w := f64(t)
	out := make([]float64, t.Rows)
	for r := range out {
		var s float64
		for c := 0; c < t.Cols; c++ {
			s += w[r*t.Cols+c] * x[c]
		}
		out[r] = s
	}
	return out
}

func rms(x []float64, t *tensor.Tensor, eps float64) []float64 {
	w := f64(t)
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i := range x {
		out[i] = w[i] * x[i] * inv
	}
	return out
}

// ropeFactor64 is Llama 3.1's divisor of frequency freq, from the published
// definition (Hugging Face's "llama3" rope_type), for the reference.
func ropeFactor64(freq float64, s model.Llama3Scaling) float64 {
	wavelen := 2 * math.Pi / freq
	if wavelen < s.OriginalContext/s.HighFreqFactor {
		return 1
	}
	if wavelen > s.OriginalContext/s.LowFreqFactor {
		return s.Factor
	}
	smooth := (s.OriginalContext/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
	return 1 / ((1-smooth)/s.Factor + smooth)
}

func (r *reference) step(token, pos int) []float64 {
	return matvec(&r.w.Output, r.hidden(token, pos))
}

// hidden runs the layers on token at pos and returns the final-normed
// hidden state, which the classifier rows multiply.
func (r *reference) hidden(token, pos int) []float64 {
	c := r.w.Config
	hd := c.Dim / c.NHeads
	if c.HeadSize != 0 {
		hd = c.HeadSize
	}
	emb := tensor.AsF32(r.w.Embedding.Data)[token*c.Dim : (token+1)*c.Dim]
	x := make([]float64, c.Dim)
	for i, v := range emb {
		x[i] = float64(v)
	}
	rot := func(v []float64) {
		half := c.RopeDim / 2
		for h := 0; h < len(v); h += hd {
			for i := 0; i < half; i++ {
				freq := math.Pow(float64(c.RopeTheta), -float64(2*i)/float64(c.RopeDim))
				if c.RopeFreqs {
					freq /= ropeFactor64(freq, r.scaling)
				}
				theta := float64(pos) * freq
				if c.RopeLinear != 0 {
					theta /= float64(c.RopeLinear)
				}
				// Pair (2i, 2i+1), or (i, i+half) in the NeoX layout.
				j, k := h+2*i, h+2*i+1
				if c.RopeNeox {
					j, k = h+i, h+i+half
				}
				a, b := v[j], v[k]
				v[j] = a*math.Cos(theta) - b*math.Sin(theta)
				v[k] = a*math.Sin(theta) + b*math.Cos(theta)
			}
		}
	}
	addTo := func(v []float64, t *tensor.Tensor) {
		for i, b := range f64(t) {
			v[i] += b
		}
	}
	normHeads := func(v []float64, t *tensor.Tensor) {
		for h := 0; h < len(v); h += hd {
			copy(v[h:h+hd], rms(v[h:h+hd], t, float64(c.NormEps)))
		}
	}
	for l := range c.NLayers {
		L := &r.w.Layers[l]
		xn := rms(x, &L.AttnNorm, float64(c.NormEps))
		q, k, v := matvec(&L.Wq, xn), matvec(&L.Wk, xn), matvec(&L.Wv, xn)
		if c.QKVBias {
			addTo(q, &L.Bq)
			addTo(k, &L.Bk)
			addTo(v, &L.Bv)
		}
		if c.QKNorm {
			normHeads(q, &L.QNorm)
			normHeads(k, &L.KNorm)
		}
		rot(q)
		rot(k)
		r.keys[l] = append(r.keys[l], k)
		r.values[l] = append(r.values[l], v)
		att := make([]float64, c.NHeads*hd)
		for h := 0; h < c.NHeads; h++ {
			kvh := h / (c.NHeads / c.NKVHeads)
			scores := make([]float64, pos+1)
			maxs := math.Inf(-1)
			for t := 0; t <= pos; t++ {
				var s float64
				for i := 0; i < hd; i++ {
					s += q[h*hd+i] * r.keys[l][t][kvh*hd+i]
				}
				scores[t] = s / math.Sqrt(float64(hd))
				maxs = math.Max(maxs, scores[t])
			}
			var sum float64
			for t := range scores {
				scores[t] = math.Exp(scores[t] - maxs)
				sum += scores[t]
			}
			for t := range scores {
				for i := 0; i < hd; i++ {
					att[h*hd+i] += scores[t] / sum * r.values[l][t][kvh*hd+i]
				}
			}
		}
		o := matvec(&L.Wo, att)
		for i := range x {
			x[i] += o[i]
		}
		xn = rms(x, &L.FFNNorm, float64(c.NormEps))
		g, u := matvec(&L.W1, xn), matvec(&L.W3, xn)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		d := matvec(&L.W2, g)
		for i := range x {
			x[i] += d[i]
		}
	}
	return rms(x, &r.w.FinalNorm, float64(c.NormEps))
}

func run(t *testing.T, m *model.Model, first, last int, tokens []int) [][]float32 {
	t.Helper()
	s, err := m.NewState(first, last)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	x := make([]float32, m.Config().Dim)
	for pos, tok := range tokens {
		if err := m.Embed(tok, x); err != nil {
			t.Fatal(err)
		}
		if err := m.Layers(s, x, pos); err != nil {
			t.Fatal(err)
		}
		logits := make([]float32, m.Config().VocabSize)
		if err := m.Head(x, logits); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
	}
	return out
}

// compare checks the model's float32 logits against the float64 reference.
// float32 accumulation over a few hundred terms per dot product, through a
// handful of layers, leaves errors of a few 1e-6 on logits of O(10): the
// largest measured was 7.8e-6 (stories260K; the synthetic variants 6.9e-6).
// 5e-5 keeps a few times that as headroom, yet is four orders of magnitude
// below what any wrong operation (a missing norm or bias, a wrong RoPE
// pairing or factor) produces (0.1 to 1, see TestVariantsChangeTheLogits).
func compare(t *testing.T, w *model.Weights, tokens []int) {
	t.Helper()
	compareScaled(t, w, tokens, model.Llama3Scaling{})
}

func compareScaled(t *testing.T, w *model.Weights, tokens []int, scaling model.Llama3Scaling) {
	t.Helper()
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, 0, w.Config.NLayers, tokens)
	ref := &reference{w: w, scaling: scaling, keys: make([][][]float64, w.Config.NLayers), values: make([][][]float64, w.Config.NLayers)}
	var worst float64
	for pos, tok := range tokens {
		want := ref.step(tok, pos)
		for i := range want {
			worst = math.Max(worst, math.Abs(float64(got[pos][i])-want[i]))
		}
	}
	t.Logf("largest |logit - reference| over %d positions: %.2g", len(tokens), worst)
	if worst > 5e-5 {
		t.Fatalf("logits differ from the float64 reference by %g", worst)
	}
}

func TestForwardMatchesReferenceOnStories260K(t *testing.T) {
	c, err := llama2c.Open(testmodels.Path(t, testmodels.Stories260K))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	compare(t, c.Weights, []int{1, 403, 407, 261, 378, 306, 269, 400, 412, 334, 267, 30, 320})
}

// A synthetic model exercises what stories260K does not: an untied
// classifier, partial RoPE (rope dim < head dim) and a non-default theta.
func TestForwardMatchesReferenceSynthetic(t *testing.T) {
	cfg := model.Config{Dim: 48, HiddenDim: 96, NLayers: 3, NHeads: 6, NKVHeads: 2, VocabSize: 300,
		SeqLen: 32, RopeTheta: 500000, RopeDim: 4, NormEps: 1e-6, TiedOutput: false}
	w, err := synth.Weights(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, w, []int{1, 5, 299, 17, 17, 42, 0, 256, 3, 9})
}

// Each variant of the family, alone and all together, against the float64
// reference: Qwen 2's Q/K/V biases, Qwen 3's per-head Q/K norms and head
// size (64 here, not dim/heads = 16), the NeoX RoPE pairing, Llama 3.1's
// RoPE frequency factors, linear RoPE scaling. The largest error measured
// was 4.8e-06 (logits O(10)); each variant's wrong omission moves logits by
// O(0.1..1), so the 2e-3 bound of compare separates them by orders of
// magnitude.
func TestForwardMatchesReferenceVariants(t *testing.T) {
	base := model.Config{Dim: 64, HiddenDim: 96, NLayers: 3, NHeads: 4, NKVHeads: 2, VocabSize: 300,
		SeqLen: 40, RopeTheta: 500000, RopeDim: 16, NormEps: 1e-6}
	variants := []struct {
		name string
		set  func(c *model.Config)
	}{
		{"qkv bias (qwen2)", func(c *model.Config) { c.QKVBias, c.RopeNeox = true, true }},
		{"q/k norm and head size (qwen3)", func(c *model.Config) {
			c.QKNorm, c.RopeNeox, c.HeadSize, c.RopeDim = true, true, 32, 32
		}},
		{"neox rope", func(c *model.Config) { c.RopeNeox = true }},
		{"partial neox rope", func(c *model.Config) { c.RopeNeox, c.RopeDim = true, 6 }},
		{"llama3 rope factors", func(c *model.Config) { c.RopeFreqs, c.TiedOutput = true, true }},
		{"linear rope scaling", func(c *model.Config) { c.RopeLinear = 4 }},
		{"everything", func(c *model.Config) {
			c.QKVBias, c.QKNorm, c.RopeNeox, c.RopeFreqs, c.RopeLinear, c.HeadSize, c.RopeDim = true, true, true, true, 2, 24, 20
		}},
	}
	// Positions past the shortest wavelength matter for the factors: with
	// theta 500000 and 16 rotated dims, wavelengths span 6 to 3.6e5.
	tokens := []int{1, 5, 299, 17, 17, 42, 0, 256, 3, 9, 100, 101, 102, 7, 7, 7, 250, 33, 1, 2}
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			cfg := base
			v.set(&cfg)
			w := variantWeights(t, cfg, uint64(20+i))
			compareScaled(t, w, tokens, shortScaling)
		})
	}
}

// shortScaling is Llama 3.1's RoPE scaling with its original context cut
// from 8192 to 64, so that within a few dozen positions most frequencies
// are divided (by 8) and one is blended: with Llama 3.1's own 8192 the
// factors would barely turn any pair before position 1000.
var shortScaling = model.Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}

// variantWeights are synth.Weights(cfg, seed) with rope_freqs (when the
// config has them) computed from shortScaling.
func variantWeights(t *testing.T, cfg model.Config, seed uint64) *model.Weights {
	t.Helper()
	w, err := synth.Weights(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RopeFreqs {
		f, err := model.Llama3RopeFactors(cfg.RopeTheta, cfg.RopeDim, shortScaling)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rope factors %v", f)
		for l := range w.Layers {
			w.Layers[l].RopeFreqs.Data = tensor.BytesOfF32(f)
		}
	}
	return w
}

// A variant's tensors must change the logits: a model that ignored them
// would otherwise pass the reference test whenever synth made them neutral.
func TestVariantsChangeTheLogits(t *testing.T) {
	cfg := model.Config{Dim: 64, HiddenDim: 96, NLayers: 2, NHeads: 4, NKVHeads: 2, VocabSize: 300,
		SeqLen: 16, RopeTheta: 500000, RopeDim: 16, NormEps: 1e-6, QKVBias: true, QKNorm: true, RopeFreqs: true}
	w := variantWeights(t, cfg, 5)
	tokens := []int{1, 5, 299, 17, 42, 0, 256, 3, 9, 100, 101, 102, 7}
	want := testmodels.Logits(t, w, tokens)
	neutral := func(tt *tensor.Tensor, v float32) {
		f := make([]float32, tt.Cols)
		for i := range f {
			f[i] = v
		}
		tt.Data = tensor.BytesOfF32(f)
	}
	for _, c := range []struct {
		role string
		v    float32
	}{{model.RoleBq, 0}, {model.RoleBk, 0}, {model.RoleBv, 0}, {model.RoleQNorm, 1}, {model.RoleKNorm, 1}, {model.RoleRopeFreqs, 1}} {
		w2 := *w
		w2.Layers = append([]model.Layer(nil), w.Layers...)
		for l := range w2.Layers {
			neutral(w2.Layers[l].Tensor(c.role), c.v)
		}
		got := testmodels.Logits(t, &w2, tokens)
		var diff float64
		for p := range got {
			for i := range got[p] {
				diff = math.Max(diff, math.Abs(float64(got[p][i]-want[p][i])))
			}
		}
		t.Logf("%s made neutral: logits move by up to %.3g", c.role, diff)
		if diff < 1e-2 {
			t.Errorf("%s made neutral moves logits by only %g", c.role, diff)
		}
	}
}

// Running the layers as two or three stages, each with its own state, must
// give bit-identical logits to running them in one: a stage runs the very
// same code on the very same numbers.
func TestSplitIsBitIdentical(t *testing.T) {
	qwen := synth.DemoConfig()
	qwen.QKVBias, qwen.QKNorm, qwen.RopeNeox, qwen.RopeFreqs, qwen.HeadSize = true, true, true, true, 32
	for _, cfg := range []model.Config{synth.DemoConfig(), qwen} {
		w, err := synth.Weights(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.New(w)
		if err != nil {
			t.Fatal(err)
		}
		tokens := []int{1, 70, 80, 90, 100, 300, 301, 7}
		whole := run(t, m, 0, cfg.NLayers, tokens)
		for _, cuts := range [][]int{{0, 2, 6}, {0, 1, 4, 6}, {0, 5, 6}} {
			states := make([]*model.State, len(cuts)-1)
			for i := range states {
				if states[i], err = m.NewState(cuts[i], cuts[i+1]); err != nil {
					t.Fatal(err)
				}
			}
			x := make([]float32, cfg.Dim)
			for pos, tok := range tokens {
				m.Embed(tok, x)
				for _, s := range states {
					if err := m.Layers(s, x, pos); err != nil {
						t.Fatal(err)
					}
				}
				logits := make([]float32, cfg.VocabSize)
				m.Head(x, logits)
				for i := range logits {
					if math.Float32bits(logits[i]) != math.Float32bits(whole[pos][i]) {
						t.Fatalf("%s, cuts %v: logit %d at position %d is %v, whole model %v", cfg.String(), cuts, i, pos, logits[i], whole[pos][i])
					}
				}
			}
		}
	}
}

func TestPositionChecks(t *testing.T) {
	w, _ := synth.Weights(synth.DemoConfig(), 1)
	m, _ := model.New(w)
	s, _ := m.NewState(0, 2)
	x := make([]float32, w.Config.Dim)
	if err := m.Layers(s, x, 1); err == nil {
		t.Error("position 1 accepted before position 0 was cached")
	}
	if err := m.Layers(s, x, w.Config.SeqLen); err == nil {
		t.Error("position beyond the context accepted")
	}
	if err := m.Embed(w.Config.VocabSize, x); err == nil {
		t.Error("token outside the vocabulary accepted")
	}
	if _, err := m.NewState(0, w.Config.NLayers+1); err == nil {
		t.Error("state beyond the model's layers accepted")
	}
}

// A batch of tokens through LayersBatch gives bit-identical hidden states
// (and so logits) to the same tokens one by one, also when the batch
// starts mid-sequence.
func TestBatchIsBitIdentical(t *testing.T) {
	qwen := synth.DemoConfig()
	qwen.QKVBias, qwen.QKNorm, qwen.RopeNeox, qwen.RopeFreqs, qwen.HeadSize = true, true, true, true, 24
	for _, cfg := range []model.Config{synth.DemoConfig(), qwen} {
		w, err := synth.Weights(cfg, 11)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := model.New(w)
		d := w.Config.Dim
		tokens := []int{1, 70, 80, 90, 100, 300, 301, 7, 8, 9, 10}
		one, _ := m.NewState(0, w.Config.NLayers)
		want := make([]float32, len(tokens)*d)
		for pos, tok := range tokens {
			x := want[pos*d : (pos+1)*d]
			m.Embed(tok, x)
			if err := m.Layers(one, x, pos); err != nil {
				t.Fatal(err)
			}
		}
		batch, _ := m.NewState(0, w.Config.NLayers)
		got := make([]float32, len(tokens)*d)
		for i, tok := range tokens {
			m.Embed(tok, got[i*d:(i+1)*d])
		}
		// Three batches: [0,4), [4,5), [5,11).
		for _, r := range [][2]int{{0, 4}, {4, 5}, {5, 11}} {
			if err := m.LayersBatch(batch, got[r[0]*d:r[1]*d], r[0], r[1]-r[0]); err != nil {
				t.Fatal(err)
			}
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: value %d (token %d): batch %v, one by one %v", cfg.String(), i, i/d, got[i], want[i])
			}
		}
	}
}

// Validate refuses a variant's tensor of the wrong shape or type, and RoPE
// factors that are not positive or differ between layers.
func TestValidateVariantTensors(t *testing.T) {
	cfg := model.Config{Dim: 64, HiddenDim: 96, NLayers: 2, NHeads: 4, NKVHeads: 2, VocabSize: 300,
		SeqLen: 16, RopeTheta: 500000, RopeDim: 16, NormEps: 1e-6, QKVBias: true, QKNorm: true, RopeFreqs: true, HeadSize: 32}
	cases := []struct {
		name   string
		modify func(w *model.Weights)
		want   string
	}{
		{"short bias", func(w *model.Weights) { w.Layers[1].Bk.Cols--; w.Layers[1].Bk.Data = w.Layers[1].Bk.Data[4:] }, "layer 1: bk"},
		{"q norm of width dim/heads", func(w *model.Weights) {
			w.Layers[0].QNorm = tensor.Tensor{Name: "qn", Type: tensor.F32, Rows: 1, Cols: 16, Data: make([]byte, 64)}
		}, "layer 0: q_norm: tensor qn is 1x16, want 1x32"},
		{"wq of width dim", func(w *model.Weights) {
			w.Layers[0].Wq = tensor.Tensor{Name: "wq", Type: tensor.F32, Rows: 64, Cols: 64, Data: make([]byte, 64*64*4)}
		}, "layer 0: wq: tensor wq is 64x64, want 128x64"},
		{"zero factor", func(w *model.Weights) {
			f := append([]float32(nil), tensor.AsF32(w.Layers[1].RopeFreqs.Data)...)
			f[3] = 0
			w.Layers[1].RopeFreqs.Data = tensor.BytesOfF32(f)
		}, "[3] is 0, want a positive finite divisor"},
		{"factors differ", func(w *model.Weights) {
			f := append([]float32(nil), tensor.AsF32(w.Layers[1].RopeFreqs.Data)...)
			f[3] = 2
			w.Layers[1].RopeFreqs.Data = tensor.BytesOfF32(f)
		}, "differs from the first held layer's"},
		{"f16 bias", func(w *model.Weights) { w.Layers[0].Bv.Type = tensor.F16 }, "layer 0: bv: tensor layer 0 bv is f16, want f32"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := synth.Weights(cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			c.modify(w)
			err = w.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}
