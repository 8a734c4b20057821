package kernels

import (
	"encoding/binary"
	"math"

	"github.com/seamlm/seam/tensor"
)

// The integer-dot order: how a row of Q8_0, Q4_0, Q4_K, Q6_K or fused Q8G
// weights is multiplied by an activation vector quantized per actq.go. Every
// code path (pure Go below, AVX2, AVX-512 VNNI) computes these same bits.
//
// The row is cut into blocks of 32 values, matching the activation blocks.
// Each weight has an integer code c (Q8_0, Q8G: the int8; Q4_0: nibble-8;
// Q4_K: the nibble 0..15; Q6_K: the 6-bit code - 32) and each block b a
// float32 scale S per group of 4 values:
//
//	Q8_0:  S = d_b * dx_b            (d_b the block's f16 scale)
//	Q4_0:  S = d_b * dx_b
//	Q8G:   S = s_g * dx_b            (s_g the f32 scale of the group holding b)
//	Q4_K:  S = (d * sc_j) * dx_b     (j = b mod 8, the sub-block; d*sc_j is exact)
//	Q6_K:  S = (d * sc_k) * dx_b     (k the 16-value sub-block of the group)
//
// each product rounded once. Then:
//
//  1. 32 float lanes. For block b and group i = 0..7 of its values
//     32b+4i .. 32b+4i+3, the integer L = sum of c*q over the group (exact
//     in int32), and lane (b mod 4)*8 + i += round(float32(L) * S), the
//     product rounded before the sum (never fused).
//  2. v[i] = (lane[i] + lane[i+8]) + (lane[i+16] + lane[i+24]).
//  3. s = ((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7)).
//
// Q4_K also subtracts its minimums: 8 more lanes, one per sub-block j of a
// super-block, m[j] += round(round((dmin * mn_j) * dx_b) * bs_b) with bs_b
// the activation block sum, folded as in step 3 and subtracted from s last.
//
// Every accumulator starts at +0. Steps 2-3 are those of Dot (see dot.go).

// actView is what the assembly kernels read of an activation vector and, for
// Q8G, of the row's scales. Field offsets are used by the assembly.
type actView struct {
	q     *int8    // 0: codes
	d     *float32 // 8: block scales
	bs    *float32 // 16: block sums
	nb    int      // 24: blocks of 32
	sc    *byte    // 32: Q8G: first row's group scales (f32)
	scRow int      // 40: Q8G: bytes of scales per row
	spg   int      // 48: Q8G: blocks per group
	ls    *int32   // 56: negated sums of each 4 codes (actQ.ls)
}

// foldLanes32 is steps 2 and 3.
func foldLanes32(acc *[32]float32) float32 {
	var v [8]float32
	for i := range v {
		v[i] = (acc[i] + acc[i+8]) + (acc[i+16] + acc[i+24])
	}
	return foldLanes8(&v)
}

// laneAdd is step 1 for one group: lane += round(float32(l) * s).
func laneAdd(lane *float32, l int32, s float32) {
	*lane += float32(float32(l) * s) // the conversion forbids fusing into an FMA
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

// dotQ80Int is the integer-dot order for one Q8_0 row.
func dotQ80Int(row []byte, q []int8, d []float32) float32 {
	var acc [32]float32
	for b := range d {
		blk := row[b*q80Block : (b+1)*q80Block]
		s := f16ToF32(le16(blk)) * d[b]
		w, x := blk[2:34:34], q[b*32:b*32+32:b*32+32]
		a := acc[(b&3)*8 : (b&3)*8+8 : (b&3)*8+8]
		for i := range 8 {
			l := int32(int8(w[4*i]))*int32(x[4*i]) + int32(int8(w[4*i+1]))*int32(x[4*i+1]) +
				int32(int8(w[4*i+2]))*int32(x[4*i+2]) + int32(int8(w[4*i+3]))*int32(x[4*i+3])
			laneAdd(&a[i], l, s)
		}
	}
	return foldLanes32(&acc)
}

// dotQ40Int is the integer-dot order for one Q4_0 row. Value i < 16 of a
// block is the low nibble of byte i, value i >= 16 the high nibble of byte
// i-16, so groups 0-3 read low nibbles and groups 4-7 high ones.
func dotQ40Int(row []byte, q []int8, d []float32) float32 {
	var acc [32]float32
	for b := range d {
		blk := row[b*q40Block : (b+1)*q40Block]
		s := f16ToF32(le16(blk)) * d[b]
		w, x := blk[2:18:18], q[b*32:b*32+32:b*32+32]
		a := acc[(b&3)*8 : (b&3)*8+8 : (b&3)*8+8]
		for i := range 8 {
			var l int32
			for k := range 4 {
				e := 4*i + k
				c := int32(w[e%16] & 0x0f)
				if e >= 16 {
					c = int32(w[e%16] >> 4)
				}
				l += (c - 8) * int32(x[e])
			}
			laneAdd(&a[i], l, s)
		}
	}
	return foldLanes32(&acc)
}

// dotQ4KInt is the integer-dot order for one Q4_K row: d and bs hold 8
// blocks per super-block.
func dotQ4KInt(row []byte, q []int8, d, bs []float32) float32 {
	var acc [32]float32
	var mins [8]float32
	for sb := 0; sb < len(d)/8; sb++ {
		blk := row[sb*q4KBlock : (sb+1)*q4KBlock]
		dsc, dmn := q4KScales(blk)
		for j := range 8 {
			b := 8*sb + j
			s := dsc[j] * d[b]
			mins[j] += float32(float32(dmn[j]*d[b]) * bs[b])
			// Sub-block j: the low (j even) or high nibbles of bytes 32*(j/2)...
			w := blk[16+32*(j/2) : 16+32*(j/2)+32 : 16+32*(j/2)+32]
			x := q[b*32 : b*32+32 : b*32+32]
			a := acc[(b&3)*8 : (b&3)*8+8 : (b&3)*8+8]
			shift := 4 * uint(j&1)
			for i := range 8 {
				var l int32
				for k := range 4 {
					l += int32(w[4*i+k]>>shift&0x0f) * int32(x[4*i+k])
				}
				laneAdd(&a[i], l, s)
			}
		}
	}
	return foldLanes32(&acc) - foldLanes8(&mins)
}

// dotQ6KInt is the integer-dot order for one Q6_K row. Block j of a
// super-block is quarter i = j%4 of half h = j/4 (see dequantQ6K); its values
// 0-15 use sub-block scale 8h+2i and values 16-31 scale 8h+2i+1.
func dotQ6KInt(row []byte, q []int8, d []float32) float32 {
	var acc [32]float32
	for sb := 0; sb < len(d)/8; sb++ {
		blk := row[sb*q6KBlock : (sb+1)*q6KBlock]
		sc := q6KScales(blk)
		for j := range 8 {
			b := 8*sb + j
			h, i := j/4, j%4
			ql := blk[64*h+32*(i%2) : 64*h+32*(i%2)+32 : 64*h+32*(i%2)+32]
			qh := blk[128+32*h : 128+32*h+32 : 128+32*h+32]
			x := q[b*32 : b*32+32 : b*32+32]
			a := acc[(b&3)*8 : (b&3)*8+8 : (b&3)*8+8]
			lshift := 4 * uint(i/2)
			s0, s1 := sc[8*h+2*i]*d[b], sc[8*h+2*i+1]*d[b]
			for g := range 8 {
				var l int32
				for k := range 4 {
					e := 4*g + k
					c := int32(ql[e]>>lshift&0x0f | (qh[e]>>(2*uint(i))&3)<<4)
					l += (c - 32) * int32(x[e])
				}
				s := s0
				if g >= 4 {
					s = s1
				}
				laneAdd(&a[g], l, s)
			}
		}
	}
	return foldLanes32(&acc)
}

// dotQ8GInt is the integer-dot order for one Q8G row whose groups of spg
// blocks do not straddle rows: scales holds the row's f32 group scales.
func dotQ8GInt(row, scales []byte, spg int, q []int8, d []float32) float32 {
	var acc [32]float32
	for b := range d {
		sg := math.Float32frombits(binary.LittleEndian.Uint32(scales[4*(b/spg):]))
		s := sg * d[b]
		w, x := row[b*32:b*32+32:b*32+32], q[b*32:b*32+32:b*32+32]
		a := acc[(b&3)*8 : (b&3)*8+8 : (b&3)*8+8]
		for i := range 8 {
			l := int32(int8(w[4*i]))*int32(x[4*i]) + int32(int8(w[4*i+1]))*int32(x[4*i+1]) +
				int32(int8(w[4*i+2]))*int32(x[4*i+2]) + int32(int8(w[4*i+3]))*int32(x[4*i+3])
			laneAdd(&a[i], l, s)
		}
	}
	return foldLanes32(&acc)
}

// usesIntDot reports whether products with w quantize the activations and
// run the integer-dot order. Other tensors (f32, f16, bf16, and Q8G whose
// groups straddle rows or are not whole blocks of 32) multiply float32
// activations in Dot's order, with DequantRow's values.
func usesIntDot(w *tensor.Tensor) bool {
	switch w.Type {
	case tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K:
		return true
	case tensor.Q8G:
		return q8gIntOK(w)
	}
	return false
}

// q8gIntOK: groups of whole 32-value blocks that never straddle two rows.
func q8gIntOK(w *tensor.Tensor) bool {
	return w.GroupSize > 0 && w.GroupSize%qBlock == 0 && w.Cols%w.GroupSize == 0
}

// intRowsGo sets out[r-r0] for rows [r0, r1) of w against vector t of a, in
// pure Go.
func intRowsGo(w *tensor.Tensor, r0, r1 int, a *actQ, t int, out []float32) {
	q, d, bs := a.vec(t)
	rb := w.RowBytes()
	for r := r0; r < r1; r++ {
		row := w.Data[r*rb : (r+1)*rb]
		var v float32
		switch w.Type {
		case tensor.Q8_0:
			v = dotQ80Int(row, q, d)
		case tensor.Q4_0:
			v = dotQ40Int(row, q, d)
		case tensor.Q4_K:
			v = dotQ4KInt(row, q, d, bs)
		case tensor.Q6_K:
			v = dotQ6KInt(row, q, d)
		case tensor.Q8G:
			ng := w.Cols / w.GroupSize
			v = dotQ8GInt(row, w.Scales[4*r*ng:4*(r+1)*ng], w.GroupSize/qBlock, q, d)
		default:
			panic("kernels: no integer-dot kernel for " + w.Type.String())
		}
		out[r-r0] = v
	}
}
