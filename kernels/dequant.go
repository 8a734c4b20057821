package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/seamlm/seam/internal/half"
	"github.com/seamlm/seam/tensor"
)

// GGML block layouts, in bytes (see tensor.DType.BlockBytes for the totals).
const (
	q80Block = 34  // f16 d, 32 x int8
	q40Block = 18  // f16 d, 16 bytes: element i in the low nibble of byte i, element i+16 in its high nibble
	q4KBlock = 144 // f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
	q6KBlock = 210 // 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 x int8 scales, f16 d
	kBlockN  = 256 // elements per k-quant super-block
)

// DequantRow writes the f32 values of row r of w into dst.
//
// Every dequantized value is computed with at most one rounding, in an order
// fixed per type (the same arithmetic as the SIMD kernels), so MatVec's result
// for a row equals Dot(DequantRow(row), x) bit for bit.
//
// w must have passed tensor.Check. It panics when len(dst) != w.Cols or r is
// out of range: those are programming errors, not bad input.
func DequantRow(dst []float32, w *tensor.Tensor, r int) {
	if len(dst) != w.Cols {
		panic(fmt.Sprintf("kernels.DequantRow: dst has %d entries, tensor %s has %d columns", len(dst), w.Name, w.Cols))
	}
	if r < 0 || r >= w.Rows {
		panic(fmt.Sprintf("kernels.DequantRow: row %d outside tensor %s of %d rows", r, w.Name, w.Rows))
	}
	row := w.Row(r)
	switch w.Type {
	case tensor.F32:
		copy(tensor.BytesOfF32(dst), row)
	case tensor.F16:
		for i := widenHalves(dst, row, false); i < len(dst); i++ {
			dst[i] = f16ToF32(binary.LittleEndian.Uint16(row[2*i:]))
		}
	case tensor.BF16:
		for i := widenHalves(dst, row, true); i < len(dst); i++ {
			dst[i] = half.BF16ToF32(binary.LittleEndian.Uint16(row[2*i:]))
		}
	case tensor.Q8_0:
		dequantQ80(dst, row)
	case tensor.Q4_0:
		dequantQ40(dst, row)
	case tensor.Q4_K:
		dequantQ4K(dst, row)
	case tensor.Q6_K:
		dequantQ6K(dst, row)
	case tensor.Q8G:
		dequantQ8G(dst, w, r)
	default:
		panic(fmt.Sprintf("kernels.DequantRow: tensor %s has unsupported dtype %s", w.Name, w.Type))
	}
}

// dequantQ80: value = d * q. Exact: an f16 significand (11 bits) times a
// 7-bit integer fits in float32's 24 bits.
func dequantQ80(dst []float32, row []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := row[b*q80Block : (b+1)*q80Block]
		d := f16ToF32(binary.LittleEndian.Uint16(blk))
		out := dst[b*32 : b*32+32]
		for i := range out {
			out[i] = d * float32(int8(blk[2+i]))
		}
	}
}

// dequantQ40: value = d * (nibble - 8), exact for the same reason.
func dequantQ40(dst []float32, row []byte) {
	for b := 0; b < len(dst)/32; b++ {
		blk := row[b*q40Block : (b+1)*q40Block]
		d := f16ToF32(binary.LittleEndian.Uint16(blk))
		out := dst[b*32 : b*32+32]
		for i := 0; i < 16; i++ {
			q := blk[2+i]
			out[i] = d * float32(int(q&0x0f)-8)
			out[i+16] = d * float32(int(q>>4)-8)
		}
	}
}

// q4KScales decodes a Q4_K super-block's eight 6-bit scales and mins (GGML's
// get_scale_min_k4 layout) and returns D[j] = d*scale_j and M[j] = dmin*min_j,
// both exact (11-bit significand times a 6-bit integer).
//
// Bytes 0-3 hold scales 0-3 in their low 6 bits, bytes 4-7 mins 0-3; bytes 8-11
// hold the low 4 bits of scales 4-7 (low nibble) and mins 4-7 (high nibble),
// whose top 2 bits are the top bits of bytes 0-3 (scales) and 4-7 (mins).
func q4KScales(blk []byte) (dsc, dmn [8]float32) {
	d := f16ToF32(binary.LittleEndian.Uint16(blk[0:]))
	dmin := f16ToF32(binary.LittleEndian.Uint16(blk[2:]))
	s := blk[4:16]
	for j := 0; j < 8; j++ {
		var sc, mn byte
		if j < 4 {
			sc, mn = s[j]&63, s[j+4]&63
		} else {
			sc = s[j+4]&0x0f | (s[j-4]>>6)<<4
			mn = s[j+4]>>4 | (s[j]>>6)<<4
		}
		dsc[j] = d * float32(sc)
		dmn[j] = dmin * float32(mn)
	}
	return dsc, dmn
}

// dequantQ4K: value = D[j]*q - M[j] for sub-block j of 32. D[j]*q is exact
// (21 significant bits), so the subtraction is the only rounding.
func dequantQ4K(dst []float32, row []byte) {
	for b := 0; b < len(dst)/kBlockN; b++ {
		blk := row[b*q4KBlock : (b+1)*q4KBlock]
		dsc, dmn := q4KScales(blk)
		qs := blk[16:]
		out := dst[b*kBlockN : (b+1)*kBlockN]
		// Each 32 bytes of qs feed two sub-blocks: low nibbles the first,
		// high nibbles the second.
		for c := 0; c < 4; c++ {
			lo, hi := out[64*c:64*c+32], out[64*c+32:64*c+64]
			q := qs[32*c : 32*c+32]
			d1, m1, d2, m2 := dsc[2*c], dmn[2*c], dsc[2*c+1], dmn[2*c+1]
			for l := 0; l < 32; l++ {
				lo[l] = float32(d1*float32(q[l]&0x0f)) - m1
				hi[l] = float32(d2*float32(q[l]>>4)) - m2
			}
		}
	}
}

// q6KScales returns S[k] = d*scale_k for the 16 sub-blocks of 16 values
// (exact: 11-bit significand times an 8-bit integer).
func q6KScales(blk []byte) (s [16]float32) {
	d := f16ToF32(binary.LittleEndian.Uint16(blk[208:]))
	for k := range s {
		s[k] = d * float32(int8(blk[192+k]))
	}
	return s
}

// dequantQ6K: value = S[k] * (q - 32) with q a 6-bit code split into 4 low bits
// (ql) and 2 high bits (qh). Exact: S[k] has at most 11+7 significant bits (or
// a power of two from scale -128) and q-32 at most 5 (or is -32).
//
// Each half of 128 values uses 64 ql bytes and 32 qh bytes: value l (l < 32)
// takes the low nibble of ql[l] and qh[l] bits 0-1; value 32+l the low nibble
// of ql[32+l] and bits 2-3; value 64+l the high nibble of ql[l] and bits 4-5;
// value 96+l the high nibble of ql[32+l] and bits 6-7.
func dequantQ6K(dst []float32, row []byte) {
	for b := 0; b < len(dst)/kBlockN; b++ {
		blk := row[b*q6KBlock : (b+1)*q6KBlock]
		s := q6KScales(blk)
		for h := 0; h < 2; h++ {
			ql := blk[64*h : 64*h+64]
			qh := blk[128+32*h : 128+32*h+32]
			out := dst[b*kBlockN+128*h : b*kBlockN+128*h+128]
			sc := s[8*h : 8*h+8]
			for l := 0; l < 32; l++ {
				q1 := int(ql[l]&0x0f | (qh[l]&3)<<4)
				q2 := int(ql[l+32]&0x0f | (qh[l]>>2&3)<<4)
				q3 := int(ql[l]>>4 | (qh[l]>>4&3)<<4)
				q4 := int(ql[l+32]>>4 | (qh[l]>>6)<<4)
				out[l] = sc[l/16] * float32(q1-32)
				out[l+32] = sc[l/16+2] * float32(q2-32)
				out[l+64] = sc[l/16+4] * float32(q3-32)
				out[l+96] = sc[l/16+6] * float32(q4-32)
			}
		}
	}
}

// dequantQ8G: value = q * scale of its group, one rounding. Groups run over the
// flattened tensor, so row r starts at value r*Cols, possibly mid-group.
func dequantQ8G(dst []float32, w *tensor.Tensor, r int) {
	row := w.Row(r)
	gs := w.GroupSize
	start := r * w.Cols // cannot overflow: Check bounded Rows*Cols by len(Data)
	for j := 0; j < len(dst); {
		g := (start + j) / gs
		end := min((g+1)*gs-start, len(dst)) // end of this group within the row
		s := math.Float32frombits(binary.LittleEndian.Uint32(w.Scales[4*g:]))
		scaleI8(dst[j:end], row[j:end], s)
		j = end
	}
}

func scaleI8Go(dst []float32, src []byte, s float32) {
	src = src[:len(dst)]
	for i, q := range src {
		dst[i] = float32(int8(q)) * s
	}
}

// f16ToF32 widens an IEEE half exactly: normal numbers inline (rebias the
// exponent by 127-15 = 112), the rest through internal/half.
func f16ToF32(h uint16) float32 {
	if e := h & 0x7c00; e != 0 && e != 0x7c00 {
		return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23))
	}
	return half.ToF32(h)
}
