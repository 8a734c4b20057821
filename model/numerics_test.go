package model_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
)

// Per-operation checks of the forward pass, each against a few lines of
// float64 written from the definition, with bounds set a few times above
// what was measured. They use inputs on which a wrong detail shows: hidden
// states as small as the RMSNorm epsilon (so that dropping or changing the
// epsilon changes the normalized values by tens of percent, which the
// greedy texts and the whole-model comparison can miss), and position 0,
// where attention over the single cached position returns its value vector
// exactly, so the layer's arithmetic is checked without RoPE or softmax.

// norm64 is RMSNorm in float64: w_i * x_i / sqrt(mean(x^2) + eps).
func norm64(x []float64, w []float32, eps float32) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(w[i]) * v * inv
	}
	return out
}

func matvec64(t *tensor.Tensor, x []float64) []float64 {
	w := tensor.AsF32(t.Data)
	out := make([]float64, t.Rows)
	for r := range out {
		for c, v := range x {
			out[r] += float64(w[r*t.Cols+c]) * v
		}
	}
	return out
}

// layerAtZero64 is one llama layer for a token at position 0: attention
// over one position gives each query head its key/value head's value
// vector, so the block is x + Wo (Wv n(x)) followed by the SwiGLU FFN.
func layerAtZero64(w *model.Weights, l int, x []float64) []float64 {
	c := &w.Config
	L := &w.Layers[l]
	v := matvec64(&L.Wv, norm64(x, tensor.AsF32(L.AttnNorm.Data), c.NormEps))
	hd, group := c.HeadDim(), c.NHeads/c.NKVHeads
	att := make([]float64, c.NHeads*hd)
	for h := range c.NHeads {
		copy(att[h*hd:(h+1)*hd], v[(h/group)*hd:(h/group+1)*hd])
	}
	o := matvec64(&L.Wo, att)
	hdn := make([]float64, len(x))
	for i := range x {
		hdn[i] = x[i] + o[i]
	}
	n := norm64(hdn, tensor.AsF32(L.FFNNorm.Data), c.NormEps)
	g, u := matvec64(&L.W1, n), matvec64(&L.W3, n)
	for i := range g {
		g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
	}
	d := matvec64(&L.W2, g)
	for i := range hdn {
		hdn[i] += d[i]
	}
	return hdn
}

// scaleTensor multiplies every f32 value of t by s, in place.
func scaleTensor(t *tensor.Tensor, s float32) {
	v := tensor.AsF32(t.Data)
	for i := range v {
		v[i] *= s
	}
}

func randomHidden(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

// relErr is max_i |got_i - want_i| / max_i |want_i|.
func relErr(got []float32, want []float64) float64 {
	var d, m float64
	for i := range want {
		d = math.Max(d, math.Abs(float64(got[i])-want[i]))
		m = math.Max(m, math.Abs(want[i]))
	}
	return d / m
}

// TestLayerAtPositionZero: a layer's update of the hidden state (output
// minus input) at position 0, for hidden states of RMS 1 and of RMS 3e-4
// (mean square a hundredth of the epsilon 1e-5), the second with Wo scaled
// down so that the FFN's norm also sees a tiny input. Measured relative
// errors of the update: at most 2.2e-7 over the ten trials; bound 1e-6.
// With the epsilon dropped the RMS-1 case is off by 6e-6 and the tiny one
// by more than 0.5.
func TestLayerAtPositionZero(t *testing.T) {
	cfg := model.Config{Dim: 64, HiddenDim: 160, NLayers: 1, NHeads: 4, NKVHeads: 2, VocabSize: 32,
		SeqLen: 8, RopeTheta: 10000, RopeDim: 16, NormEps: 1e-5, TiedOutput: true}
	rng := rand.New(rand.NewPCG(51, 51))
	for _, tc := range []struct {
		name          string
		scale, woMult float64
	}{
		{"rms 1", 1, 1},
		{"rms 3e-4", 3e-4, 1e-4},
	} {
		w, err := synth.Weights(cfg, 9)
		if err != nil {
			t.Fatal(err)
		}
		scaleTensor(&w.Layers[0].Wo, float32(tc.woMult))
		m, err := model.New(w)
		if err != nil {
			t.Fatal(err)
		}
		for trial := range 5 {
			s, _ := m.NewState(0, 1)
			x := randomHidden(rng, cfg.Dim, tc.scale)
			x64 := make([]float64, len(x))
			for i, v := range x {
				x64[i] = float64(v)
			}
			want := layerAtZero64(w, 0, x64)
			got := append([]float32(nil), x...)
			if err := m.Layers(s, got, 0); err != nil {
				t.Fatal(err)
			}
			upd, upd64 := make([]float32, len(x)), make([]float64, len(x))
			for i := range x {
				upd[i] = got[i] - x[i]
				upd64[i] = want[i] - x64[i]
			}
			e := relErr(upd, upd64)
			t.Logf("%s trial %d: relative error of the layer's update %.2g", tc.name, trial, e)
			if !(e <= 1e-6) {
				t.Errorf("%s trial %d: the layer's update differs from float64 by %.3g of its size (bound 1e-6)", tc.name, trial, e)
			}
		}
	}
}

// TestHeadNorm: the final norm and classifier, for hidden states of RMS 1
// and 1e-3 (mean square a tenth of the epsilon). Measured relative error of
// the logits 1.2e-7; bound 6e-7. Without the epsilon the small case is off
// by a factor of about 3.
func TestHeadNorm(t *testing.T) {
	cfg := model.Config{Dim: 96, HiddenDim: 32, NLayers: 1, NHeads: 4, NKVHeads: 4, VocabSize: 200,
		SeqLen: 8, RopeTheta: 10000, RopeDim: 24, NormEps: 1e-5, TiedOutput: false}
	w, err := synth.Weights(cfg, 10)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(52, 52))
	for _, scale := range []float64{1, 1e-3} {
		x := randomHidden(rng, cfg.Dim, scale)
		x64 := make([]float64, len(x))
		for i, v := range x {
			x64[i] = float64(v)
		}
		want := matvec64(&w.Output, norm64(x64, tensor.AsF32(w.FinalNorm.Data), cfg.NormEps))
		logits := make([]float32, cfg.VocabSize)
		if err := m.Head(x, logits); err != nil {
			t.Fatal(err)
		}
		e := relErr(logits, want)
		t.Logf("hidden RMS %g: relative error of the logits %.2g", scale, e)
		if !(e <= 6e-7) {
			t.Errorf("hidden RMS %g: logits differ from float64 by %.3g of their size (bound 6e-7)", scale, e)
		}
	}
}

// TestThreadsBitIdentical: the forward pass (parallel projections, parallel
// attention heads, a batched prompt) gives the same bits with 1, 2 and 3
// threads, for f32 and an integer-dot type.
func TestThreadsBitIdentical(t *testing.T) {
	defer kernels.SetThreads(0)
	cfg := model.Config{Dim: 128, HiddenDim: 256, NLayers: 2, NHeads: 8, NKVHeads: 2, VocabSize: 300,
		SeqLen: 32, RopeTheta: 10000, RopeDim: 16, NormEps: 1e-5, TiedOutput: true}
	base, err := synth.Weights(cfg, 12)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*model.Weights{base, quantizedCopy(t, base, tensor.Q4_0)} {
		m, err := model.New(w)
		if err != nil {
			t.Fatal(err)
		}
		var first []float32
		for _, th := range []int{1, 2, 3} {
			kernels.SetThreads(th)
			s, _ := m.NewState(0, cfg.NLayers)
			tokens := []int{1, 5, 9, 200, 17, 3, 3, 80, 81, 82, 7}
			x := make([]float32, len(tokens)*cfg.Dim)
			for i, tok := range tokens {
				m.Embed(tok, x[i*cfg.Dim:(i+1)*cfg.Dim])
			}
			if err := m.LayersBatch(s, x[:9*cfg.Dim], 0, 9); err != nil {
				t.Fatal(err)
			}
			for p := 9; p < len(tokens); p++ {
				if err := m.Layers(s, x[p*cfg.Dim:(p+1)*cfg.Dim], p); err != nil {
					t.Fatal(err)
				}
			}
			if first == nil {
				first = x
				continue
			}
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(first[i]) {
					t.Fatalf("%s, %d threads: value %d is %v, with 1 thread %v", w.Layers[0].Wq.Type, th, i, x[i], first[i])
				}
			}
		}
	}
}
