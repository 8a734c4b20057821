//go:build !amd64 || purego

package kernels

// spinPause delays a polling loop by about n iterations (the compiler keeps
// an empty loop).
func spinPause(n int) {
	for i := 0; i < n; i++ {
	}
}
