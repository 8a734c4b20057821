package kernels

import (
	"math"
	"sync"
)

// Activation quantization for the integer-dot kernels (see docs/kernels.md).
//
// A matrix product with Q8_0, Q4_0, Q4_K, Q6_K or (fused) Q8G weights first
// quantizes each input vector once: every block of 32 consecutive values gets
// one float32 scale d and 32 int8 codes, as GGML's Q8_0 does. The kernels
// then multiply weight codes by activation codes in integers, exactly, and
// scale once per block.
//
// The rule, identical in every code path:
//
//	amax = max |x_i| over the block (NaN if any x_i is NaN)
//	amax = 0:               d = 0, every q_i = 0
//	amax not finite:        d = NaN, every q_i = 0 (the products become NaN)
//	otherwise:              d = float32(amax / 127), inv = float32(1 / d);
//	                        if inv is infinite (d underflowed), as amax = 0;
//	                        q_i = clamp(roundHalfEven(float32(x_i * inv)), -127, 127)
//
// and the block sum s = sum q_i (an integer of at most 32*127, exact as a
// float32), used by Q4_K's minimums.

// qBlock is the number of values sharing one activation scale.
const qBlock = 32

// actQ holds n vectors of cols values quantized per the rule above. cols is a
// multiple of 32.
type actQ struct {
	n, cols, nb int       // vectors, values per vector, blocks per vector
	q           []int8    // n*cols codes
	d           []float32 // n*nb scales
	bs          []float32 // n*nb block sums
	// ls[g] = -(the sum of codes 4g .. 4g+3): the int32 lane sums the
	// assembly kernels use to offset unsigned codes (see intdot_vnni_amd64.s).
	ls []int32 // n*cols/4
}

var actQPool sync.Pool // of *actQ

// getActQ returns a pooled actQ sized for n vectors of cols values.
func getActQ(n, cols int) *actQ {
	a, _ := actQPool.Get().(*actQ)
	if a == nil {
		a = new(actQ)
	}
	a.n, a.cols, a.nb = n, cols, cols/qBlock
	a.q = grow(a.q, n*cols)
	a.d = grow(a.d, n*a.nb)
	a.bs = grow(a.bs, n*a.nb)
	a.ls = grow(a.ls, n*cols/4)
	return a
}

func putActQ(a *actQ) { actQPool.Put(a) }

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// quantize fills a from x (a.n vectors of a.cols values).
func (a *actQ) quantize(x []float32) {
	x = x[:a.n*a.cols]
	nb := a.n * a.nb
	if nb*qBlock < quantParallelValues || Threads() == 1 {
		a.quantizeBlocks(x, 0, nb)
		return
	}
	// A prompt's activations: a serial pass took 3 % of a Q4_0 prefill's
	// CPU time with the other core idle (its speed-up, about half that,
	// was not measurable beside this machine's noise: `seam bench prefill
	// --tokens 128` alternated 14 times, Q4_0 and Q8_0 the same within
	// 2 %). Blocks are independent, so how they are split changes no bit.
	parts := min(Threads(), nb)
	Parallel(parts, parts, func(_, i int) {
		a.quantizeBlocks(x, i*nb/parts, (i+1)*nb/parts)
	})
}

// quantParallelValues is the input size from which quantize spreads over
// the threads (about 16 µs of work at 1 ns a value).
const quantParallelValues = 1 << 14

// quantizeBlocks quantizes blocks [b0, b1) of all vectors.
func (a *actQ) quantizeBlocks(x []float32, b0, b1 int) {
	if b0 == b1 {
		return
	}
	if quantizeSIMD(x[b0*qBlock:b1*qBlock], a.q[b0*qBlock:b1*qBlock], a.d[b0:b1], a.bs[b0:b1], a.ls[b0*qBlock/4:b1*qBlock/4]) {
		// The kernel leaves the blocks the rule treats specially to Go,
		// marked with d = -1, which no block of the rule has.
		for b := b0; b < b1; b++ {
			if a.d[b] == -1 {
				a.quantizeOne(x, b)
			}
		}
		return
	}
	for b := b0; b < b1; b++ {
		a.quantizeOne(x, b)
	}
}

// quantizeOne quantizes block b (of all vectors) in Go.
func (a *actQ) quantizeOne(x []float32, b int) {
	q := a.q[b*qBlock : (b+1)*qBlock]
	a.d[b], a.bs[b] = quantizeBlock(q, x[b*qBlock:(b+1)*qBlock])
	ls := a.ls[b*qBlock/4 : (b+1)*qBlock/4]
	for g := range ls {
		ls[g] = -(int32(q[4*g]) + int32(q[4*g+1]) + int32(q[4*g+2]) + int32(q[4*g+3]))
	}
}

// vec returns the codes, scales and block sums of vector t.
func (a *actQ) vec(t int) (q []int8, d, bs []float32) {
	return a.q[t*a.cols : (t+1)*a.cols], a.d[t*a.nb : (t+1)*a.nb], a.bs[t*a.nb : (t+1)*a.nb]
}

// lanes returns the negated 4-code sums of vector t.
func (a *actQ) lanes(t int) []int32 { return a.ls[t*a.cols/4 : (t+1)*a.cols/4] }

// quantizeBlock quantizes 32 values by the rule above, returning d and s.
func quantizeBlock(q []int8, x []float32) (d, s float32) {
	q, x = q[:qBlock], x[:qBlock]
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v)))) // max propagates NaN
	}
	if amax == 0 {
		clear(q)
		return 0, 0
	}
	if !(amax <= math.MaxFloat32) {
		clear(q)
		return float32(math.NaN()), 0
	}
	d = amax / 127
	inv := 1 / d
	if inv > math.MaxFloat32 {
		clear(q)
		return 0, 0
	}
	var sum int32
	for i, v := range x {
		r := math.RoundToEven(float64(float32(v * inv)))
		r = max(-127, min(127, r))
		q[i] = int8(r)
		sum += int32(r)
	}
	return d, float32(sum)
}
