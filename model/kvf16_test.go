package model_test

import (
	"math"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
)

// The f16 KV cache's quality cost: KL(f32 cache || f16 cache) over
// teacher-forced positions, on stories260K's greedy text and a random
// synthetic model. Measured means (2026-12-02): 5.7e-7 nats on stories260K
// (largest 1.6e-5), 1.0e-8 on the synthetic model; the bounds are about 3
// times them.
func TestF16KVCacheKL(t *testing.T) {
	check := func(name string, w *model.Weights, ids []int, bound float64) {
		p32, _ := model.NewKVPool(0, 0)
		p16, _ := model.NewKVPoolF16(0, 0)
		a := testmodels.LogitsIn(t, w, ids, p32)
		b := testmodels.LogitsIn(t, w, ids, p16)
		var mean, worst float64
		same := 0
		for i := range a {
			k := kl64(a[i], b[i])
			mean += k / float64(len(a))
			worst = math.Max(worst, k)
			if argmax32(a[i]) == argmax32(b[i]) {
				same++
			}
		}
		t.Logf("%s: KL(f32 KV || f16 KV) mean %.3g nats, largest %.3g over %d positions; argmax agrees at %d; f16 cache %d bytes, f32 %d",
			name, mean, worst, len(a), same, p16.Peak(), p32.Peak())
		if mean > bound || mean == 0 {
			t.Errorf("%s: mean KL %.3g, want in (0, %.3g]", name, mean, bound)
		}
		if 2*p16.Peak() != p32.Peak() {
			t.Errorf("%s: the f16 cache held %d bytes, the f32 one %d: want half", name, p16.Peak(), p32.Peak())
		}
	}
	ck, ids := storiesGreedy(t)
	check("stories260K", ck.Weights, ids[:min(len(ids), 256)], 2e-6)
	cfg := model.Config{Dim: 256, HiddenDim: 768, NLayers: 4, NHeads: 8, NKVHeads: 4, VocabSize: 512,
		SeqLen: 256, RopeTheta: 10000, RopeDim: 32, NormEps: 1e-5}
	w, err := synth.Weights(cfg, 21)
	if err != nil {
		t.Fatal(err)
	}
	var syn []int
	for i := range 200 {
		syn = append(syn, (i*7919+1)%cfg.VocabSize)
	}
	check("synthetic dim 256", w, syn, 3e-8)
}
