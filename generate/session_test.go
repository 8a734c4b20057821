package generate

import (
	"context"
	"math"
	"testing"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/synth"
)

// A local session's ForwardArgmax (one logits buffer for the session) picks
// what the argmax of Forward's logits picks, over a prompt and 40 greedy
// steps of two sessions side by side; no tokens is an error, not a panic.
func TestLocalForwardArgmaxMatchesForward(t *testing.T) {
	w, err := synth.Weights(synth.DemoConfig(), 9)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, _ := NewLocal(m)
	b, _ := NewLocal(m)
	prompt := []int{1, 7, 3, 11}
	got, err := a.ForwardArgmax(ctx, prompt, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.Forward(ctx, prompt, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	for pos := len(prompt); pos < len(prompt)+40; pos++ {
		want := sample.Argmax(l[0])
		if got != want {
			t.Fatalf("position %d: ForwardArgmax %d, argmax of Forward %d", pos, got, want)
		}
		if got, err = a.ForwardArgmax(ctx, []int{got}, pos); err != nil {
			t.Fatal(err)
		}
		if l, err = b.Forward(ctx, []int{want}, pos, false); err != nil {
			t.Fatal(err)
		}
	}
	// ForwardInto gives Forward's bits.
	c, _ := NewLocal(m)
	buf := make([]float32, c.VocabSize())
	if err := c.ForwardInto(ctx, prompt, 0, buf); err != nil {
		t.Fatal(err)
	}
	ref, _ := NewLocal(m)
	l, err = ref.Forward(ctx, prompt, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	for v := range buf {
		if math.Float32bits(buf[v]) != math.Float32bits(l[0][v]) {
			t.Fatalf("logit %d: ForwardInto %v, Forward %v", v, buf[v], l[0][v])
		}
	}
	if err := c.ForwardInto(ctx, []int{2}, len(prompt), buf[:3]); err == nil {
		t.Error("a buffer of 3 logits was accepted")
	}
	if _, err := a.ForwardArgmax(ctx, nil, 0); err == nil {
		t.Error("ForwardArgmax of no tokens gave no error")
	}
	if _, err := a.Forward(ctx, nil, 0, true); err == nil {
		t.Error("Forward of no tokens gave no error")
	}
}
