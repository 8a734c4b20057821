package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/seamlm/seam/tensor"
)

var intTypes = []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K, tensor.Q8G}

// refCode returns element (r, e) of w as an integer code c and float32
// factors: value = W*c - M (M is non-zero for Q4_K only). It reads the
// element directly from the format's definition, as refValue does.
func refCode(w *tensor.Tensor, r, e int) (c int32, W, M float32) {
	row := w.Data[r*w.RowBytes() : (r+1)*w.RowBytes()]
	switch w.Type {
	case tensor.Q8_0:
		blk := row[e/32*34:]
		return int32(int8(blk[2+e%32])), float32(refHalf(u16(blk, 0))), 0
	case tensor.Q4_0:
		blk := row[e/32*18:]
		i := e % 32
		q := int32(blk[2+i%16] & 0x0f)
		if i >= 16 {
			q = int32(blk[2+i%16] >> 4)
		}
		return q - 8, float32(refHalf(u16(blk, 0))), 0
	case tensor.Q4_K:
		blk := row[e/256*144:]
		j, sc := (e%256)/32, blk[4:16]
		var scale, mn int
		if j < 4 {
			scale, mn = int(sc[j]&63), int(sc[j+4]&63)
		} else {
			scale = int(sc[j+4]&0xf) | int(sc[j-4]>>6)<<4
			mn = int(sc[j+4]>>4) | int(sc[j]>>6)<<4
		}
		b := blk[16+32*((e%256)/64)+e%32]
		q := int32(b & 0xf)
		if j%2 == 1 {
			q = int32(b >> 4)
		}
		return q, float32(refHalf(u16(blk, 0)) * float64(scale)), float32(refHalf(u16(blk, 2)) * float64(mn))
	case tensor.Q6_K:
		blk := row[e/256*210:]
		ee := e % 256
		h, i, l := ee/128, (ee%128)/32, ee%32
		lb := blk[64*h+32*(i%2)+l]
		lo := int32(lb & 0xf)
		if i >= 2 {
			lo = int32(lb >> 4)
		}
		hi := int32(blk[128+32*h+l]>>(2*i)) & 3
		return lo | hi<<4 - 32, float32(refHalf(u16(blk, 208)) * float64(int8(blk[192+ee/16]))), 0
	case tensor.Q8G:
		g := (r*w.Cols + e) / w.GroupSize
		return int32(int8(row[e])), math.Float32frombits(binary.LittleEndian.Uint32(w.Scales[4*g:])), 0
	}
	panic("refCode: not an integer-dot type")
}

// refQuantize is actq.go's rule, written out again per value.
func refQuantize(x []float32) (q []int8, d, bs []float32) {
	q = make([]int8, len(x))
	for b := 0; b < len(x)/32; b++ {
		amax := 0.0
		for _, v := range x[32*b : 32*b+32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		var db float32
		switch {
		case amax == 0:
		case math.IsNaN(amax) || math.IsInf(amax, 0):
			db = float32(math.NaN())
		default:
			db = float32(amax) / 127
			inv := 1 / db
			if math.IsInf(float64(inv), 0) {
				db = 0
				break
			}
			var s float32
			for e := 32 * b; e < 32*b+32; e++ {
				v := math.RoundToEven(float64(x[e] * inv))
				q[e] = int8(math.Max(-127, math.Min(127, v)))
				s += float32(q[e])
			}
			bs = append(bs, s)
			d = append(d, db)
			continue
		}
		d, bs = append(d, db), append(bs, 0)
	}
	return q, d, bs
}

// refIntDot is the integer-dot order of intdot.go written element by element.
func refIntDot(w *tensor.Tensor, r int, q []int8, d, bs []float32) float32 {
	unit := 32
	if w.Type == tensor.Q6_K {
		unit = 16
	}
	var lane [4]float32
	var mins [8]float32
	for u := 0; u < w.Cols/unit; u++ {
		var l int32
		var W float32
		for e := unit * u; e < unit*(u+1); e++ {
			c, we, _ := refCode(w, r, e)
			l += c * int32(q[e])
			W = we
		}
		b := unit * u / 32
		lane[u%4] += float32(float32(l) * float32(W*d[b])) // conversions: no FMA
	}
	if w.Type == tensor.Q4_K {
		for b := 0; b < w.Cols/32; b++ {
			_, _, M := refCode(w, r, 32*b)
			mins[b%8] += float32(float32(M*d[b]) * bs[b])
		}
	}
	s := (lane[0] + lane[2]) + (lane[1] + lane[3])
	if w.Type == tensor.Q4_K {
		s -= ((mins[0] + mins[4]) + (mins[2] + mins[6])) + ((mins[1] + mins[5]) + (mins[3] + mins[7]))
	}
	return s
}

// intBound bounds |MatVec(w, x)[r] - sum_e w_e x_e| for an integer-dot row:
// quantizing x moves each value by at most d_b/2 (plus 254u*d_b from the
// rounding of x*inv and of 1/d), and the float32 arithmetic (the scale
// product, the lane product, at most nb/4 additions per lane, the fold and
// the minimums' subtraction) is within gamma(nb+10) of the sum of the
// absolute terms.
func intBound(w *tensor.Tensor, r int, x []float32, q []int8, d, bs []float32) float64 {
	var quant, abs float64
	for e := range x {
		c, W, M := refCode(w, r, e)
		b := e / 32
		quant += math.Abs(float64(W)*float64(c)-float64(M)) * float64(d[b]) * (0.5 + 300*u32)
		abs += math.Abs(float64(W) * float64(c) * float64(q[e]) * float64(d[b]))
		if w.Type == tensor.Q4_K && e%32 == 0 {
			abs += math.Abs(float64(M) * float64(d[b]) * float64(bs[b]))
		}
	}
	nb := w.Cols / 32
	return quant + gamma(nb+10)*abs + 2*float64(len(x))*math.Ldexp(1, -149)
}

// levelsCovered runs f at every SIMD level this machine has, pure Go
// included, and logs which ran: a test on a machine without AVX-512 says so
// instead of passing silently. SEAM_REQUIRE_SIMD=avx512 (or avx2) makes a
// machine that lacks the level fail instead.
func levelsCovered(t *testing.T, f func(level int)) {
	t.Helper()
	var names []string
	for level := simdNone; level <= maxLevel; level++ {
		withSIMD(level, func() { f(level) })
		names = append(names, levelNames[level])
		if level == simdAVX512 && intLevel() < simdAVX512 {
			names[len(names)-1] += " (integer kernels: avx2, no VNNI)"
		}
	}
	t.Logf("SIMD levels covered: %s (default level: %s)", strings.Join(names, ", "), SIMD())
	requireSIMD(t)
}

func TestQuantizeBlockRule(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3], x[4] = 2.54, -1.27, 0.01, 0.015, -0.005 // d = 0.02
	q := make([]int8, 32)
	d, s := quantizeBlock(q, x)
	if d != float32(2.54)/127 {
		t.Fatalf("d = %v, want 2.54/127", d)
	}
	// 0.015/0.02 = 0.75 -> 1; -0.005/0.02 = -0.25 -> 0; 0.01/0.02 = 0.5 -> 0 (even)
	want := []int8{127, -64, 0, 1, 0}
	for i, w := range want {
		if q[i] != w {
			t.Errorf("q[%d] = %d, want %d (x = %v)", i, q[i], w, x[i])
		}
	}
	if s != 127-64+1 {
		t.Errorf("block sum %v, want 64", s)
	}
	if d, s := quantizeBlock(q, make([]float32, 32)); d != 0 || s != 0 || q[0] != 0 {
		t.Errorf("zero block: d %v, s %v, q[0] %d", d, s, q[0])
	}
	x[7] = float32(math.Inf(-1))
	if d, _ := quantizeBlock(q, x); !math.IsNaN(float64(d)) || q[0] != 0 {
		t.Errorf("block with -Inf: d = %v, q[0] = %d; want NaN and 0", d, q[0])
	}
	x[7] = float32(math.NaN())
	if d, _ := quantizeBlock(q, x); !math.IsNaN(float64(d)) {
		t.Errorf("block with NaN: d = %v, want NaN", d)
	}
	tiny := make([]float32, 32)
	tiny[3] = math.SmallestNonzeroFloat32
	if d, _ := quantizeBlock(q, tiny); d != 0 || q[3] != 0 {
		t.Errorf("block of subnormals: d = %v, q[3] = %d; want 0, 0", d, q[3])
	}
}

// The quantizer (assembly at each level, Go for the blocks it leaves) agrees
// with the rule written out separately, on random and awkward inputs: whole
// blocks of zeros, of subnormals, with an infinity or a NaN, exact halves.
func TestQuantizeMatchesRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	levelsCovered(t, func(level int) {
		for trial := 0; trial < 300; trial++ {
			n := 32 * (1 + rng.IntN(8))
			x := randVec(rng, n)
			for i := range x {
				switch rng.IntN(10) {
				case 0:
					x[i] *= 1e-30
				case 1:
					x[i] = float32(math.Ldexp(float64(x[i]), 100))
				case 2:
					x[i] = float32(rng.IntN(255)-127) / 64 // exact halves
				}
			}
			b := 32 * rng.IntN(n/32)
			switch rng.IntN(6) {
			case 0:
				clear(x[b : b+32])
			case 1:
				for i := b; i < b+32; i++ {
					x[i] = float32(rng.NormFloat64()) * math.SmallestNonzeroFloat32 * 4
				}
			case 2:
				x[b+rng.IntN(32)] = float32(math.Inf(1 - 2*rng.IntN(2)))
			case 3:
				x[b+rng.IntN(32)] = float32(math.NaN())
			}
			a := getActQ(1, n)
			a.quantize(x)
			q, d, bs := refQuantize(x)
			for e := range q {
				if a.q[e] != q[e] {
					t.Fatalf("level %s trial %d value %d (%v): code %d, rule %d", levelNames[level], trial, e, x[e], a.q[e], q[e])
				}
			}
			for b := range d {
				if !sameBits(a.d[b], d[b]) || a.bs[b] != bs[b] {
					t.Fatalf("level %s trial %d block %d: d %v sum %v, rule %v %v", levelNames[level], trial, b, a.d[b], a.bs[b], d[b], bs[b])
				}
			}
			for g := range n / 4 {
				want := -(int32(q[4*g]) + int32(q[4*g+1]) + int32(q[4*g+2]) + int32(q[4*g+3]))
				if a.ls[g] != want {
					t.Fatalf("level %s trial %d: 4-code sum %d is %d, want %d", levelNames[level], trial, g, a.ls[g], want)
				}
			}
			putActQ(a)
		}
	})
}

// A prompt's activations (past quantParallelValues) are quantized on
// several threads, each a range of blocks: the same bits as the rule, with
// the specially treated blocks (zeros, NaN, infinity) across the ranges.
func TestQuantizeParallelMatchesRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	defer SetThreads(0)
	const n, cols = 24, 768
	if n*cols < quantParallelValues {
		t.Fatalf("%d values do not reach the parallel path (%d)", n*cols, quantParallelValues)
	}
	x := randVec(rng, n*cols)
	for _, b := range []int{0, 100, 287, 300, n*cols/32 - 1} {
		switch b % 3 {
		case 0:
			clear(x[32*b : 32*b+32])
		case 1:
			x[32*b+5] = float32(math.NaN())
		case 2:
			x[32*b+7] = float32(math.Inf(-1))
		}
	}
	q, d, bs := refQuantize(x)
	levelsCovered(t, func(level int) {
		for _, th := range []int{1, 2, 3} {
			SetThreads(th)
			a := getActQ(n, cols)
			a.quantize(x)
			for e := range q {
				if a.q[e] != q[e] {
					t.Fatalf("level %s threads %d value %d: code %d, rule %d", levelNames[level], th, e, a.q[e], q[e])
				}
			}
			for b := range d {
				if !sameBits(a.d[b], d[b]) || a.bs[b] != bs[b] {
					t.Fatalf("level %s threads %d block %d: d %v sum %v, rule %v %v", levelNames[level], th, b, a.d[b], a.bs[b], d[b], bs[b])
				}
			}
			for g := range n * cols / 4 {
				want := -(int32(q[4*g]) + int32(q[4*g+1]) + int32(q[4*g+2]) + int32(q[4*g+3]))
				if a.ls[g] != want {
					t.Fatalf("level %s threads %d: 4-code sum %d is %d, want %d", levelNames[level], th, g, a.ls[g], want)
				}
			}
			putActQ(a)
		}
	})
}

// TestIntDotOrder: every path (pure Go, AVX2, AVX-512 VNNI) computes the
// integer-dot order bit for bit, against refIntDot, for every integer type,
// block counts 1-9 (every tail of the 4-block unrolling), odd row counts and
// 1 or 3 threads.
func TestIntDotOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 22))
	defer SetThreads(0)
	levelsCovered(t, func(level int) {
		for _, typ := range intTypes {
			for _, cols := range []int{32, 64, 96, 128, 160, 256, 288, 512, 544, 608, 640, 768, 1120, 1280, 2304} {
				if cols%typ.BlockElems() != 0 {
					continue
				}
				for _, gs := range []int{32, 64, 96, 128} {
					if typ != tensor.Q8G && gs != 32 || typ == tensor.Q8G && cols%gs != 0 {
						continue
					}
					w := randTensor(rng, typ, 1+rng.IntN(9), cols, gs)
					if !usesIntDot(w) {
						t.Fatalf("%s cols %d group %d does not use the integer kernels", typ, cols, w.GroupSize)
					}
					x := randVec(rng, cols)
					if rng.IntN(3) == 0 {
						x[rng.IntN(cols)] = 0
						for i := 0; i < 32 && i < cols; i++ {
							x[i] = 0 // a zero block
						}
					}
					q, d, bs := refQuantize(x)
					for _, th := range []int{1, 3} {
						SetThreads(th)
						out := make([]float32, w.Rows)
						MatVec(out, w, x)
						for r := range out {
							want := refIntDot(w, r, q, d, bs)
							if !sameBits(out[r], want) {
								t.Fatalf("level %s %s %dx%d group %d threads %d row %d: %v, order says %v",
									levelNames[level], typ, w.Rows, cols, w.GroupSize, th, r, out[r], want)
							}
						}
					}
				}
			}
		}
	})
}

// TestIntDotAccuracy: against the exact float64 product of the weights and
// the unquantized x, within intBound.
func TestIntDotAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	worst := map[tensor.DType]float64{}
	for _, typ := range intTypes {
		for _, cols := range []int{256, 768, 2048} {
			w := randTensor(rng, typ, 17, cols, 64)
			x := randVec(rng, cols)
			q, d, bs := refQuantize(x)
			out := make([]float32, w.Rows)
			MatVec(out, w, x)
			for r := range out {
				want := refDot(refRow(w, r), x)
				bound := intBound(w, r, x, q, d, bs)
				diff := math.Abs(float64(out[r]) - want)
				if !(diff <= bound) {
					t.Fatalf("%s cols %d row %d: %v, exact %v, |diff| %g > bound %g", typ, cols, r, out[r], want, diff, bound)
				}
				worst[typ] = math.Max(worst[typ], diff/bound)
			}
		}
	}
	t.Logf("largest |error| / bound per type: %v", worst)
}

// requireSIMD fails the test when SEAM_REQUIRE_SIMD names a level (avx2,
// avx512 or avx512+vnni) this machine or build cannot run, so that a CI
// machine expected to cover it cannot skip it silently.
func requireSIMD(t *testing.T) {
	t.Helper()
	want := os.Getenv("SEAM_REQUIRE_SIMD")
	if want == "" {
		return
	}
	have := levelNames[maxLevel]
	ok := false
	switch want {
	case "none":
		ok = true
	case "avx2":
		ok = maxLevel >= simdAVX2
	case "avx512":
		ok = maxLevel >= simdAVX512
	case "avx512+vnni":
		ok = maxLevel >= simdAVX512 && withLevel(simdAVX512, intLevel) == simdAVX512
	default:
		t.Fatalf("SEAM_REQUIRE_SIMD=%q: want none, avx2, avx512 or avx512+vnni", want)
	}
	if !ok {
		t.Fatalf("SEAM_REQUIRE_SIMD=%s but this machine or build runs at most %s", want, have)
	}
}

func withLevel(level int, f func() int) (r int) {
	withSIMD(level, func() { r = f() })
	return r
}
