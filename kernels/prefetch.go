package kernels

// The amd64 integer-dot row kernels' software prefetches (ROW_PREFETCH and
// START_PREFETCH in intdot_amd64.h). The portable kernels have none, and
// on other platforms these are unused.

// rowPrefetch is how far ahead of the row it starts, in bytes, each
// integer-dot row kernel asks for a row of weights (ROW_PREFETCH); 0 asks
// for nothing. A decode's matrices come from memory, and these kernels do
// enough arithmetic per byte that the core does not look far enough ahead
// to keep its reads flowing on its own, least of all when both cores read
// at once and each waits longer for memory: Q4_0 matrices of 2048x768 read
// back to back on two threads gave 28.6-31.6 GB/s without it and 32.9-35.3
// with it (f32 rows of the same bytes: 49.5). In whole decodes of the
// stories110M shape, each token computed with and without it in turn
// (2026-12-04), of distances from 2048 to 24576 bytes 6144-12288 did
// best, within 1 % of each other, and PREFETCHT1 (into L2) matched
// PREFETCHT0. The f32 row kernel is
// slower with it (0.93-0.94x) and has none. A variable so that
// BenchmarkRowPrefetch can compare; docs/performance.md has the figures.
var rowPrefetch int64 = 8192

// startPrefetch is how many bytes of its rows each integer-dot row kernel
// asks for at once when it starts (START_PREFETCH), at most all of them;
// 0 asks for nothing. On two threads the helper's half of every decode
// product starts where no prefetcher has been yet. On top of rowPrefetch it
// made whole two-thread decodes 1-8 % faster and one-thread decodes 1-2 %
// (2026-12-04).
var startPrefetch int64 = 8192
