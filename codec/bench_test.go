package codec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// syntheticCodec builds a codec of width d with k random unit components at
// b bits each (clips 3), for throughput measurements.
func syntheticCodec(b *testing.B, d, k int, bits uint8) (*Codec, []float32) {
	b.Helper()
	rng := rand.New(rand.NewPCG(uint64(d), uint64(k)))
	comps := make([]float32, k*d)
	for i := 0; i < k; i++ {
		row := comps[i*d : (i+1)*d]
		var n2 float64
		for j := range row {
			v := rng.NormFloat64()
			row[j] = float32(v)
			n2 += v * v
		}
		inv := 1 / math.Sqrt(n2)
		for j := range row {
			row[j] = float32(float64(row[j]) * inv)
		}
	}
	bs := make([]uint8, k)
	clips := make([]float32, k)
	for i := range bs {
		bs[i], clips[i] = bits, 3
	}
	mean := make([]float32, d)
	x := make([]float32, d)
	for j := range x {
		mean[j] = float32(rng.NormFloat64())
		x[j] = mean[j] + float32(rng.NormFloat64())
	}
	c, err := New(Params{Mean: mean, Components: comps, Bits: bs, Clips: clips})
	if err != nil {
		b.Fatal(err)
	}
	return c, x
}

var benchShapes = []struct {
	d, k int
	bits uint8
}{
	{4096, 512, 4},
	{64, 64, 4},
}

func BenchmarkEncode(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(fmt.Sprintf("d%d_k%d_b%d", s.d, s.k, s.bits), func(b *testing.B) {
			c, x := syntheticCodec(b, s.d, s.k, s.bits)
			e := c.NewEncoder()
			p := make([]byte, c.PayloadBytes())
			b.SetBytes(int64(4 * s.d))
			b.ReportAllocs()
			for b.Loop() {
				if err := e.Encode(p, x); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(fmt.Sprintf("d%d_k%d_b%d", s.d, s.k, s.bits), func(b *testing.B) {
			c, x := syntheticCodec(b, s.d, s.k, s.bits)
			p := make([]byte, c.PayloadBytes())
			if err := c.Encode(p, x); err != nil {
				b.Fatal(err)
			}
			out := make([]float32, s.d)
			b.SetBytes(int64(4 * s.d))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Decode(out, p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// frameCodecs fits, on the same width-1024 data, a version-1 codec, a
// version-2 one with fixed bits, an entropy-coded one and a trellis-coded
// one, all at 256 bytes a token.
func frameCodecs(b *testing.B) (map[string]*Codec, []float32) {
	b.Helper()
	const n, d = 3000, 1024
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, n*d)
	lat := make([]float64, 64)
	mix := make([]float64, 64*d)
	for i := range mix {
		mix[i] = rng.NormFloat64()
	}
	for r := 0; r < n; r++ {
		for f := range lat {
			lat[f] = rng.NormFloat64() / float64(1+f/8)
		}
		for j := 0; j < d; j++ {
			v := 0.3 * rng.NormFloat64()
			for f := range lat {
				v += lat[f] * mix[f*d+j]
			}
			x[r*d+j] = float32(v)
		}
	}
	out := map[string]*Codec{}
	for name, o := range map[string]FitOptions{
		"v1":       {Bytes: 256, version1: true},
		"v2-fixed": {Bytes: 256},
		"v2-ec":    {Bytes: 256, Entropy: true, Holdout: 0.1},
		"v2-tcq":   {Bytes: 256, Entropy: true, Trellis: true, Holdout: 0.1},
	} {
		c, err := Fit(x, n, d, o)
		if err != nil {
			b.Fatal(err)
		}
		out[name] = c
	}
	return out, x
}

// BenchmarkFrame encodes and decodes frames of 1 and 128 tokens at width
// 1024: version 1 projects token by token, version 2 one matrix product per
// frame. The metric is µs per token, encode and decode together.
func BenchmarkFrame(b *testing.B) {
	codecs, x := frameCodecs(b)
	for _, name := range []string{"v1", "v2-fixed", "v2-ec", "v2-tcq"} {
		c := codecs[name]
		for _, tokens := range []int{1, 128} {
			b.Run(fmt.Sprintf("%s/tokens%d", name, tokens), func(b *testing.B) {
				xs := x[:tokens*c.Width()]
				out := make([]float32, len(xs))
				var buf []byte
				b.ReportAllocs()
				for b.Loop() {
					var err error
					if buf, err = c.AppendTokens(buf[:0], xs); err != nil {
						b.Fatal(err)
					}
					if err := c.DecodeTokens(out, buf); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(b.Elapsed().Seconds()*1e6/float64(b.N*tokens), "µs/token")
			})
		}
	}
}
