package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seamlm/seam/internal/half"
)

const u32 = 1.0 / (1 << 24) // unit roundoff of float32

// gamma is Higham's gamma_k = k*u/(1-k*u), the bound on k chained roundings.
func gamma(k int) float64 { return float64(k) * u32 / (1 - float64(k)*u32) }

func TestExpIsCorrectlyRounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	check := func(x float32) {
		got := Exp(x)
		e := math.Exp(float64(x)) // within 1 ulp of float64
		want := float32(e)
		if got == want {
			return
		}
		// Only acceptable when e^x lies so close to the midpoint of two
		// float32 neighbours that math.Exp's own error decides the rounding.
		lo, hi := float64(min(got, want)), float64(max(got, want))
		if mid := (lo + hi) / 2; math.Abs(e-mid) <= math.Abs(e)*0x1p-50 {
			return
		}
		t.Fatalf("Exp(%v) = %v, correctly rounded %v", x, got, want)
	}
	for i := 0; i < 200000; i++ {
		check(float32(rng.Float64()*193 - 104))
		check(float32(rng.NormFloat64()))
	}
	for _, x := range []float32{0, -0, 1, -1, 88.72, 88.73, -87.3, -103.9, -103.98, math.SmallestNonzeroFloat32} {
		check(x)
	}
	if Exp(0) != 1 || Exp(1) != float32(math.E) {
		t.Fatalf("Exp(0) = %v, Exp(1) = %v", Exp(0), Exp(1))
	}
	if !math.IsInf(float64(Exp(89.5)), 1) || Exp(-110) != 0 || Exp(float32(math.Inf(-1))) != 0 || !math.IsInf(float64(Exp(float32(math.Inf(1)))), 1) {
		t.Fatal("Exp overflow/underflow/infinity handling")
	}
	if nan := float32(math.NaN()); !math.IsNaN(float64(Exp(nan))) {
		t.Fatal("Exp(NaN) is not NaN")
	}
}

func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	for _, n := range []int{1, 7, 64, 288, 4096} {
		x, w := randVec(rng, n), randVec(rng, n)
		const eps = 1e-5
		out := make([]float32, n)
		RMSNorm(out, x, w, eps)
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(n)+eps)
		// The sum of squares carries gamma_{n+1} (products and sums), the
		// division by n and the + eps one rounding each: gamma_{n+3} on a
		// positive quantity. The square root halves it, converting 1/sqrt
		// to float32 adds one rounding, then two products: at most
		// gamma_{n+6} relative, plus the float64 reference's own 2^-50.
		tol := gamma(n+6) + 0x1p-50
		for i := range out {
			want := float64(w[i]) * (inv * float64(x[i]))
			if d := math.Abs(float64(out[i]) - want); d > tol*math.Abs(want) {
				t.Fatalf("n=%d i=%d: %v, want %v", n, i, out[i], want)
			}
		}
		// In place gives the same bits.
		in := append([]float32(nil), x...)
		RMSNorm(in, in, w, eps)
		for i := range in {
			if !sameBits(in[i], out[i]) {
				t.Fatalf("in place differs at %d", i)
			}
		}
	}
	// By hand: x = (3, 4), w = (1, 2), eps = 0: rms = sqrt(12.5).
	out := make([]float32, 2)
	RMSNorm(out, []float32{3, 4}, []float32{1, 2}, 0)
	r := math.Sqrt(12.5)
	if math.Abs(float64(out[0])-3/r) > 1e-6 || math.Abs(float64(out[1])-8/r) > 1e-6 {
		t.Fatalf("RMSNorm by hand = %v, want [%v %v]", out, 3/r, 8/r)
	}
}

func TestSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	for _, n := range []int{1, 2, 5, 100, 512} {
		x := randVec(rng, n)
		for i := range x {
			x[i] *= 4
		}
		m := float64(x[0])
		for _, v := range x {
			m = max(m, float64(v))
		}
		want := make([]float64, n)
		var sum, spread float64
		for i, v := range x {
			want[i] = math.Exp(float64(v) - m)
			sum += want[i]
			spread = max(spread, m-float64(v))
		}
		got := append([]float32(nil), x...)
		Softmax(got)
		for i := range got {
			want := want[i] / sum
			// x_i - max is rounded (relative error u, i.e. an absolute
			// error of u*|x_i - max| in the exponent, that much relative
			// after exp), Exp rounds once, the sum of n terms carries
			// gamma_{n-1} plus every term's error (at most the largest),
			// then 1/sum and the product one rounding each.
			tol := (float64(m)-float64(x[i])+spread)*u32 + gamma(n+5)
			if d := math.Abs(float64(got[i]) - want); d > tol*want {
				t.Fatalf("n=%d i=%d: %v, want %v (rel err %g > %g)", n, i, got[i], want, d/want, tol)
			}
		}
	}
	one := []float32{-3}
	Softmax(one)
	if one[0] != 1 {
		t.Fatalf("softmax of one value = %v", one[0])
	}
	two := []float32{0, 0}
	Softmax(two)
	if two[0] != 0.5 || two[1] != 0.5 {
		t.Fatalf("softmax(0, 0) = %v", two)
	}
	// Signed zeros give the bits the builtin max's maximum (+0) gives; a
	// NaN anywhere makes every value NaN.
	negZero := float32(math.Copysign(0, -1))
	for _, x := range [][]float32{{negZero, 0, -1}, {0, negZero, -1}, {negZero, negZero, -2}, {-1, negZero, 0, negZero}} {
		got := append([]float32(nil), x...)
		Softmax(got)
		e := make([]float64, len(x))
		var sum float32
		for i, v := range x {
			e[i] = float64(Exp(v - 0))
			sum += float32(e[i])
		}
		for i := range got {
			if want := float32(e[i]) * (1 / sum); !sameBits(got[i], want) {
				t.Fatalf("softmax%v[%d] = %v (bits %08x), want %v", x, i, got[i], math.Float32bits(got[i]), want)
			}
		}
	}
	nan := float32(math.NaN())
	for _, x := range [][]float32{{nan, 1, 2}, {1, nan, 2}, {1, 2, nan}} {
		Softmax(x)
		for i, v := range x {
			if v == v {
				t.Fatalf("softmax with a NaN: value %d is %v", i, v)
			}
		}
	}
	Softmax(nil) // must not panic
}

func TestAxpy(t *testing.T) {
	y := []float32{1, 2, 3, 1}
	Axpy(y, 0.5, []float32{2, 4, -6, 0x1p-24})
	// 1 + 0.5*2 = 2; 2 + 2 = 4; 3 - 3 = 0; 1 + 2^-25 rounds to 1.
	want := []float32{2, 4, 0, 1}
	for i := range y {
		if y[i] != want[i] {
			t.Fatalf("Axpy = %v, want %v", y, want)
		}
	}
	// The product is rounded before the sum (no FMA): 1.5*(1+2^-23) is
	// 1.5+1.5*2^-23, rounded to 1.5+2^-22; adding -1.5 leaves 2^-22 exactly,
	// where a fused multiply-add would give 1.5*2^-23.
	z := []float32{-1.5}
	Axpy(z, 1.5, []float32{1 + 0x1p-23})
	if z[0] != 0x1p-22 {
		t.Fatalf("Axpy rounding: %g, want %g", z[0], 0x1p-22)
	}
}

func TestSwiGLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	gate, up := randVec(rng, 1000), randVec(rng, 1000)
	for i := range gate {
		gate[i] *= 8
	}
	gate[0], gate[1] = -95, 95 // exp(-g) overflows float32; exp(g) huge
	got := append([]float32(nil), gate...)
	SwiGLU(got, up)
	for i, g := range gate {
		want := float64(g) / (1 + math.Exp(-float64(g))) * float64(up[i])
		// Exp, 1+e, the division and the product round once each; the
		// error of e^-g shrinks through 1+e. 1e-38 absolute covers
		// g/(1+Inf) = 0 where the exact value is below float32's range.
		tol := gamma(5)*math.Abs(want) + 1e-38
		if d := math.Abs(float64(got[i]) - want); d > tol {
			t.Fatalf("g=%v u=%v: %v, want %v", g, up[i], got[i], want)
		}
	}
	mustPanic(t, "SwiGLU", func() { SwiGLU(make([]float32, 2), make([]float32, 3)) })
	mustPanic(t, "RMSNorm", func() { RMSNorm(make([]float32, 2), make([]float32, 3), make([]float32, 3), 0) })
}

// The SIMD Exp computes Exp's bits: random values over Exp's whole range
// and beyond, halfway cases of the rounding of k, every special value.
func TestExpSIMDMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 71))
	var x []float32
	for range 400000 {
		x = append(x, float32(rng.Float64()*240-120))
	}
	for k := -160; k <= 140; k++ { // x*log2e near k + 1/2
		v := (float64(k) + 0.5) / 1.4426950408889634
		x = append(x, float32(v), math.Nextafter32(float32(v), 0), math.Nextafter32(float32(v), 200))
	}
	x = append(x, 0, float32(math.Copysign(0, -1)), 89, math.Nextafter32(89, 100), -104, math.Nextafter32(-104, -200),
		88.72284, 88.72283, -87.33655, -103.97, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7fa00001))
	for len(x)%4 != 0 {
		x = append(x, 1)
	}
	// Every count of vectors modulo 4 at both widths (the AVX-512 loop
	// does four vectors at a time, then two, then a last one alone; the
	// AVX2 loop two, then one), each run ending with the special values.
	levelsCovered(t, func(level int) {
		for _, neg := range []bool{false, true} {
			for skip := 0; skip < 32; skip += 4 {
				checkExpSIMD(t, level, x[skip:], neg)
			}
		}
	})
}

// checkExpSIMD checks expSIMD over x (-x with neg) against Exp.
func checkExpSIMD(t *testing.T, level int, x []float32, neg bool) {
	t.Helper()
	got := make([]float32, len(x))
	n := expSIMD(got, x, neg)
	if level >= simdAVX2 && n != len(x) {
		t.Fatalf("level %s: expSIMD did %d of %d", levelNames[level], n, len(x))
	}
	for i := range got[:n] {
		v := x[i]
		if neg {
			v = -v
		}
		if want := Exp(v); !sameBits(got[i], want) {
			t.Fatalf("level %s, %d values: Exp(%v) = %v (bits %08x), SIMD %v (bits %08x)", levelNames[level], len(x), v, want, math.Float32bits(want), got[i], math.Float32bits(got[i]))
		}
	}
}

// SwiGLU gives, at every level, the bits of its definition's float32
// operations, g / (1 + Exp(-g)) * u, each rounded: gates over Exp's whole
// range and its special values, up values with signs, zeros, infinities
// and NaN, and lengths that leave the AVX-512 loop's fours of vectors,
// a pair, a single vector and a scalar tail.
func TestSwiGLUSIMDMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(73, 73))
	var g, u []float32
	for range 20000 {
		g = append(g, float32(rng.Float64()*240-120))
		u = append(u, float32(rng.NormFloat64()*4))
	}
	special := []float32{0, float32(math.Copysign(0, -1)), 89, -89, 104, -104, 105, -105, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for _, a := range special {
		for _, b := range special {
			g, u = append(g, a), append(u, b)
		}
	}
	levelsCovered(t, func(level int) {
		for _, n := range []int{1, 7, 8, 15, 16, 24, 31, 32, 40, 48, 56, 63, len(g)} {
			// The first n values (random gates) or all (the specials
			// last): the specials alone are mostly NaN gates, whose result
			// is NaN whatever the exponential.
			gs, up := g[:n], u[:n]
			got := append([]float32(nil), gs...)
			SwiGLU(got, up)
			for i, v := range gs {
				if want := v / (1 + Exp(-v)) * up[i]; !sameBits(got[i], want) {
					t.Fatalf("level %s, %d values: g=%v u=%v gives %v (bits %08x), want %v (bits %08x)", levelNames[level], n, v, up[i], got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
			}
		}
	})
}

// DotRows and AxpyRows give the bits of the Dot and Axpy calls they stand
// for, at every level, for widths with and without a SIMD tail.
func TestRowsOpsMatchCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(72, 72))
	levelsCovered(t, func(level int) {
		for _, n := range []int{8, 16, 24, 40, 64, 72, 80, 88, 128, 13} {
			for _, rows := range []int{1, 2, 7, 33} {
				stride := n + rng.IntN(3)*8
				m := randVec(rng, (rows-1)*stride+n)
				x, a := randVec(rng, n), randVec(rng, rows)
				got := make([]float32, rows)
				DotRows(got, x, m, stride)
				y, want := randVec(rng, n), []float32(nil)
				want = append(want, y...)
				AxpyRows(y, a, m, stride)
				for r := range rows {
					if d := Dot(x, m[r*stride:r*stride+n]); !sameBits(got[r], d) {
						t.Fatalf("level %s n %d row %d: DotRows %v, Dot %v", levelNames[level], n, r, got[r], d)
					}
					Axpy(want, a[r], m[r*stride:r*stride+n])
				}
				for i := range y {
					if !sameBits(y[i], want[i]) {
						t.Fatalf("level %s n %d rows %d value %d: AxpyRows %v, Axpy calls %v", levelNames[level], n, rows, i, y[i], want[i])
					}
				}
			}
		}
	})
	mustPanic(t, "DotRows beyond m", func() { DotRows(make([]float32, 3), make([]float32, 8), make([]float32, 20), 8) })
	mustPanic(t, "AxpyRows beyond m", func() { AxpyRows(make([]float32, 8), make([]float32, 3), make([]float32, 20), 8) })
}

// WidenF16 gives every one of the 65536 f16 values exactly as the scalar
// conversion does (a NaN as a NaN), at every level, through the SIMD part
// and the tail (lengths not a multiple of 8).
func TestWidenF16AllValues(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	levelsCovered(t, func(level int) {
		for _, n := range []int{1 << 16, 1<<16 - 3, 13, 0} {
			dst := make([]float32, n)
			WidenF16(dst, src)
			for i, v := range dst {
				want := half.ToF32(src[i])
				if want != want {
					if v == v {
						t.Fatalf("level %s n %d: f16 %#04x (NaN) widened to %v", levelNames[level], n, src[i], v)
					}
					continue
				}
				if math.Float32bits(v) != math.Float32bits(want) {
					t.Fatalf("level %s n %d: f16 %#04x widened to %v, want %v", levelNames[level], n, src[i], v, want)
				}
			}
		}
	})
}

// Prefetch reads nothing it is not given and changes nothing, at any
// length, on either element type.
func TestPrefetch(t *testing.T) {
	f := make([]float32, 1000)
	h := make([]uint16, 1000)
	for i := range f {
		f[i], h[i] = float32(i)*0.5, uint16(3*i)
	}
	for _, n := range []int{0, 1, 15, 16, 17, 333, 1000} {
		Prefetch(f[:n])
		Prefetch(h[len(h)-n:])
	}
	Prefetch([]float32(nil))
	for i := range f {
		if f[i] != float32(i)*0.5 || h[i] != uint16(3*i) {
			t.Fatalf("element %d changed: %v, %d", i, f[i], h[i])
		}
	}
}
