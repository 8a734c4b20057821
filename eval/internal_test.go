package eval

import (
	"math"
	"testing"
)

// Fit holds out floor(n * h) rows; holdoutFraction must make that exactly r
// for every r, including the n and r where r/n rounds below the true ratio.
func TestHoldoutFraction(t *testing.T) {
	for n := 2; n <= 3000; n++ {
		for r := 0; r < n; r += 1 + r/7 {
			h, err := holdoutFraction(n, r)
			if err != nil {
				t.Fatalf("n %d, r %d: %v", n, r, err)
			}
			if got := int(math.Floor(float64(n) * h)); got != r || h < 0 || h >= 1 {
				t.Fatalf("n %d, r %d: fraction %v holds out %d", n, r, h, got)
			}
		}
	}
}
