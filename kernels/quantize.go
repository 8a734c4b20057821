package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/seamlm/seam/internal/half"
	"github.com/seamlm/seam/tensor"
)

// QuantizeRow encodes the f32 values src as one row of typ (Q8_0, Q4_0,
// Q4_K or Q6_K) into dst, which must hold exactly typ.RowBytes(len(src))
// bytes. DequantRow inverts it up to the format's rounding.
//
// These are plain quantizers: each block's scale comes from its largest
// magnitude (and, for Q4_K, its minimum), rounded to the nearest code. They
// are not GGML's search for the scales that minimize the error, so GGML's
// quantized files are somewhat more accurate; Seam uses them to build test
// and benchmark models from f32 weights.
func QuantizeRow(dst []byte, typ tensor.DType, src []float32) error {
	rb, err := typ.RowBytes(len(src))
	if err != nil {
		return fmt.Errorf("kernels.QuantizeRow: %w", err)
	}
	if len(dst) != rb {
		return fmt.Errorf("kernels.QuantizeRow: %d values of %s take %d bytes, dst has %d", len(src), typ, rb, len(dst))
	}
	for _, v := range src {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("kernels.QuantizeRow: value %v is not finite", v)
		}
	}
	switch typ {
	case tensor.Q8_0:
		for b := range len(src) / 32 {
			quantQ80(dst[b*q80Block:(b+1)*q80Block], src[32*b:32*b+32])
		}
	case tensor.Q4_0:
		for b := range len(src) / 32 {
			quantQ40(dst[b*q40Block:(b+1)*q40Block], src[32*b:32*b+32])
		}
	case tensor.Q4_K:
		for b := range len(src) / kBlockN {
			quantQ4K(dst[b*q4KBlock:(b+1)*q4KBlock], src[kBlockN*b:kBlockN*(b+1)])
		}
	case tensor.Q6_K:
		for b := range len(src) / kBlockN {
			quantQ6K(dst[b*q6KBlock:(b+1)*q6KBlock], src[kBlockN*b:kBlockN*(b+1)])
		}
	default:
		return fmt.Errorf("kernels.QuantizeRow: cannot encode %s", typ)
	}
	return nil
}

func absMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	return m
}

// f16Scale rounds s to f16 and returns the bits and the rounded value.
func f16Scale(s float32) (uint16, float32) {
	h := half.FromF32(s)
	return h, f16ToF32(h)
}

func roundClamp(v float64, lo, hi int) int {
	return max(lo, min(hi, int(math.RoundToEven(v))))
}

// quantQ80: d = max|x|/127 (as f16), q = round(x/d).
func quantQ80(blk []byte, x []float32) {
	h, d := f16Scale(absMax(x) / 127)
	binary.LittleEndian.PutUint16(blk, h)
	for i, v := range x {
		q := 0
		if d != 0 {
			q = roundClamp(float64(v)/float64(d), -127, 127)
		}
		blk[2+i] = byte(int8(q))
	}
}

// quantQ40: the value of largest magnitude maps to code 0 (-8): d =
// that value / -8, q = round(x/d) + 8 in 0..15.
func quantQ40(blk []byte, x []float32) {
	var m float32
	for _, v := range x {
		if math.Abs(float64(v)) > math.Abs(float64(m)) {
			m = v
		}
	}
	h, d := f16Scale(m / -8)
	binary.LittleEndian.PutUint16(blk, h)
	for i := range 16 {
		lo, hi := 8, 8
		if d != 0 {
			lo = roundClamp(float64(x[i])/float64(d)+8, 0, 15)
			hi = roundClamp(float64(x[i+16])/float64(d)+8, 0, 15)
		}
		blk[2+i] = byte(lo | hi<<4)
	}
}

// quantQ4K: each sub-block j of 32 gets scale (max - min)/15 and minimum
// -min (min at most 0), both stored as 6-bit multiples of the super-block's
// f16 d and dmin; q = round((x + M_j)/D_j) in 0..15.
func quantQ4K(blk []byte, x []float32) {
	var scale, minv [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		sub := x[32*j : 32*j+32]
		lo, hi := float32(0), sub[0]
		for _, v := range sub {
			lo, hi = min(lo, v), max(hi, v)
		}
		scale[j], minv[j] = (hi-lo)/15, -lo
		maxScale, maxMin = max(maxScale, scale[j]), max(maxMin, minv[j])
	}
	hd, d := f16Scale(maxScale / 63)
	hm, dmin := f16Scale(maxMin / 63)
	binary.LittleEndian.PutUint16(blk, hd)
	binary.LittleEndian.PutUint16(blk[2:], hm)
	var sc, mn [8]int
	for j := range 8 {
		if d != 0 {
			sc[j] = roundClamp(float64(scale[j])/float64(d), 0, 63)
		}
		if dmin != 0 {
			mn[j] = roundClamp(float64(minv[j])/float64(dmin), 0, 63)
		}
	}
	s := blk[4:16]
	for j := range 4 {
		s[j] = byte(sc[j] | sc[j+4]>>4<<6)
		s[j+4] = byte(mn[j] | mn[j+4]>>4<<6)
		s[j+8] = byte(sc[j+4]&15 | (mn[j+4]&15)<<4)
	}
	qs := blk[16:144]
	clear(qs)
	for j := range 8 {
		D, M := float64(d)*float64(sc[j]), float64(dmin)*float64(mn[j])
		for l := range 32 {
			q := 0
			if D != 0 {
				q = roundClamp((float64(x[32*j+l])+M)/D, 0, 15)
			}
			qs[32*(j/2)+l] |= byte(q << (4 * uint(j&1)))
		}
	}
}

// quantQ6K: each sub-block k of 16 gets scale max|x|/31, stored as an int8
// multiple of the super-block's f16 d; q = round(x/S_k) + 32 in 0..63.
func quantQ6K(blk []byte, x []float32) {
	var scale [16]float32
	var maxScale float32
	for k := range 16 {
		scale[k] = absMax(x[16*k:16*k+16]) / 31
		maxScale = max(maxScale, scale[k])
	}
	hd, d := f16Scale(maxScale / 127)
	binary.LittleEndian.PutUint16(blk[208:], hd)
	var sc [16]int
	for k := range 16 {
		if d != 0 {
			sc[k] = roundClamp(float64(scale[k])/float64(d), -128, 127)
		}
		blk[192+k] = byte(int8(sc[k]))
	}
	clear(blk[:192])
	for e := range kBlockN {
		S := float64(d) * float64(sc[e/16])
		q := 32
		if S != 0 {
			q = roundClamp(float64(x[e])/S+32, 0, 63)
		}
		h, i, l := e/128, (e%128)/32, e%32
		ql := &blk[64*h+32*(i%2)+l]
		if i < 2 {
			*ql |= byte(q & 15)
		} else {
			*ql |= byte(q&15) << 4
		}
		blk[128+32*h+l] |= byte(q>>4) << (2 * uint(i))
	}
}
