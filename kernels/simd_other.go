//go:build !amd64 || purego

package kernels

import (
	"os"

	"github.com/seamlm/seam/tensor"
)

// No SIMD kernels on this platform or build: the pure-Go code computes the
// same orders.
var maxLevel = capLevel(simdNone, os.Getenv(SIMDEnv)) // refuses a bad SEAM_SIMD here too

var simdLevel = simdNone

func dotF32Body(a, b []float32) float32 { return dotGo(a, b) }

type simdRow struct{}

func (simdRow) ok() bool                      { return false }
func (simdRow) dot([]byte, []float32) float32 { return 0 }
func simdRowKernel(tensor.DType) simdRow      { return simdRow{} }

func scaleI8(dst []float32, src []byte, s float32) { scaleI8Go(dst, src, s) }

func q8gFusedOK(*tensor.Tensor) bool { return false }

func dotQ8GFused(*tensor.Tensor, []byte, int, []float32) float32 { panic("unreachable") }

func intLevel() int { return simdNone }

func intRowsSIMD(*tensor.Tensor, int, int, *actQ, int, []float32) bool { return false }

func gemmF32OK() bool { return false }
func gemmIntOK() bool { return false }

func gemmF32([]float32, []float32, int, *[gemmGroup]float32) { panic("unreachable") }

func gemmF32SmallOK() bool { return false }

func fusedInterleaveOK(tensor.DType) bool { return false }

func interleaveFused(*tensor.Tensor, int, []byte) bool { return false }

func gemmF32R2([]float32, int, []float32, int, *[gemmGroup]float32, []float32) {
	panic("unreachable")
}
func gemmInt([]byte, int, int, []byte, []float32, int, int, *[gemmIntTile]float32) {
	panic("unreachable")
}
func q4kMins([]float32, *actQ, int, []float32) { panic("unreachable") }

func quantizeSIMD([]float32, []int8, []float32, []float32, []int32) bool { return false }

func widenHalves([]float32, []byte, bool) int { return 0 }

func axpySIMD([]float32, float32, []float32) int { return 0 }

func expSIMD([]float32, []float32, bool) int { return 0 }

func swigluSIMD([]float32, []float32) int { return 0 }

func f32RowsSIMD(*tensor.Tensor, int, int, []float32, []float32) bool { return false }

func dotRowsSIMD([]float32, []float32, []float32, int) bool  { return false }
func axpyRowsSIMD([]float32, []float32, []float32, int) bool { return false }

func unpackRowSIMD(*tensor.Tensor, int, []byte, []float32) bool { return false }

func interleaveSIMD([]byte, []float32, int, int, []byte) bool { return false }

func rotatePairsSIMD([]float32, []float32, []float32) int { return 0 }

func rotateHalvesSIMD([]float32, []float32, []float32, []float32) int { return 0 }
