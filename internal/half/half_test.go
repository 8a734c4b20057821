package half

import (
	"math"
	"testing"
)

func TestKnownValues(t *testing.T) {
	cases := []struct {
		h uint16
		f float32
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.9604645e-08},
		{0x03ff, 6.097555e-05}, {0x0400, 6.1035156e-05}, {0x3555, 0.33325195}, {0x7c00, float32(math.Inf(1))},
	}
	for _, c := range cases {
		if got := ToF32(c.h); got != c.f {
			t.Errorf("ToF32(%#04x) = %v, want %v", c.h, got, c.f)
		}
		if got := FromF32(c.f); got != c.h {
			t.Errorf("FromF32(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
}

// Every finite half must survive a round trip, and every float32 must round to
// one of its two f16 neighbours, the nearer one, ties going to the even one.
func TestRoundTripAndRounding(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			if got := FromF32(f); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x became %#04x", h, got)
			}
			continue
		}
		if got := FromF32(f); got != uint16(h) {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, got)
		}
	}
	// Midpoints between adjacent positive halves round to the even neighbour.
	for h := uint16(0); h < 0x7bff; h++ {
		lo, hi := float64(ToF32(h)), float64(ToF32(h+1))
		mid := float32((lo + hi) / 2)
		want := h
		if h&1 == 1 {
			want = h + 1
		}
		if got := FromF32(mid); got != want {
			t.Fatalf("midpoint of %#04x and %#04x (%v) -> %#04x, want %#04x", h, h+1, mid, got, want)
		}
	}
	if FromF32(70000) != 0x7c00 || FromF32(-70000) != 0xfc00 {
		t.Fatal("overflow does not give infinity")
	}
}
