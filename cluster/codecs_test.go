package cluster

import (
	"math/rand/v2"
	"testing"

	"github.com/seamlm/seam/codec"
)

// TestCodecInfosTimeTheCodec: each codec with a recorded KL is described
// with its wire identity, its mean bytes rounded up, its KL and its compute
// per token timed on this machine (all four figures measured, none zero);
// a codec without a recorded KL is left out.
func TestCodecInfosTimeTheCodec(t *testing.T) {
	const n, d = 600, 32
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * float64(1+i%d) / d)
	}
	fit := func(opts codec.FitOptions, kl float64) *codec.Codec {
		c, err := codec.Fit(x, n, d, opts)
		if err != nil {
			t.Fatal(err)
		}
		if kl > 0 {
			if err := c.SetHeldoutKL(kl); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	byBoundary := map[int]*codec.Codec{
		1: fit(codec.FitOptions{Bytes: 12}, 0.01),
		2: fit(codec.FitOptions{Bytes: 12, Holdout: 0.2, Entropy: true, Trellis: true}, 0.02),
		3: fit(codec.FitOptions{Bytes: 12}, 0), // no KL: not a candidate
	}
	infos, err := CodecInfos(byBoundary)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("%d codecs described, want the 2 with a recorded KL", len(infos))
	}
	for b, want := range map[int]float64{1: 0.01, 2: 0.02} {
		ci, c := infos[b], byBoundary[b]
		t.Logf("boundary %d: %+v", b, ci)
		if ci.Digest.Digest != c.Digest() || ci.Digest.Boundary != uint32(b) || ci.KL != want {
			t.Fatalf("boundary %d: %+v", b, ci)
		}
		if mb := c.MeanPayloadBytes(); float64(ci.BytesPerToken) < mb || float64(ci.BytesPerToken) >= mb+1 {
			t.Fatalf("boundary %d: %d bytes per token for a mean of %.3f", b, ci.BytesPerToken, mb)
		}
		if ci.EncodeStep <= 0 || ci.DecodeStep <= 0 || ci.EncodePrefill <= 0 || ci.DecodePrefill <= 0 {
			t.Fatalf("boundary %d: compute not measured: %+v", b, ci)
		}
	}
}
