package kernels

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/seamlm/seam/tensor"
)

// The integer-dot order: how a row of Q8_0, Q4_0, Q4_K, Q6_K or fused Q8G
// weights is multiplied by an activation vector quantized per actq.go. Every
// code path (pure Go below, AVX2, AVX-512 VNNI, the batched GEMM) computes
// these same bits.
//
// The row is cut into units: blocks of 32 values (the activation blocks),
// or for Q6_K halves of blocks, 16 values sharing one sub-block scale. Each
// weight has an integer code c (Q8_0, Q8G: the int8; Q4_0: nibble-8; Q4_K:
// the nibble 0..15, its minimum handled below; Q6_K: the 6-bit code - 32)
// and each unit u a float32 scale, one rounded product:
//
//	Q8_0, Q4_0:  S_u = d_b * dx_b            (d_b the block's f16 scale)
//	Q8G:         S_u = s_g * dx_b            (s_g the f32 scale of the group holding b)
//	Q4_K:        S_u = (d * sc_j) * dx_b     (j = b mod 8; d*sc_j is exact)
//	Q6_K:        S_u = (d * sc_k) * dx_b     (k = u mod 16, the sub-block; exact)
//
// where b is the block holding u. Then, for u = 0, 1, 2, ... in order:
//
//  1. L_u = the sum of c*q over the unit, exact in int32;
//  2. lane[u mod 4] += round(float32(L_u) * S_u), the product rounded
//     before the sum (never fused); the 4 lanes start at +0;
//  3. s = (lane[0] + lane[2]) + (lane[1] + lane[3]).
//
// Q4_K also subtracts its minimums: 8 more lanes, one per sub-block j of a
// super-block, m[j] += round(round((dmin * mn_j) * dx_b) * bs_b) with bs_b
// the activation block sum, folded as ((m0+m4) + (m2+m6)) + ((m1+m5) +
// (m3+m7)) and subtracted from s last.
//
// One exact integer per unit and one float product per unit keep the float
// work small, and let the GEMM hold 16 rows in one register's lanes.

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
	gidx  *int32   // 64: Q8G: the group of each block of a row
}

// fold4 is step 3.
func fold4(l *[4]float32) float32 { return (l[0] + l[2]) + (l[1] + l[3]) }

// laneAdd is step 2: lane += round(float32(l) * s).
func laneAdd(lane *float32, l int32, s float32) {
	*lane += float32(float32(l) * s) // the conversion forbids fusing into an FMA
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

// dotQ80Int is the integer-dot order for one Q8_0 row.
func dotQ80Int(row []byte, q []int8, d []float32) float32 {
	var acc [4]float32
	for b := range d {
		blk := row[b*q80Block : (b+1)*q80Block]
		w, x := blk[2:34:34], q[b*32:b*32+32:b*32+32]
		var l int32
		for i, v := range w {
			l += int32(int8(v)) * int32(x[i])
		}
		laneAdd(&acc[b&3], l, f16ToF32(le16(blk))*d[b])
	}
	return fold4(&acc)
}

// dotQ40Int is the integer-dot order for one Q4_0 row. Value i < 16 of a
// block is the low nibble of byte i, value i >= 16 the high nibble of byte
// i-16.
func dotQ40Int(row []byte, q []int8, d []float32) float32 {
	var acc [4]float32
	for b := range d {
		blk := row[b*q40Block : (b+1)*q40Block]
		w, x := blk[2:18:18], q[b*32:b*32+32:b*32+32]
		var l int32
		for i, v := range w {
			l += (int32(v&0x0f)-8)*int32(x[i]) + (int32(v>>4)-8)*int32(x[i+16])
		}
		laneAdd(&acc[b&3], l, f16ToF32(le16(blk))*d[b])
	}
	return fold4(&acc)
}

// dotQ4KInt is the integer-dot order for one Q4_K row: d and bs hold 8
// blocks per super-block.
func dotQ4KInt(row []byte, q []int8, d, bs []float32) float32 {
	var acc [4]float32
	var mins [8]float32
	for sb := 0; sb < len(d)/8; sb++ {
		blk := row[sb*q4KBlock : (sb+1)*q4KBlock]
		dsc, dmn := q4KScales(blk)
		for j := range 8 {
			b := 8*sb + j
			// Sub-block j: the low (j even) or high nibbles of 32 bytes.
			w := blk[16+32*(j/2) : 16+32*(j/2)+32 : 16+32*(j/2)+32]
			x := q[b*32 : b*32+32 : b*32+32]
			shift := 4 * uint(j&1)
			var l int32
			for i, v := range w {
				l += int32(v>>shift&0x0f) * int32(x[i])
			}
			laneAdd(&acc[b&3], l, dsc[j]*d[b])
			mins[j] += float32(float32(dmn[j]*d[b]) * bs[b])
		}
	}
	return fold4(&acc) - foldLanes8(&mins)
}

// dotQ6KInt is the integer-dot order for one Q6_K row. Block j of a
// super-block is quarter i = j%4 of half h = j/4 (see dequantQ6K); its
// values 0-15 (unit 2b) use sub-block scale 8h+2i and 16-31 (unit 2b+1)
// scale 8h+2i+1.
func dotQ6KInt(row []byte, q []int8, d []float32) float32 {
	var acc [4]float32
	for sb := 0; sb < len(d)/8; sb++ {
		blk := row[sb*q6KBlock : (sb+1)*q6KBlock]
		sc := q6KScales(blk)
		for j := range 8 {
			b := 8*sb + j
			h, i := j/4, j%4
			ql := blk[64*h+32*(i%2) : 64*h+32*(i%2)+32 : 64*h+32*(i%2)+32]
			qh := blk[128+32*h : 128+32*h+32 : 128+32*h+32]
			x := q[b*32 : b*32+32 : b*32+32]
			lshift, hshift := 4*uint(i/2), 2*uint(i)
			for half := range 2 {
				var l int32
				for e := 16 * half; e < 16*half+16; e++ {
					c := int32(ql[e]>>lshift&0x0f | (qh[e]>>hshift&3)<<4)
					l += (c - 32) * int32(x[e])
				}
				u := 2*b + half
				laneAdd(&acc[u&3], l, sc[8*h+2*i+half]*d[b])
			}
		}
	}
	return fold4(&acc)
}

// dotQ8GInt is the integer-dot order for one Q8G row whose groups of spg
// blocks do not straddle rows: scales holds the row's f32 group scales.
func dotQ8GInt(row, scales []byte, spg int, q []int8, d []float32) float32 {
	var acc [4]float32
	for b := range d {
		sg := math.Float32frombits(binary.LittleEndian.Uint32(scales[4*(b/spg):]))
		w, x := row[b*32:b*32+32:b*32+32], q[b*32:b*32+32:b*32+32]
		var l int32
		for i, v := range w {
			l += int32(int8(v)) * int32(x[i])
		}
		laneAdd(&acc[b&3], l, sg*d[b])
	}
	return fold4(&acc)
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

// groupIndex returns b / spg for the blocks b < nb of a Q8G row, the table
// the assembly kernels look group scales up with. Tables are built once per
// shape and shared (read only).
func groupIndex(nb, spg int) []int32 {
	key := [2]int{nb, spg}
	if t, ok := groupIndexes.Load(key); ok {
		return t.([]int32)
	}
	t := make([]int32, nb)
	for b := range t {
		t[b] = int32(b / spg)
	}
	v, _ := groupIndexes.LoadOrStore(key, t)
	return v.([]int32)
}

var groupIndexes sync.Map // [2]int{nb, spg} -> []int32
