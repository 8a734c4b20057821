//go:build !unix

package bench

// cpuTime is not measured on this platform; the CPU columns read 0.
func cpuTime() int64 { return 0 }
