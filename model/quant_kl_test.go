package model_test

import (
	"math"
	"os"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/llama2c"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

// The integer-dot kernels quantize activations to 8 bits per 32-value block
// before multiplying them by quantized weights (docs/kernels.md). These
// tests measure what that changes: the same quantized weights run once that
// way and once dequantized to f32 (float activations, the result before the
// integer kernels), compared position by position by KL divergence.

// quantizedCopy returns w with every layer matrix whose width is a whole
// number of typ's blocks re-encoded as typ (the others, the norms and the
// embedding stay f32).
func quantizedCopy(t *testing.T, w *model.Weights, typ tensor.DType) *model.Weights {
	t.Helper()
	q := *w
	q.Layers = append([]model.Layer(nil), w.Layers...)
	for l := range q.Layers {
		L := &q.Layers[l]
		for _, m := range []*tensor.Tensor{&L.Wq, &L.Wk, &L.Wv, &L.Wo, &L.W1, &L.W2, &L.W3} {
			if m.Cols%typ.BlockElems() != 0 {
				continue
			}
			rb, _ := typ.RowBytes(m.Cols)
			enc := tensor.Tensor{Name: m.Name, Type: typ, Rows: m.Rows, Cols: m.Cols, Data: make([]byte, rb*m.Rows)}
			vals := tensor.AsF32(m.Data)
			for r := range m.Rows {
				if err := kernels.QuantizeRow(enc.Data[r*rb:(r+1)*rb], typ, vals[r*m.Cols:(r+1)*m.Cols]); err != nil {
					t.Fatal(err)
				}
			}
			*m = enc
		}
	}
	return &q
}

// dequantizedCopy returns w with every quantized layer matrix decoded to f32.
func dequantizedCopy(w *model.Weights) *model.Weights {
	d := *w
	d.Layers = append([]model.Layer(nil), w.Layers...)
	for l := range d.Layers {
		L := &d.Layers[l]
		for _, m := range []*tensor.Tensor{&L.Wq, &L.Wk, &L.Wv, &L.Wo, &L.W1, &L.W2, &L.W3} {
			if m.Type == tensor.F32 {
				continue
			}
			f := make([]float32, m.Rows*m.Cols)
			for r := range m.Rows {
				kernels.DequantRow(f[r*m.Cols:(r+1)*m.Cols], m, r)
			}
			*m = tensor.Tensor{Name: m.Name, Type: tensor.F32, Rows: m.Rows, Cols: m.Cols, Data: tensor.BytesOfF32(f)}
		}
	}
	return &d
}

// teacherForced returns the logits after each token.
func teacherForced(t *testing.T, w *model.Weights, tokens []int) [][]float32 {
	t.Helper()
	return testmodels.Logits(t, w, tokens)
}

// storiesGreedy opens stories260K and its greedy text's token ids.
func storiesGreedy(t *testing.T) (*llama2c.Checkpoint, []int) {
	t.Helper()
	ck, err := llama2c.Open(testmodels.Path(t, testmodels.Stories260K))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	tok, err := tokenizer.LoadLlama2c(testmodels.Path(t, testmodels.Tok512), 512)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	if err != nil {
		t.Fatal(err)
	}
	return ck, tok.Encode(string(text), true, false)
}

// kl64 is KL(softmax(p) || softmax(q)) in nats.
func kl64(p, q []float32) float64 {
	lse := func(x []float32) float64 {
		m := math.Inf(-1)
		for _, v := range x {
			m = math.Max(m, float64(v))
		}
		var s float64
		for _, v := range x {
			s += math.Exp(float64(v) - m)
		}
		return m + math.Log(s)
	}
	lp, lq := lse(p), lse(q)
	var kl float64
	for i := range p {
		a, b := float64(p[i])-lp, float64(q[i])-lq
		kl += math.Exp(a) * (a - b)
	}
	return kl
}

func argmax32(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// klStats compares the integer-dot run of quantized weights q with the f32
// run of the same weights decoded: mean and largest KL over the positions,
// and how many positions have the same argmax.
func klStats(t *testing.T, q *model.Weights, tokens []int) (mean, worst float64, same int) {
	t.Helper()
	a := teacherForced(t, dequantizedCopy(q), tokens)
	b := teacherForced(t, q, tokens)
	for i := range a {
		k := kl64(a[i], b[i])
		mean += k / float64(len(a))
		worst = math.Max(worst, k)
		if argmax32(a[i]) == argmax32(b[i]) {
			same++
		}
	}
	return mean, worst, same
}

// TestQuantizedActivationsKL measures the integer-dot path against float
// activations on stories260K (its layer matrices re-encoded; the FFN's down
// projection, 172 wide, stays f32) teacher-forced on its greedy text, and on
// a random synthetic model for every integer type. The bounds are about 3
// times the measured means (logged), and the argmax must agree almost
// everywhere.
func TestQuantizedActivationsKL(t *testing.T) {
	t.Run("stories260K", func(t *testing.T) {
		ck, all := storiesGreedy(t)
		ids := all[:96]
		for _, typ := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
			checkKL(t, "stories260K", ck.Weights, quantizedCopy(t, ck.Weights, typ), ids, 3e-4)
		}
	})
	t.Run("synthetic", func(t *testing.T) {
		cfg := model.Config{Dim: 256, HiddenDim: 768, NLayers: 4, NHeads: 8, NKVHeads: 4, VocabSize: 512,
			SeqLen: 64, RopeTheta: 10000, RopeDim: 32, NormEps: 1e-5, TiedOutput: false}
		w, err := synth.Weights(cfg, 21)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int
		for i := range 48 {
			ids = append(ids, (i*7919+1)%cfg.VocabSize)
		}
		for _, typ := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K} {
			checkKL(t, "synthetic dim 256", w, quantizedCopy(t, w, typ), ids, 3e-4)
		}
	})
}

// checkKL logs and bounds klStats, and logs for scale what quantizing the
// weights themselves costs: KL(f32 weights || the quantized ones decoded).
func checkKL(t *testing.T, name string, orig, q *model.Weights, tokens []int, bound float64) {
	t.Helper()
	typ := q.Layers[0].Wq.Type
	mean, worst, same := klStats(t, q, tokens)
	a, b := teacherForced(t, orig, tokens), teacherForced(t, dequantizedCopy(q), tokens)
	var wkl float64
	for i := range a {
		wkl += kl64(a[i], b[i]) / float64(len(a))
	}
	t.Logf("%s %s: KL(float activations || integer dots) mean %.3g nats, largest %.3g; argmax agrees at %d of %d positions (quantizing the weights: mean KL %.3g)",
		name, typ, mean, worst, same, len(tokens), wkl)
	if !(mean <= bound) || same < len(tokens)*9/10 {
		t.Errorf("%s %s: mean KL %.3g (bound %.3g), argmax agrees at %d of %d", name, typ, mean, bound, same, len(tokens))
	}
}
