// Package kernels is the compute core of the forward pass: matrix products
// over every weight type Seam reads (f32, f16, bf16, GGML Q8_0, Q4_0, Q4_K,
// Q6_K and llama2.c's group-quantized Q8G), for one vector (MatVec), a batch
// (MatMul) or several matrices sharing an input (MatMuls), and the small
// per-token vector operations around them.
//
// # Determinism
//
// Every product follows one summation order fixed by its shape: for the
// float types the order of Dot (dot.go), for the quantized types the
// integer-dot order (intdot.go), in which the input is quantized to int8
// blocks once and multiplied by the weight codes exactly in integers. Each
// output is computed whole by one goroutine, batches use the same lanes as
// single vectors, and the AVX2, AVX-512 and pure-Go code compute the same
// operations in the same order, rounding each product before adding it (no
// fused multiply-add). Results are therefore the same bits whatever the
// thread count, the batch size, the memory layout or the instruction set.
// docs/kernels.md states the orders and what is and is not identical across
// machines.
//
// # Speed
//
// On amd64 the kernels are Go assembly selected at start-up with
// golang.org/x/sys/cpu: AVX-512 (with VNNI for the integer dot products)
// when present, else AVX2, else pure Go. SEAM_SIMD=none|avx2|avx512 caps the
// level; the build tag purego removes the assembly; other architectures
// always run pure Go. Products split rows across a persistent pool of
// goroutines when the matrix is large enough to gain from it, and batches
// use register tiles over several rows and vectors (gemm.go).
package kernels
