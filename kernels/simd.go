package kernels

import "fmt"

// SIMDEnv names the environment variable that caps the instruction set the
// kernels use, read once at start-up: "none" (pure Go), "avx2" or "avx512"
// (the default: the best the CPU has). Results are the same bits at every
// level; the variable exists to test and to measure each path, and tests
// treat the cap as the CPU's limit. Another value stops the program. The
// build tag purego removes the assembly altogether.
const SIMDEnv = "SEAM_SIMD"

// SIMD levels. simdLevel is chosen once at start-up; tests lower it to
// compare the paths. All levels compute the same bits.
const (
	simdNone = iota
	simdAVX2
	simdAVX512
)

var levelNames = [...]string{simdNone: "none", simdAVX2: "avx2", simdAVX512: "avx512"}

// capLevel returns min(best, the level named by env). An unknown name stops
// the program: a setting that changes behaviour is honoured or refused,
// never ignored.
func capLevel(best int, env string) int {
	if env == "" {
		return best
	}
	for l, name := range levelNames {
		if name == env {
			return min(best, l)
		}
	}
	panic(fmt.Sprintf("%s=%q is not one of none, avx2, avx512", SIMDEnv, env))
}

// SIMD names the instruction set the kernels run with: "none" (pure Go),
// "avx2" or "avx512" (with "+vnni" when the integer-dot kernels use it).
func SIMD() string {
	name := levelNames[simdLevel]
	if simdLevel == simdAVX512 && intLevel() == simdAVX512 {
		name += "+vnni"
	}
	return name
}
