package entropy

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchStreams returns 16-symbol geometric tables (one per position) and
// 64 streams of the given length drawn from them.
func benchStreams(length int) ([]*Table, [][]int) {
	rng := rand.New(rand.NewPCG(20, 20))
	tables := make([]*Table, 16)
	for i := range tables {
		tables[i] = geometric(16, 0.5+0.03*float64(i), 15)
	}
	streams := make([][]int, 64)
	for s := range streams {
		streams[s] = make([]int, length)
		for i := range streams[s] {
			streams[s][i] = draw(rng, tables[i%len(tables)])
		}
	}
	return tables, streams
}

func BenchmarkEncode(b *testing.B) {
	for _, length := range []int{64, 1024} {
		b.Run(fmt.Sprintf("stream=%d", length), func(b *testing.B) {
			tables, streams := benchStreams(length)
			var e Encoder
			dst := make([]byte, 0, 4096)
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				syms := streams[k%len(streams)]
				k++
				for i, s := range syms {
					e.Encode(tables[i&15], s)
				}
				var err error
				if dst, err = e.Finish(dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*length), "ns/sym")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, length := range []int{64, 1024} {
		b.Run(fmt.Sprintf("stream=%d", length), func(b *testing.B) {
			tables, streams := benchStreams(length)
			coded := make([][]byte, len(streams))
			for i, s := range streams {
				coded[i] = encode(b, tables, s)
			}
			var d Decoder
			b.ReportAllocs()
			k := 0
			sum := 0
			for b.Loop() {
				src := coded[k%len(coded)]
				k++
				d.Reset(src)
				for i := range length {
					sum += d.Decode(tables[i&15])
				}
				if err := d.Finish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*length), "ns/sym")
			_ = sum
		})
	}
}
