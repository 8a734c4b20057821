package wire

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// Throughput in float32 bytes (tokens x width x 4) per second.
func BenchmarkEncodings(b *testing.B) {
	const width = 4096
	rng := rand.New(rand.NewPCG(3, 4))
	for _, e := range []Encoding{F32, F16, Q8, Q5, Q4} {
		for _, tokens := range []int{1, 64} {
			x := make([]float32, tokens*width)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			n, _ := e.PayloadSize(tokens, width)
			buf := make([]byte, n)
			if err := e.Encode(buf, x, tokens, width); err != nil { // decode needs real data even if encode is filtered out
				b.Fatal(err)
			}
			y := make([]float32, len(x))
			b.Run(fmt.Sprintf("encode/%s/tokens=%d", e.Name(), tokens), func(b *testing.B) {
				b.SetBytes(int64(4 * len(x)))
				for b.Loop() {
					if err := e.Encode(buf, x, tokens, width); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("decode/%s/tokens=%d", e.Name(), tokens), func(b *testing.B) {
				b.SetBytes(int64(4 * len(x)))
				for b.Loop() {
					if err := e.Decode(y, buf, tokens, width); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// A full frame write + read + decode through memory, width 4096.
func BenchmarkFrameRoundTrip(b *testing.B) {
	const width = 4096
	for _, e := range []Encoding{F32, Q8} {
		for _, tokens := range []int{1, 64} {
			x := make([]float32, tokens*width)
			for i := range x {
				x[i] = float32(i%101) / 50
			}
			b.Run(fmt.Sprintf("%s/tokens=%d", e.Name(), tokens), func(b *testing.B) {
				var buf bytes.Buffer
				w, r := NewFramer(&buf, nil), NewFramer(nil, &buf)
				y := make([]float32, len(x))
				b.SetBytes(int64(4 * len(x)))
				for b.Loop() {
					buf.Reset()
					if err := w.WriteActivations(KindPrefill, 0, Meta{Session: 1}, e, x, tokens, width); err != nil {
						b.Fatal(err)
					}
					f, err := r.ReadFrame()
					if err != nil {
						b.Fatal(err)
					}
					if y, err = f.Activations(y); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
