package codec

import (
	"encoding/hex"
	"math/rand/v2"
	"testing"
)

// goldenInput is a fixed synthetic capture built with integer arithmetic and
// explicitly rounded float64 products only, so it is the same bits on every
// machine and compiler (no math library calls, no fusable multiply-adds):
// six latent factors of decreasing scale mixed into d channels, plus small
// noise and a per-channel offset.
func goldenInput(n, d int) []float32 {
	rng := rand.New(rand.NewPCG(2026, 14))
	uniform := func() float64 { return float64(int64(rng.Uint64()>>11)-(1<<52)) / (1 << 52) } // [-1, 1)
	const k = 6
	mix := make([]float64, k*d)
	for i := range mix {
		mix[i] = uniform()
	}
	offset := make([]float64, d)
	for j := range offset {
		offset[j] = float64(uniform() * 3)
	}
	out := make([]float32, 0, n*d)
	lat := make([]float64, k)
	for range n {
		for f := range lat {
			lat[f] = float64(uniform() / float64(int(1)<<f))
		}
		for j := range d {
			v := offset[j]
			for f := range lat {
				v += float64(lat[f] * mix[f*d+j])
			}
			v += float64(uniform() * 0.01)
			out = append(out, float32(v))
		}
	}
	return out
}

// TestFitGoldenDigests pins the digests of codecs fitted on goldenInput:
// docs/codec.md promises that a fit is byte-identical on every machine, and
// this checks it. Any change to the fit's arithmetic (a fused multiply-add
// in the covariance, a different summation order, another eigensolver step)
// changes a digest and fails here. If the fit changes on purpose, update the
// digests and say so in the codec's version notes.
// goldenWeights stands for a measured sensitivity: direction p weighs
// 1 + (p mod 3), so the allocation visibly differs from the MSE fit's.
func goldenWeights(b Basis) ([]float64, error) {
	w := make([]float64, len(b.Variances))
	for p := range w {
		w[p] = float64(1 + p%3)
	}
	return w, nil
}

// goldenTokenSensitivity is a made-up sensitivity per row of goldenInput
// for token classes: 1 + 4 (x0 - mean x0)^2 from the row's first value, in
// float64 products (the same on every machine), and 0 (not measured) for
// every tenth row.
func goldenTokenSensitivity(x []float32, n, d int) []float64 {
	var mean float64
	for r := 0; r < n; r++ {
		mean += float64(x[r*d])
	}
	mean /= float64(n)
	out := make([]float64, n)
	for r := range out {
		if r%10 == 9 {
			continue
		}
		u := float64(x[r*d]) - mean
		out[r] = 1 + float64(4*float64(u*u))
	}
	return out
}

func TestFitGoldenDigests(t *testing.T) {
	const n, d = 400, 48
	x := goldenInput(n, d)
	for _, g := range []struct {
		name string
		opts FitOptions
		want string
	}{
		// Version 1: the digests pinned before version 2 existed, unchanged.
		{"v1 20 bytes", FitOptions{Bytes: 20, Holdout: 0.25, version1: true}, "48b7702ea6bfea1ad3c5b2b54139a2dc4fa05a7baf2bb57ddef4a2940eab2654"},
		{"v1 20 bytes with gain", FitOptions{Bytes: 20, Holdout: 0.25, Gain: true}, "f69f409c837fe99091545d489347641d833ef30b2a33c1bde07a6a3d0ae23618"},
		{"v1 rank 7", FitOptions{Rank: 7, Holdout: 0.1, version1: true}, "6ef19977a4b3065ad688b7dfe778e937c6cbc896c30f6cf99fb15d4a793eb443"},
		{"v1 40 bytes", FitOptions{Bytes: 40, Holdout: 0.2, version1: true}, "c443cec2ed0b81d6381216d696ab021e38a855608af3091281b8bd109f87d44d"},
		// Version 2 (the kernels' float order; CI also runs these with
		// SEAM_SIMD=none, so the pure-Go order gives the same files).
		{"20 bytes", FitOptions{Bytes: 20, Holdout: 0.25}, "c8bfd69f83cabb395558267684fb563ba49da39532286da3885f869140546642"},
		{"rank 7", FitOptions{Rank: 7, Holdout: 0.1}, "09359b3b53e9a5aba512ef6d2da67fcdea577aeef9b67e3f2551abac52930278"},
		{"40 bytes", FitOptions{Bytes: 40, Holdout: 0.2}, "dab602593f6bed0c18cbc2350071595102bbddc4818f5f032087c9aa2feb3788"},
		{"entropy 12 bytes", FitOptions{Bytes: 12, Holdout: 0.2, Entropy: true}, "1fea105269c7d5a4881d6bb68b9b88a5e743278cbd6f1e546c4fee6e4652e254"},
		{"entropy 12 bytes, weighted", FitOptions{Bytes: 12, Holdout: 0.2, Entropy: true, Sensitivity: goldenWeights}, "2b39a602256f84cd1c82aa0281d848312856b18f2a220b405dbe460854e7d854"},
		{"20 bytes, weighted", FitOptions{Bytes: 20, Holdout: 0.2, Sensitivity: goldenWeights}, "2112f23948b922b724f3ec6c5c0a6837d6ce31d15a223871c2f7d8267947a805"},
		// Trellis-coded (format version 2, flag bit 3).
		{"trellis 12 bytes", FitOptions{Bytes: 12, Holdout: 0.2, Entropy: true, Trellis: true}, "8ac23e777d6de7f5744821964d5fe7eecd887e9648ffa0013a05807fc0b80fa1"},
		{"trellis 12 bytes, weighted", FitOptions{Bytes: 12, Holdout: 0.2, Entropy: true, Trellis: true, Sensitivity: goldenWeights}, "74a25f997355d4592195a229e6fc2da9a18be920f7f24cc01f9c5fbfa3774663"},
		// Trellis-coded with token classes (flag bit 4).
		{"trellis 12 bytes, token classes", FitOptions{Bytes: 12, Holdout: 0.2, Entropy: true, Trellis: true, TokenSensitivity: goldenTokenSensitivity(x, n, d)}, "4311a02e8e1555f0da3ad71839aa10780ec3cc0f9383ca546b1b3b75814fb509"},
	} {
		c, err := Fit(x, n, d, g.opts)
		if err != nil {
			t.Fatal(err)
		}
		dg := c.Digest()
		if got := hex.EncodeToString(dg[:]); got != g.want {
			t.Errorf("%s: digest %s, pinned %s", g.name, got, g.want)
		}
	}
}
