package kernels

import "runtime"

// InstructionSet names the SIMD code path the kernels chose at start-up on
// this machine, for `seam version` and benchmark reports.
func InstructionSet() string {
	switch simdLevel {
	case simdNone:
		return runtime.GOARCH + " generic (pure Go)"
	case simdAVX2:
		return "amd64 AVX2 (with FMA, F16C)"
	default:
		return "amd64 AVX-512 (F, BW)"
	}
}
