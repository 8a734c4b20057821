package testmodels

import (
	"math"
	"testing"

	"github.com/seamlm/seam/model"
)

// Logits runs tokens through the whole model w, one position at a time, and
// returns the logits after each.
func Logits(t testing.TB, w *model.Weights, tokens []int) [][]float32 {
	t.Helper()
	return LogitsIn(t, w, tokens, nil)
}

// LogitsIn is Logits with the KV cache's blocks from pool (nil: an
// unbounded f32 cache).
func LogitsIn(t testing.TB, w *model.Weights, tokens []int, pool *model.KVPool) [][]float32 {
	t.Helper()
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewStateIn(0, w.Config.NLayers, pool)
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, w.Config.Dim)
	var out [][]float32
	for pos, tok := range tokens {
		if err := m.Embed(tok, x); err != nil {
			t.Fatal(err)
		}
		if err := m.Layers(s, x, pos); err != nil {
			t.Fatal(err)
		}
		l := make([]float32, w.Config.VocabSize)
		if err := m.Head(x, l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// SameBits fails the test at the first logit whose bits differ.
func SameBits(t testing.TB, what string, got, want [][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d positions, want %d", what, len(got), len(want))
	}
	for p := range want {
		for i := range want[p] {
			if math.Float32bits(got[p][i]) != math.Float32bits(want[p][i]) {
				t.Fatalf("%s: position %d logit %d is %v, want %v", what, p, i, got[p][i], want[p][i])
			}
		}
	}
}
