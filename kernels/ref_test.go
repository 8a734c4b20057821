package kernels

// An obviously-correct reference for the weight formats, written from the
// format definitions element by element (value e of a row is located directly,
// not by walking blocks the way the production code does) and computed in
// float64, plus helpers to build test tensors.

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/seamlm/seam/tensor"
)

// refHalf decodes IEEE binary16 from its definition:
// (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
func refHalf(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return s * math.Inf(1)
	case 0:
		return s * math.Ldexp(m/1024, -14)
	}
	return s * math.Ldexp(1+m/1024, e-15)
}

func refBF16(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }

func u16(b []byte, off int) uint16 { return binary.LittleEndian.Uint16(b[off:]) }

// refValue returns element (r, e) of w.
func refValue(w *tensor.Tensor, r, e int) float64 {
	row := w.Data[r*w.RowBytes() : (r+1)*w.RowBytes()]
	switch w.Type {
	case tensor.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(row[4*e:])))
	case tensor.F16:
		return refHalf(u16(row, 2*e))
	case tensor.BF16:
		return refBF16(u16(row, 2*e))
	case tensor.Q8_0:
		// block: f16 d, then 32 int8; value = d * q.
		blk := row[e/32*34:]
		return refHalf(u16(blk, 0)) * float64(int8(blk[2+e%32]))
	case tensor.Q4_0:
		// block: f16 d, then 16 bytes; value i < 16 is the low nibble of
		// byte i, value i >= 16 the high nibble of byte i-16; value = d*(q-8).
		blk := row[e/32*18:]
		i := e % 32
		q := int(blk[2+i%16] & 0x0f)
		if i >= 16 {
			q = int(blk[2+i%16] >> 4)
		}
		return refHalf(u16(blk, 0)) * float64(q-8)
	case tensor.Q4_K:
		return refQ4K(row[e/256*144:], e%256)
	case tensor.Q6_K:
		return refQ6K(row[e/256*210:], e%256)
	case tensor.Q8G:
		g := (r*w.Cols + e) / w.GroupSize
		s := math.Float32frombits(binary.LittleEndian.Uint32(w.Scales[4*g:]))
		return float64(int8(row[e])) * float64(s)
	}
	panic("refValue: unknown type")
}

// refQ4K: super-block = f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes.
// Sub-block j = e/32 has 6-bit scale and min (GGML get_scale_min_k4). Value
// e is a nibble of byte 32*(e/64) + e%32: the low one when j is even.
func refQ4K(blk []byte, e int) float64 {
	d, dmin := refHalf(u16(blk, 0)), refHalf(u16(blk, 2))
	sc := blk[4:16]
	j := e / 32
	var scale, mn int
	if j < 4 {
		scale = int(sc[j] & 63)
		mn = int(sc[j+4] & 63)
	} else {
		scale = int(sc[j+4]&0xf) | int(sc[j-4]>>6)<<4
		mn = int(sc[j+4]>>4) | int(sc[j]>>6)<<4
	}
	b := blk[16+32*(e/64)+e%32]
	q := int(b & 0xf)
	if j%2 == 1 {
		q = int(b >> 4)
	}
	return d*float64(scale)*float64(q) - dmin*float64(mn)
}

// refQ6K: super-block = 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d.
// Value e sits in half h = e/128 at quarter i = (e%128)/32, position l = e%32:
// low bits = low nibble (i < 2) or high nibble (i >= 2) of ql[64h + 32*(i%2) + l],
// high bits = bits 2i, 2i+1 of qh[32h + l]; scale = scales[e/16];
// value = d * scale * (q - 32).
func refQ6K(blk []byte, e int) float64 {
	h, i, l := e/128, (e%128)/32, e%32
	lb := blk[64*h+32*(i%2)+l]
	lo := int(lb & 0xf)
	if i >= 2 {
		lo = int(lb >> 4)
	}
	hi := int(blk[128+32*h+l]>>(2*i)) & 3
	q := lo | hi<<4
	return refHalf(u16(blk, 208)) * float64(int8(blk[192+e/16])) * float64(q-32)
}

// refRow returns row r of w in float64.
func refRow(w *tensor.Tensor, r int) []float64 {
	out := make([]float64, w.Cols)
	for e := range out {
		out[e] = refValue(w, r, e)
	}
	return out
}

// randTensor fills a tensor with random bytes, then replaces every scale by a
// random finite one in a moderate range, so products and sums stay finite.
func randTensor(rng *rand.Rand, typ tensor.DType, rows, cols, groupSize int) *tensor.Tensor {
	rb, err := typ.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	w := &tensor.Tensor{Name: "test", Type: typ, Rows: rows, Cols: cols, Data: make([]byte, rb*rows)}
	for i := range w.Data {
		w.Data[i] = byte(rng.Uint32())
	}
	// randHalf: exponent 10..17 (2^-5 .. 2^2), random sign and mantissa.
	randHalf := func() uint16 {
		return uint16(rng.IntN(2))<<15 | uint16(10+rng.IntN(8))<<10 | uint16(rng.IntN(1024))
	}
	put := func(off int, h uint16) { binary.LittleEndian.PutUint16(w.Data[off:], h) }
	switch typ {
	case tensor.F32:
		for i := 0; i < len(w.Data); i += 4 {
			binary.LittleEndian.PutUint32(w.Data[i:], math.Float32bits(float32(rng.NormFloat64())))
		}
	case tensor.F16:
		for i := 0; i < len(w.Data); i += 2 {
			put(i, randHalf())
		}
	case tensor.BF16:
		for i := 0; i < len(w.Data); i += 2 {
			put(i, uint16(math.Float32bits(float32(rng.NormFloat64()))>>16))
		}
	case tensor.Q8_0:
		for i := 0; i < len(w.Data); i += 34 {
			put(i, randHalf())
		}
	case tensor.Q4_0:
		for i := 0; i < len(w.Data); i += 18 {
			put(i, randHalf())
		}
	case tensor.Q4_K:
		for i := 0; i < len(w.Data); i += 144 {
			put(i, randHalf())
			put(i+2, randHalf())
		}
	case tensor.Q6_K:
		for i := 0; i < len(w.Data); i += 210 {
			put(i+208, randHalf())
		}
	case tensor.Q8G:
		// The largest group size <= groupSize that divides the tensor.
		for (rows*cols)%groupSize != 0 {
			groupSize--
		}
		w.GroupSize = groupSize
		w.Scales = make([]byte, rows*cols/groupSize*4)
		for i := 0; i < len(w.Scales); i += 4 {
			binary.LittleEndian.PutUint32(w.Scales[i:], math.Float32bits(float32(rng.Float64()/64+1e-4)))
		}
	}
	if err := w.Check(); err != nil {
		panic(err)
	}
	return w
}

func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// dotBound is a rigorous bound on |fl(sum w_j x_j) - sum w_j x_j| for float32
// evaluation in any order, products rounded: each product carries one
// rounding (relative u = 2^-24), each weight at most one more (Q4_K and Q8G
// dequantization), and a sum of n terms in any tree is exact up to a relative
// gamma_{n-1} of sum |terms| (Higham, Accuracy and Stability of Numerical
// Algorithms, 2nd ed., eq. 4.4). Together: gamma_{n+1} * sum |w_j x_j|.
// The float64 reference sum adds its own error, at most gamma_{n+1} in double
// precision (u = 2^-53) of the same sum; both are added. Products or weights
// that underflow into float32 subnormals are off by at most 2^-150 absolute
// each instead (sums of subnormals are exact): 2(n+1) * 2^-150 more.
func dotBound(w []float64, x []float32) float64 {
	const u32, u64 = 1.0 / (1 << 24), 1.0 / (1 << 53)
	n := float64(len(w))
	return ((n+1)*u32/(1-(n+1)*u32)+(n+1)*u64/(1-(n+1)*u64))*absDot(w, x) + 2*(n+1)*math.Ldexp(1, -150)
}

// absDot is sum |w_j x_j|.
func absDot(w []float64, x []float32) float64 {
	var abs float64
	for j := range w {
		abs += math.Abs(w[j] * float64(x[j]))
	}
	return abs
}

// refDot is the float64 dot product of a reference row with x.
func refDot(w []float64, x []float32) float64 {
	var s float64
	for j := range w {
		s += w[j] * float64(x[j])
	}
	return s
}

// tameScales makes a benchmark tensor's random scales finite and moderate.
func tameScales(w *tensor.Tensor) {
	rb := w.RowBytes()
	setHalf := func(off int) { w.Data[off+1] = 0x3c } // exponent of 1.0, keeps random mantissa bits
	for r := 0; r < w.Rows; r++ {
		base := r * rb
		switch w.Type {
		case tensor.F32:
			for i := 0; i < rb; i += 4 {
				w.Data[base+i+3] = 0x3f
			}
		case tensor.F16, tensor.BF16:
			for i := 0; i < rb; i += 2 {
				setHalf(base + i)
			}
		case tensor.Q8_0:
			for i := 0; i < rb; i += 34 {
				setHalf(base + i)
			}
		case tensor.Q4_0:
			for i := 0; i < rb; i += 18 {
				setHalf(base + i)
			}
		case tensor.Q4_K:
			for i := 0; i < rb; i += 144 {
				setHalf(base + i)
				setHalf(base + i + 2)
			}
		case tensor.Q6_K:
			for i := 0; i < rb; i += 210 {
				setHalf(base + i + 208)
			}
		}
	}
	for i := 0; i < len(w.Scales); i += 4 {
		w.Scales[i+3] = 0x3c
	}
}
