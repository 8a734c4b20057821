// Package kernels is the compute core of the forward pass: matrix-vector
// products over every weight type Seam reads (f32, f16, bf16, GGML Q8_0, Q4_0,
// Q4_K, Q6_K and llama2.c's group-quantized Q8G), and the small per-token
// vector operations around them.
//
// # Determinism
//
// Every dot product follows one summation order, fixed by its length alone
// (see Dot), and each output of MatVec is computed whole by one goroutine.
// Results are therefore the same bits whatever the thread count, wherever the
// data lies in memory, and whichever code runs: the AVX2 and AVX-512 kernels
// keep the same 32 partial sums in the same lanes and fold them in the same
// tree as the pure-Go code, and round each product before adding it (no fused
// multiply-add, which Go cannot express for float32 without double rounding).
// Dequantized weights are computed with at most one rounding, identically in
// every path, so MatVec's row r equals Dot(DequantRow(row r), x) exactly.
//
// # Speed
//
// On amd64 the kernels are Go assembly selected at start-up with
// golang.org/x/sys/cpu: AVX-512 (F and BW) when present, else AVX2 with F16C,
// else pure Go. The quantized kernels read the blocks directly (no dequantized
// copy of the row). Build with -tags purego to use the pure-Go code anywhere;
// other architectures always do. MatVec splits rows across a persistent pool
// of goroutines when the matrix is large enough to gain from it.
package kernels
