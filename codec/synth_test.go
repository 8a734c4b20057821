package codec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// wideStream is a synthetic hidden-state distribution with a known
// covariance: x = mu + R (sqrt(lambda) . z) + sum_o sqrt(s_o) z'_o e_o, with
// z, z' standard normal, lambda_i = 0.9^i, and a few outlier channels o of
// large variance s_o on top. R = P H D / sqrt(d) is a dense orthogonal
// matrix: D random signs, H the Walsh-Hadamard matrix, P a random
// permutation. Its covariance is Sigma = R diag(lambda) R^T + diag(s).
type wideStream struct {
	d        int
	lambda   []float64
	mu       []float64
	signs    []float64
	perm     []int // x[perm[j]] receives rotated coordinate j
	outliers []outlier
}

// outlier is a channel with extra independent variance.
type outlier struct {
	channel  int
	variance float64
}

func newWideStream(rng *rand.Rand, d int) *wideStream {
	w := &wideStream{
		d: d, lambda: make([]float64, d), mu: make([]float64, d), signs: make([]float64, d),
		perm:     rng.Perm(d),
		outliers: []outlier{{5 % d, 30}, {300 % d, 20}, {777 % d, 10}},
	}
	for i := range w.lambda {
		w.lambda[i] = math.Pow(0.9, float64(i))
		w.mu[i] = 0.5 * rng.NormFloat64()
		w.signs[i] = float64(1 - 2*rng.IntN(2))
	}
	for _, o := range w.outliers {
		w.mu[o.channel] += 8 // outlier channels also carry a large mean
	}
	return w
}

// fwht is the unnormalized Walsh-Hadamard transform (symmetric, H H = d I).
func fwht(v []float64) {
	for h := 1; h < len(v); h *= 2 {
		for i := 0; i < len(v); i += 2 * h {
			for j := i; j < i+h; j++ {
				a, b := v[j], v[j+h]
				v[j], v[j+h] = a+b, a-b
			}
		}
	}
}

// sample appends n rows as float32.
func (w *wideStream) sample(rng *rand.Rand, n int) []float32 {
	out := make([]float32, 0, n*w.d)
	v := make([]float64, w.d)
	scale := 1 / math.Sqrt(float64(w.d))
	for r := 0; r < n; r++ {
		for i := range v {
			v[i] = w.signs[i] * math.Sqrt(w.lambda[i]) * rng.NormFloat64()
		}
		fwht(v)
		x := make([]float64, w.d)
		for j, p := range w.perm {
			x[p] = v[j] * scale
		}
		for _, o := range w.outliers {
			x[o.channel] += math.Sqrt(o.variance) * rng.NormFloat64()
		}
		for j := range x {
			out = append(out, float32(x[j]+w.mu[j]))
		}
	}
	return out
}

// apply returns Sigma v = R diag(lambda) R^T v + diag(s) v.
func (w *wideStream) apply(v []float64) []float64 {
	t := make([]float64, w.d)
	for j, p := range w.perm {
		t[j] = v[p] // P^T v
	}
	fwht(t)
	scale := 1 / float64(w.d) // two factors 1/sqrt(d)
	for i := range t {
		t[i] *= w.lambda[i] * scale // D diag(lambda) D = diag(lambda)
	}
	fwht(t)
	out := make([]float64, w.d)
	for j, p := range w.perm {
		out[p] = t[j]
	}
	for _, o := range w.outliers {
		out[o.channel] += o.variance * v[o.channel]
	}
	return out
}

// frobenius2 returns ||Sigma||_F^2 = sum lambda^2 + 2 sum_o s_o A_oo +
// sum_o s_o^2, where A = R diag(lambda) R^T has diagonal tr(lambda)/d
// (every entry of R is +-1/sqrt(d)).
func (w *wideStream) frobenius2() float64 {
	var l1, l2 float64
	for _, l := range w.lambda {
		l1 += l
		l2 += l * l
	}
	f := l2
	for _, o := range w.outliers {
		f += 2*o.variance*l1/float64(w.d) + o.variance*o.variance
	}
	return f
}

func dot64(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func to64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// trace returns tr Sigma.
func (w *wideStream) trace() float64 {
	var s float64
	for _, l := range w.lambda {
		s += l
	}
	for _, o := range w.outliers {
		s += o.variance
	}
	return s
}

// gaussQuantMoments returns E[e^2] and E[e^4] of the quantization error
// e = y - Q(y) for y ~ N(mean, sd^2) and the b-bit uniform midrise quantizer
// over [-clip, clip] (cells of width 2 clip / 2^b, the outer ones extended
// to infinity, each reconstructed at its centre). Per cell [lo, hi) with
// reconstruction r, write y = mean + sd z, mu = mean - r, z in [a, b]:
// e = sd z + mu, and E[e^p; cell] = sum_q C(p,q) sd^q mu^(p-q) M_q with the
// truncated normal moments M_q = int_a^b z^q phi(z) dz:
// M_0 = Phi(b) - Phi(a), M_1 = phi(a) - phi(b),
// M_q = (q-1) M_(q-2) + a^(q-1) phi(a) - b^(q-1) phi(b) (by parts).
func gaussQuantMoments(mean, sd, clip float64, b int) (m2, m4 float64) {
	levels := 1 << b
	step := 2 * clip / float64(levels)
	// zpow returns z^p phi(z), 0 at infinity.
	zpow := func(z float64, p int) float64 {
		if math.IsInf(z, 0) {
			return 0
		}
		return math.Pow(z, float64(p)) * math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
	}
	cdf := func(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }
	for j := 0; j < levels; j++ {
		lo, hi := -clip+float64(j)*step, -clip+float64(j+1)*step
		if j == 0 {
			lo = math.Inf(-1)
		}
		if j == levels-1 {
			hi = math.Inf(1)
		}
		r := -clip + (float64(j)+0.5)*step
		a, bb := (lo-mean)/sd, (hi-mean)/sd
		var m [5]float64
		m[0] = cdf(bb) - cdf(a)
		m[1] = zpow(a, 0) - zpow(bb, 0)
		for q := 2; q <= 4; q++ {
			m[q] = float64(q-1)*m[q-2] + zpow(a, q-1) - zpow(bb, q-1)
		}
		mu := mean - r
		m2 += sd*sd*m[2] + 2*sd*mu*m[1] + mu*mu*m[0]
		m4 += math.Pow(sd, 4)*m[4] + 4*math.Pow(sd, 3)*mu*m[3] + 6*sd*sd*mu*mu*m[2] +
			4*sd*math.Pow(mu, 3)*m[1] + math.Pow(mu, 4)*m[0]
	}
	return m2, m4
}

// TestGaussQuantMomentsHelper checks the theory helper itself: at 1 bit
// (levels +-clip/2) E[e^2] = E y^2 - clip E|y| + clip^2/4 in closed form for
// y ~ N(0, sd^2), and E[e^4] against a midpoint-rule integral over +-12 sd
// with step sd/2000 (e jumps from +step/2 to -step/2 at cell boundaries,
// so e^2 and e^4 are continuous and piecewise smooth: the rule's error is
// O(h^2), about 1e-8 relative here, well inside 1e-6).
func TestGaussQuantMomentsHelper(t *testing.T) {
	sd, clip := 1.3, 2.1
	m2, _ := gaussQuantMoments(0, sd, clip, 1)
	want2 := sd*sd - clip*sd*math.Sqrt(2/math.Pi) + clip*clip/4
	if math.Abs(m2-want2) > 1e-12 {
		t.Fatalf("1-bit E[e^2] = %v, want %v", m2, want2)
	}
	for _, b := range []int{1, 3} {
		mean := 0.4
		m2, m4 := gaussQuantMoments(mean, sd, clip, b)
		step := 2 * clip / float64(int(1)<<b)
		var i2, i4 float64
		h := sd / 2000
		for y := mean - 12*sd + h/2; y < mean+12*sd; y += h {
			j := math.Floor((y + clip) / step)
			j = math.Max(0, math.Min(j, float64(int(1)<<b)-1))
			e := y - (-clip + (j+0.5)*step)
			p := math.Exp(-(y-mean)*(y-mean)/(2*sd*sd)) / (sd * math.Sqrt(2*math.Pi)) * h
			i2 += e * e * p
			i4 += e * e * e * e * p
		}
		if math.Abs(m2-i2) > 1e-6*i2 || math.Abs(m4-i4) > 1e-6*i4 {
			t.Fatalf("%d bits: moments %v %v, integral %v %v", b, m2, m4, i2, i4)
		}
	}
}
