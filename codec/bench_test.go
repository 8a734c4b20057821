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
