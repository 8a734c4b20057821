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
func TestFitGoldenDigests(t *testing.T) {
	const n, d = 400, 48
	x := goldenInput(n, d)
	for _, g := range []struct {
		name string
		opts FitOptions
		want string
	}{
		{"20 bytes", FitOptions{Bytes: 20, Holdout: 0.25}, "48b7702ea6bfea1ad3c5b2b54139a2dc4fa05a7baf2bb57ddef4a2940eab2654"},
		{"20 bytes with gain", FitOptions{Bytes: 20, Holdout: 0.25, Gain: true}, "f69f409c837fe99091545d489347641d833ef30b2a33c1bde07a6a3d0ae23618"},
		{"rank 7", FitOptions{Rank: 7, Holdout: 0.1}, "6ef19977a4b3065ad688b7dfe778e937c6cbc896c30f6cf99fb15d4a793eb443"},
		{"40 bytes", FitOptions{Bytes: 40, Holdout: 0.2}, "c443cec2ed0b81d6381216d696ab021e38a855608af3091281b8bd109f87d44d"},
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
