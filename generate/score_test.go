package generate

import (
	"math"
	"testing"
)

// Values worked by hand: softmax(0, ln 3) = (1/4, 3/4).
func TestNLLAndKL(t *testing.T) {
	l := []float32{0, float32(math.Log(3))}
	if got, want := NLL(l, 0), math.Log(4); math.Abs(got-want) > 1e-6 {
		t.Errorf("NLL = %v, want ln 4 = %v", got, want)
	}
	if got := KL(l, l); got != 0 {
		t.Errorf("KL(p, p) = %v, want 0", got)
	}
	// KL((1/4,3/4) || (1/2,1/2)) = 1/4 ln(1/2) + 3/4 ln(3/2).
	want := 0.25*math.Log(0.5) + 0.75*math.Log(1.5)
	if got := KL(l, []float32{5, 5}); math.Abs(got-want) > 1e-6 {
		t.Errorf("KL = %v, want %v", got, want)
	}
}
