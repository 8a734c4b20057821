//go:build amd64 && !purego

package kernels

// peakVNNI runs n rounds of 12 independent 512-bit VPDPBUSD (64 int8
// multiply-accumulates each) on registers; it needs AVX-512 VNNI.
//
//go:noescape
func peakVNNI(n int)

// peakFMA runs n rounds of 12 independent 512-bit VFMADD231PS (16 float32
// fused multiply-adds each) on registers; it needs AVX-512.
//
//go:noescape
func peakFMA(n int)
