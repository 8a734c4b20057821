package eval

import (
	"math"
	"testing"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
)

// SmallTestModel is a random-weight model small enough that whole
// evaluations take milliseconds: width 32, 4 layers, a vocabulary of vocab
// words, context 32. The package's external tests use it too.
func SmallTestModel(t testing.TB, vocab int) *model.Model {
	t.Helper()
	cfg := model.Config{Dim: 32, HiddenDim: 64, NLayers: 4, NHeads: 4, NKVHeads: 2, VocabSize: vocab,
		SeqLen: 32, RopeTheta: 10000, RopeDim: 8, NormEps: 1e-5}
	w, err := synth.Weights(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSensitivityIsQuadratic: the measured weight is the coefficient of a
// quadratic form, so probes of SensitivityStep and of half of it give
// nearly the same weight; and it varies between directions (a flat
// answer would mean the probe measured nothing).
func TestSensitivityIsQuadratic(t *testing.T) {
	m := SmallTestModel(t, 64)
	seqs, err := SampleTokens(m, 1, 2, 600, 3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, n, err := Capture(m, seqs, 2, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var basis codec.Basis
	if _, err := codec.Fit(rows, n, 32, codec.FitOptions{Bytes: 16, Sensitivity: func(b codec.Basis) ([]float64, error) {
		basis = b
		return make([]float64, len(b.Variances)), nil
	}}); err == nil {
		t.Fatal("a fit whose every weight is 0 kept a component")
	}
	probe := Truncate(seqs, 300)
	full, err := sensitivityAt(m, probe, 2, basis, SensitivityStep, nil)
	if err != nil {
		t.Fatal(err)
	}
	half, err := sensitivityAt(m, probe, 2, basis, SensitivityStep/2, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Sensitivity(m, probe, 2, basis, nil)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, worst := math.Inf(1), 0.0, 0.0
	for p := range full {
		if full[p] != again[p] {
			t.Fatalf("direction %d: %v, then %v: not deterministic", p, full[p], again[p])
		}
		if !(full[p] > 0) {
			t.Fatalf("direction %d: sensitivity %v", p, full[p])
		}
		worst = max(worst, math.Abs(half[p]/full[p]-1))
		lo, hi = min(lo, full[p]), max(hi, full[p])
	}
	t.Logf("%d directions: weights %.4g to %.4g; probe halved changes them by at most %.2f%%", len(full), lo, hi, 100*worst)
	if worst > 0.05 {
		t.Fatalf("halving the probe changes a weight by %.1f%%: not in the quadratic regime", 100*worst)
	}
	if hi < 1.3*lo { // measured 1.68x
		t.Fatalf("weights %v to %v: no direction stands out", lo, hi)
	}
}
