package codec

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// TestWideStreamTheory fits a width-1024 stream with a steeply decaying
// spectrum and outlier channels at a modest budget, and checks the held-out
// MSE against theory computed from the true distribution.
//
// Theory. Let m be the codec's mean, u_i its kept unit rows, mu and Sigma the
// true mean and covariance, P the projector onto the dropped subspace. For a
// token x independent of the fit, y_i = u_i.(x - m) and
// x - decode(encode(x)) = P(x - m) + sum_i (y_i - Q_i(y_i)) u_i, so its
// squared norm is E = D + sum_i e_i with D = ||P(x - m)||^2 and
// e_i = (y_i - Q_i(y_i))^2, and
//
//	E[D]   = tr Sigma + ||mu - m||^2 - sum_i (u_i^T Sigma u_i + (u_i.(mu - m))^2)
//	E[e_i] = closed form per quantizer cell, y_i ~ N(u_i.(mu - m), u_i^T Sigma u_i)
//
// (gaussQuantMoments). The stored MSE estimates (E[D] + sum E[e_i]) / d.
//
// Tolerance. The estimate is a mean over N independent tokens, off by
// sampling error sd(E)/sqrt(N), and sd(E) <= sd(D) + sd(sum_i e_i) (triangle
// inequality for standard deviations). Exact Gaussian values:
// Var D = 2 tr((P Sigma P)^2) + 4 g^T Sigma g with g = P(mu - m), and
// Var e_i = E[e_i^2] - E[e_i]^2 from the same closed form. The coefficients
// y_i, y_l are jointly Gaussian with correlation rho_il =
// u_i^T Sigma u_l / (s_i s_l) (small, not zero: the fitted basis is not
// exactly the true one), and by Gebelein's theorem no functions of them
// correlate more than |rho_il|, so Var(sum e_i) <= sum_il |rho_il| sd(e_i)
// sd(e_l). (The per-token error is skewed by rare clipping events, so a
// standard error estimated from the tokens themselves would understate it;
// clipping is also why 800 tokens pin the MSE down only to about +-20%.) The
// check allows four such standard errors, on the 800 held-out rows of the
// fit (the stored value) and on 20 000 fresh tokens (about +-4%); float32
// rounding adds about 1e-6 relative, far inside either.
func TestWideStreamTheory(t *testing.T) {
	if testing.Short() {
		t.Skip("fits a width-1024 codec (about 3 s)")
	}
	rng := rand.New(rand.NewPCG(1024, 4000))
	const d, n, nh, fresh = 1024, 4000, 800, 20000
	w := newWideStream(rng, d)
	samples := w.sample(rng, n)
	c, err := Fit(samples, n, d, FitOptions{Bytes: 24, Holdout: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.FitSamples != n-nh || st.HoldoutSamples != nh || !st.HasMSE {
		t.Fatalf("stats %+v: want %d fit and %d held-out samples with MSE", st, n-nh, nh)
	}
	k := c.Kept()
	if k == 0 || k > d/8 {
		t.Fatalf("kept %d of %d components; a 24-byte budget must drop most", k, d)
	}
	used := 0
	for _, b := range c.Bits() {
		used += int(b)
	}
	if c.PayloadBytes() > 24 || used <= 24*8-8 {
		t.Fatalf("payload %d bytes using %d bits of a 192-bit budget", c.PayloadBytes(), used)
	}

	mean, comps, clips, bits := c.Mean(), c.Components(), c.Clips(), c.Bits()
	dmu := make([]float64, d) // mu - m
	for j := range dmu {
		dmu[j] = w.mu[j] - float64(mean[j])
	}
	us := make([][]float64, k)
	sus := make([][]float64, k) // Sigma u_i
	g := append([]float64(nil), dmu...)
	dropped := w.trace() + dot64(dmu, dmu)
	trPSPS := w.frobenius2()
	var quant float64
	s2s := make([]float64, k)
	sds := make([]float64, k)
	for i := 0; i < k; i++ {
		us[i] = to64(comps[i*d : (i+1)*d])
		sus[i] = w.apply(us[i])
		s2, delta := dot64(us[i], sus[i]), dot64(us[i], dmu)
		s2s[i] = s2
		dropped -= s2 + delta*delta
		trPSPS -= 2 * dot64(sus[i], sus[i])
		for j := range g {
			g[j] -= delta * us[i][j]
		}
		m2, m4 := gaussQuantMoments(delta, math.Sqrt(s2), float64(clips[i]), int(bits[i]))
		quant += m2
		sds[i] = math.Sqrt(m4 - m2*m2)
	}
	var varQ, maxRho float64
	for i := 0; i < k; i++ {
		for l := 0; l < k; l++ {
			v := dot64(us[i], sus[l])
			trPSPS += v * v
			rho := math.Abs(v) / math.Sqrt(s2s[i]*s2s[l])
			if i != l {
				maxRho = math.Max(maxRho, rho)
			}
			varQ += rho * sds[i] * sds[l]
		}
	}
	varD := 2*trPSPS + 4*dot64(g, w.apply(g))
	sdBound := math.Sqrt(varD) + math.Sqrt(varQ)
	theory := (dropped + quant) / d

	perToken := func(rows []float32) float64 {
		payload := make([]byte, c.PayloadBytes())
		out := make([]float32, d)
		var sum float64
		for r := 0; r < len(rows)/d; r++ {
			x := rows[r*d : (r+1)*d]
			if err := c.Encode(payload, x); err != nil {
				t.Fatal(err)
			}
			if err := c.Decode(out, payload); err != nil {
				t.Fatal(err)
			}
			var e float64
			for j := range x {
				diff := float64(x[j]) - float64(out[j])
				e += diff * diff
			}
			sum += e
		}
		return sum
	}
	heldSum := perToken(samples[(n-nh)*d:])
	// The stored value is the same sum over the same rows divided by
	// nh*d; only the summation grouping may differ: relative 1e-12 covers
	// 800 rounding steps of 2^-53.
	if got := heldSum / (nh * d); math.Abs(st.HeldoutMSE-got) > 1e-12*got {
		t.Fatalf("stored held-out MSE %v, recomputed %v", st.HeldoutMSE, got)
	}
	freshSum := perToken(w.sample(rng, fresh))
	all := (heldSum + freshSum) / ((nh + fresh) * d)

	t.Logf("k=%d bits=%v, largest correlation between kept coefficients %.3g", k, bits, maxRho)
	t.Logf("theory %.6g per element (dropped %.4g + quantization %.4g per token, sd bound %.3g); stored %.6g; %d tokens %.6g",
		theory, dropped, quant, sdBound, st.HeldoutMSE, nh+fresh, all)
	if tol := 4 * sdBound / math.Sqrt(nh) / d; math.Abs(st.HeldoutMSE-theory) > tol {
		t.Errorf("held-out MSE %v differs from theory %v by more than %v", st.HeldoutMSE, theory, tol)
	}
	if tol := 4 * sdBound / math.Sqrt(nh+fresh) / d; math.Abs(all-theory) > tol {
		t.Errorf("MSE over %d tokens %v differs from theory %v by more than %v", nh+fresh, all, theory, tol)
	}
	if rel := st.HeldoutMSE / st.HeldoutVar; rel > 0.01 {
		t.Errorf("codec loses %.3g of the variance; the spectrum is steep enough for < 1%%", rel)
	}
}

// TestFitDeterministic: two fits of the same data, and a fit of a copy, give
// byte-identical files; the held-out rows (the last ones) affect only the
// stats.
func TestFitDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const d, n = 48, 600
	w := newWideStream(rng, 64)
	full := w.sample(rng, n)
	s := make([]float32, 0, n*d)
	for r := 0; r < n; r++ {
		s = append(s, full[r*64:r*64+d]...)
	}
	for _, opts := range []FitOptions{
		{Bytes: 20, Holdout: 0.25},
		{Bytes: 20, Holdout: 0.25, Gain: true},
		{Rank: 7, Holdout: 0.1},
	} {
		a, err := Fit(s, n, d, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Fit(s, n, d, opts)
		if err != nil {
			t.Fatal(err)
		}
		cp := append([]float32(nil), s...)
		c, err := Fit(cp, n, d, opts)
		if err != nil {
			t.Fatal(err)
		}
		ma := a.Marshal()
		if !bytes.Equal(ma, b.Marshal()) || !bytes.Equal(ma, c.Marshal()) {
			t.Fatalf("%+v: fits of the same data differ", opts)
		}
		if a.Digest() != c.Digest() || a.ShortID() != c.ShortID() {
			t.Fatalf("%+v: digests differ", opts)
		}
		// Perturb the last (held-out) row: only the stats may change.
		cp[len(cp)-1] += 1
		e, err := Fit(cp, n, d, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !equalF32(e.Components(), a.Components()) || !equalF32(e.Mean(), a.Mean()) || !equalF32(e.Clips(), a.Clips()) {
			t.Fatalf("%+v: changing a held-out row changed the fitted codec", opts)
		}
		if e.Stats().HeldoutMSE == a.Stats().HeldoutMSE {
			t.Fatalf("%+v: changing a held-out row did not change the held-out MSE", opts)
		}
		// Perturb a fit row: the codec must change.
		cp[0] += 1
		f, err := Fit(cp, n, d, opts)
		if err != nil {
			t.Fatal(err)
		}
		if equalF32(f.Mean(), a.Mean()) {
			t.Fatalf("%+v: changing a fit row did not change the mean", opts)
		}
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestFitBasisConventions checks the stored basis: orthonormal rows in
// decreasing-variance order, each with its largest-magnitude entry positive.
func TestFitBasisConventions(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const d, n = 64, 2000
	w := newWideStream(rng, d)
	s := w.sample(rng, n)
	c, err := Fit(s, n, d, FitOptions{Rank: d})
	if err != nil {
		t.Fatal(err)
	}
	comps := c.Components()
	prevVar := math.Inf(1)
	mean := c.Mean()
	for i := 0; i < d; i++ {
		u := comps[i*d : (i+1)*d]
		arg := 0
		for j := range u {
			if math.Abs(float64(u[j])) > math.Abs(float64(u[arg])) {
				arg = j
			}
		}
		if u[arg] < 0 {
			t.Fatalf("component %d: largest entry %v is negative", i, u[arg])
		}
		for l := 0; l <= i; l++ {
			var dot float64
			for j := range u {
				dot += float64(u[j]) * float64(comps[l*d+j])
			}
			want := 0.0
			if l == i {
				want = 1
			}
			// float32 rounding of unit vectors: |error| <= d * 2^-24.
			if math.Abs(dot-want) > float64(d)*0x1p-24 {
				t.Fatalf("u_%d . u_%d = %v, want %v", i, l, dot, want)
			}
		}
		// Sample variance of the fit rows along u, computed naively.
		var v float64
		for r := 0; r < n; r++ {
			var y float64
			for j := range u {
				y += float64(u[j]) * (float64(s[r*d+j]) - float64(mean[j]))
			}
			v += y * y
		}
		v /= n - 1
		// Eigenvalues are sorted exactly; the naive recomputation carries
		// relative rounding of order 1e-6 (float32 basis and mean).
		if v > prevVar*(1+1e-5) {
			t.Fatalf("component %d has variance %v above component %d's %v", i, v, i-1, prevVar)
		}
		prevVar = v
	}
}

// TestRankBaseline: --rank K keeps K components at 8 bits. On an
// axis-aligned stream with known per-channel variances the kept components
// are the K largest channels (positive sign), and the held-out MSE is the
// sum of the dropped variances (plus 8-bit quantization noise) over d.
func TestRankBaseline(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	const d, n, K = 12, 5000, 4
	sd := []float64{0.5, 4, 0.1, 3, 1, 0.2, 2.5, 0.3, 0.05, 1.5, 0.7, 0.4}
	top := []int{1, 3, 6, 9} // channels by decreasing sd
	s := make([]float32, n*d)
	for r := 0; r < n; r++ {
		for j := 0; j < d; j++ {
			s[r*d+j] = float32(10 + sd[j]*rng.NormFloat64())
		}
	}
	c, err := Fit(s, n, d, FitOptions{Rank: K, Holdout: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if c.Kept() != K || c.PayloadBytes() != K {
		t.Fatalf("kept %d components in %d bytes, want %d in %d", c.Kept(), c.PayloadBytes(), K, K)
	}
	for i, b := range c.Bits() {
		if b != 8 {
			t.Fatalf("component %d has %d bits, want 8", i, b)
		}
	}
	comps := c.Components()
	for i, ch := range top {
		// Sample covariances mix channels by about sd_a sd_b/(sqrt(n)
		// (sd_a^2 - sd_b^2)) < 0.05 here.
		if u := comps[i*d+ch]; u < 0.99 {
			t.Fatalf("component %d: entry on channel %d is %v, want about +1", i, ch, u)
		}
	}
	var dropped float64
	for j, v := range sd {
		if j != 1 && j != 3 && j != 6 && j != 9 {
			dropped += v * v
		}
	}
	want := dropped / d
	// 8-bit noise on the kept channels is below (8 sd / 256)^2 / 12 each,
	// < 1e-3 per token in total. The dropped error per token is a sum of
	// squares of independent normals with variance 2 sum sd^4 = 2.68, so the
	// mean over 1000 held-out tokens has standard error 0.052 per token;
	// 0.2 per token is four of them.
	got := c.Stats().HeldoutMSE
	if math.Abs(got-want) > 0.2/d {
		t.Fatalf("held-out MSE %v, want %v (dropped variance per element)", got, want)
	}
}

func TestFitRejects(t *testing.T) {
	good := make([]float32, 40)
	for i := range good {
		good[i] = float32(i % 7)
	}
	nan := append([]float32(nil), good...)
	nan[13] = float32(math.NaN())
	cases := []struct {
		name string
		s    []float32
		n, d int
		opts FitOptions
	}{
		{"no mode", good, 10, 4, FitOptions{}},
		{"both modes", good, 10, 4, FitOptions{Bytes: 2, Rank: 2}},
		{"negative bytes", good, 10, 4, FitOptions{Bytes: -1}},
		{"rank above width", good, 10, 4, FitOptions{Rank: 5}},
		{"gain eats budget", good, 10, 4, FitOptions{Bytes: 2, Gain: true}},
		{"length", good, 11, 4, FitOptions{Bytes: 2}},
		{"width 0", good, 10, 0, FitOptions{Bytes: 2}},
		{"too wide", good, 1, MaxFitWidth + 1, FitOptions{Bytes: 2}},
		{"NaN sample", nan, 10, 4, FitOptions{Bytes: 2}},
		{"holdout 1", good, 10, 4, FitOptions{Bytes: 2, Holdout: 1}},
		{"holdout NaN", good, 10, 4, FitOptions{Bytes: 2, Holdout: math.NaN()}},
		{"holdout leaves 1", good, 10, 4, FitOptions{Bytes: 2, Holdout: 0.9}},
	}
	for _, tc := range cases {
		if _, err := Fit(tc.s, tc.n, tc.d, tc.opts); err == nil {
			t.Errorf("%s: Fit succeeded", tc.name)
		}
	}
	// Constant data: nothing has variance, so nothing is kept, and the codec
	// reconstructs the mean from an empty payload.
	flat := make([]float32, 40)
	for i := range flat {
		flat[i] = 3
	}
	c, err := Fit(flat, 10, 4, FitOptions{Bytes: 4, Holdout: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if c.Kept() != 0 || c.PayloadBytes() != 0 || c.Stats().HeldoutMSE != 0 {
		t.Fatalf("constant data: kept %d, payload %d, MSE %v", c.Kept(), c.PayloadBytes(), c.Stats().HeldoutMSE)
	}
}
