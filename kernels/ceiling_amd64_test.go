//go:build amd64 && !purego

package kernels

import (
	"testing"

	"github.com/seamlm/seam/tensor"
)

// BenchmarkCeiling measures what one core can do at most, next to what the
// batched kernels do, so that a batched decode's speed can be read against
// the machine's arithmetic rather than against one stream:
//
//   - vnni-peak, fma-peak: register-only multiply-accumulates (peak_amd64.s),
//     in GMAC/s (int8 products for VNNI, float32 fused multiply-adds for FMA);
//   - int-tile: the integer GEMM tile (16 rows x 4 vectors, 768 columns)
//     on weights and vectors in L1;
//   - f32-tile: the AVX-512 float tile (2 rows x 4 vectors, 768 columns) in L1;
//   - q8_0-stream: a 16-vector step's work per 16 rows of a Q8_0 matrix
//     larger than any cache (65536 x 768, 53 MB): the rows' interleave
//     (prefetching the next 16) and 4 tiles, as gemmIntRows runs them; the
//     GMAC/s against int-tile shows what reading and unpacking the weights
//     costs.
//
// One goroutine: multiply by the cores for a machine's figure. Each
// sub-benchmark skips, saying so, on a CPU without its instructions.
func BenchmarkCeiling(b *testing.B) {
	b.Run("vnni-peak", func(b *testing.B) {
		if !hasVNNI {
			b.Skip("no AVX-512 VNNI on this CPU")
		}
		peakVNNI(b.N)
		b.ReportMetric(float64(b.N)*12*64/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	b.Run("fma-peak", func(b *testing.B) {
		if !hasAVX512 {
			b.Skip("no AVX-512 on this CPU")
		}
		peakFMA(b.N)
		b.ReportMetric(float64(b.N)*12*16/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	const cols, units = 768, 768 / 32
	b.Run("int-tile", func(b *testing.B) {
		if !gemmIntOK() {
			b.Skip("the integer tile needs AVX-512 VNNI")
		}
		w := make([]byte, units*unitStride(32))
		xp := make([]byte, units*gemmIntVecs*gemmPackEntry)
		out := make([]float32, gemmIntTile)
		var mins [gemmIntTile]float32
		b.ResetTimer()
		for range b.N {
			gemmInt(w, 32, units, xp, out, gemmIntRows, gemmIntRows, &mins)
		}
		b.ReportMetric(float64(b.N)*gemmIntTile*cols/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	b.Run("f32-tile", func(b *testing.B) {
		if !gemmF32SmallOK() {
			b.Skip("the small float tile needs AVX-512")
		}
		rows := make([]float32, 2*cols)
		x := make([]float32, gemmSmallGroup*cols)
		var out [gemmGroup]float32
		b.ResetTimer()
		for range b.N {
			gemmF32R2(rows, cols, x, cols, &out, nil)
		}
		b.ReportMetric(float64(b.N)*2*gemmSmallGroup*cols/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
	b.Run("q8_0-stream", func(b *testing.B) {
		if !gemmIntOK() || !fusedInterleaveOK(tensor.Q8_0) {
			b.Skip("the integer tile and its fused interleave need AVX-512 VNNI")
		}
		const rows, groups = 65536, 4
		w := benchTensor(tensor.Q8_0, rows, cols)
		il := make([]byte, units*unitStride(32))
		xp := make([]byte, groups*units*gemmIntVecs*gemmPackEntry)
		out := make([]float32, groups*gemmIntVecs*rows)
		var mins [gemmIntTile]float32
		b.ResetTimer()
		r := 0
		for range b.N {
			if !interleaveFused(w, r, il) {
				b.Fatal("fused interleave refused")
			}
			for g := range groups {
				gemmInt(il, 32, units, xp[g*units*gemmIntVecs*gemmPackEntry:], out[g*gemmIntVecs*rows+r:], rows, gemmIntRows, &mins)
			}
			if r += gemmIntRows; r == rows {
				r = 0
			}
		}
		b.ReportMetric(float64(b.N)*groups*gemmIntTile*cols/b.Elapsed().Seconds()/1e9, "GMAC/s")
	})
}
