package model_test

import (
	"math"
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
	w      *model.Weights
	keys   [][][]float64 // layer, position, kv dim
	values [][][]float64
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

func (r *reference) step(token, pos int) []float64 {
	c := r.w.Config
	hd := c.HeadDim()
	emb := f64(&r.w.Embedding)
	x := append([]float64(nil), emb[token*c.Dim:(token+1)*c.Dim]...)
	rot := func(v []float64) {
		for h := 0; h < len(v); h += hd {
			for i := 0; i < c.RopeDim/2; i++ {
				theta := float64(pos) * math.Pow(float64(c.RopeTheta), -float64(2*i)/float64(c.RopeDim))
				a, b := v[h+2*i], v[h+2*i+1]
				v[h+2*i] = a*math.Cos(theta) - b*math.Sin(theta)
				v[h+2*i+1] = a*math.Sin(theta) + b*math.Cos(theta)
			}
		}
	}
	for l := range c.NLayers {
		L := &r.w.Layers[l]
		xn := rms(x, &L.AttnNorm, float64(c.NormEps))
		q, k, v := matvec(&L.Wq, xn), matvec(&L.Wk, xn), matvec(&L.Wv, xn)
		rot(q)
		rot(k)
		r.keys[l] = append(r.keys[l], k)
		r.values[l] = append(r.values[l], v)
		att := make([]float64, c.Dim)
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
	return matvec(&r.w.Output, rms(x, &r.w.FinalNorm, float64(c.NormEps)))
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
// handful of layers, leaves relative errors near 1e-5; logits here are O(10),
// so 2e-3 absolute is a bound with headroom, yet far below the gap that any
// wrong operation (a missing norm, a wrong RoPE pairing) produces (O(1)).
func compare(t *testing.T, w *model.Weights, tokens []int) {
	t.Helper()
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, 0, w.Config.NLayers, tokens)
	ref := &reference{w: w, keys: make([][][]float64, w.Config.NLayers), values: make([][][]float64, w.Config.NLayers)}
	var worst float64
	for pos, tok := range tokens {
		want := ref.step(tok, pos)
		for i := range want {
			worst = math.Max(worst, math.Abs(float64(got[pos][i])-want[i]))
		}
	}
	t.Logf("largest |logit - reference| over %d positions: %.2g", len(tokens), worst)
	if worst > 2e-3 {
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

// Running the layers as two or three stages, each with its own state, must
// give bit-identical logits to running them in one: a stage runs the very
// same code on the very same numbers.
func TestSplitIsBitIdentical(t *testing.T) {
	cfg := synth.DemoConfig()
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
					t.Fatalf("cuts %v: logit %d at position %d is %v, whole model %v", cuts, i, pos, logits[i], whole[pos][i])
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
	w, err := synth.Weights(synth.DemoConfig(), 11)
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
			t.Fatalf("value %d (token %d): batch %v, one by one %v", i, i/d, got[i], want[i])
		}
	}
}
