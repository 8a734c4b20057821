package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ropeInputs returns n pairs of values (with zeros, infinities and NaN
// among them) and angles' cosines and sines, tabulated as a model's
// RoPE table is: float64 cos and sin rounded to float32.
func ropeInputs(rng *rand.Rand, n int) (x, y, cos, sin []float32) {
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32}
	for k := range n {
		a, b := float32(rng.NormFloat64()*3), float32(rng.NormFloat64()*3)
		if k%13 == 5 {
			a = special[k%len(special)]
		}
		theta := rng.Float64() * 200
		x, y = append(x, a), append(y, b)
		cos, sin = append(cos, float32(math.Cos(theta))), append(sin, float32(math.Sin(theta)))
	}
	return x, y, cos, sin
}

// Both rotations give, at every level, the bits of their definition's
// float32 operations (x*c - y*s, x*s + y*c, each product rounded), for
// counts that leave the SIMD loop's blocks of 8 pairs and a tail in Go, and
// touch no value past the pairs.
func TestRotateMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 81))
	levelsCovered(t, func(level int) {
		for _, n := range []int{0, 1, 3, 7, 8, 9, 16, 23, 32, 64, 200} {
			x, y, cos, sin := ropeInputs(rng, n)
			want0, want1 := make([]float32, n), make([]float32, n)
			for k := range n {
				want0[k] = float32(x[k]*cos[k]) - float32(y[k]*sin[k])
				want1[k] = float32(x[k]*sin[k]) + float32(y[k]*cos[k])
			}
			// Pairs side by side, one guard value after them.
			v := make([]float32, 2*n+1)
			for k := range n {
				v[2*k], v[2*k+1] = x[k], y[k]
			}
			v[2*n] = 42
			RotatePairs(v, cos, sin)
			// Halves, each with a guard value.
			a, b := append(append([]float32(nil), x...), 42), append(append([]float32(nil), y...), 42)
			RotateHalves(a, b, cos, sin)
			for k := range n {
				if !sameBits(v[2*k], want0[k]) || !sameBits(v[2*k+1], want1[k]) {
					t.Fatalf("level %s, %d pairs: RotatePairs turned pair %d (%v, %v) by (%v, %v) to (%v, %v), want (%v, %v)",
						levelNames[level], n, k, x[k], y[k], cos[k], sin[k], v[2*k], v[2*k+1], want0[k], want1[k])
				}
				if !sameBits(a[k], want0[k]) || !sameBits(b[k], want1[k]) {
					t.Fatalf("level %s, %d pairs: RotateHalves turned pair %d (%v, %v) by (%v, %v) to (%v, %v), want (%v, %v)",
						levelNames[level], n, k, x[k], y[k], cos[k], sin[k], a[k], b[k], want0[k], want1[k])
				}
			}
			if v[2*n] != 42 || a[n] != 42 || b[n] != 42 {
				t.Fatalf("level %s, %d pairs: a value past the pairs changed", levelNames[level], n)
			}
		}
	})
}

// A rotation is a rotation: against float64 arithmetic on the same
// float32 inputs, finite pairs come out within a few float32 ulps of their
// length (measured: at most 1.03e-7 of it).
func TestRotateAgainstFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(82, 82))
	const n = 4096
	var x, y, cos, sin []float32
	for range n {
		theta := rng.Float64() * 1000
		x, y = append(x, float32(rng.NormFloat64())), append(y, float32(rng.NormFloat64()))
		cos, sin = append(cos, float32(math.Cos(theta))), append(sin, float32(math.Sin(theta)))
	}
	a, b := append([]float32(nil), x...), append([]float32(nil), y...)
	RotateHalves(a, b, cos, sin)
	worst := 0.0
	for k := range n {
		c, s := float64(cos[k]), float64(sin[k])
		u, w := float64(x[k])*c-float64(y[k])*s, float64(x[k])*s+float64(y[k])*c
		length := math.Hypot(float64(x[k]), float64(y[k]))
		worst = max(worst, math.Hypot(float64(a[k])-u, float64(b[k])-w)/length)
	}
	t.Logf("largest error against float64: %.3g of the pair's length", worst)
	if worst > 5e-7 {
		t.Fatalf("largest error against float64 is %.3g of the pair's length, want at most 5e-7", worst)
	}
}

func TestRotatePanicsOnShortInputs(t *testing.T) {
	mustPanic(t, "RotatePairs", func() { RotatePairs(make([]float32, 7), make([]float32, 4), make([]float32, 4)) })
	mustPanic(t, "RotatePairs sines", func() { RotatePairs(make([]float32, 8), make([]float32, 4), make([]float32, 3)) })
	mustPanic(t, "RotateHalves", func() { RotateHalves(make([]float32, 4), make([]float32, 3), make([]float32, 4), make([]float32, 4)) })
}

func BenchmarkRotate(b *testing.B) {
	rng := rand.New(rand.NewPCG(83, 83))
	x, y, cos, sin := ropeInputs(rng, 32) // one 64-value head of a stories110M
	v := make([]float32, 64)
	for k := range 32 {
		v[2*k], v[2*k+1] = x[k], y[k]
	}
	for level := simdNone; level <= maxLevel; level++ {
		withSIMD(level, func() {
			b.Run("pairs/32/level="+levelNames[level], func(b *testing.B) {
				for b.Loop() {
					RotatePairs(v, cos, sin)
				}
			})
			b.Run("halves/32/level="+levelNames[level], func(b *testing.B) {
				for b.Loop() {
					RotateHalves(v[:32], v[32:], cos, sin)
				}
			})
		})
	}
}
