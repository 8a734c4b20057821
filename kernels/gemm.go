package kernels

import (
	"encoding/binary"
	"math"
	"sync"
	"unsafe"

	"github.com/seamlm/seam/tensor"
)

// The batched product (GEMM) of MatMuls for n >= gemmGroup vectors.
//
// It computes exactly the bits MatVec computes for each vector: the same
// summation orders (Dot's for the float types, intdot.go's for the integer
// ones), only several of them at once. The register tile is one weight row
// by gemmGroup vectors: the row is loaded (and, for the quantized types,
// unpacked) once per tile and each of its values is used gemmGroup times.
// Rows are taken gemmRowBlock at a time, so that a group of vectors stays
// in cache across the block and the block's rows across the groups.
//
// Vectors left over after the last whole group go through the per-vector
// kernels. Without an assembly GEMM for the type and level, every vector
// does.

const (
	gemmGroup    = 8  // vectors per register tile (the kernels are written for 8)
	gemmRowBlock = 16 // rows unpacked and applied to every group in turn
)

// unpacked is a block of quantized rows in the GEMM's common form: for each
// value, the unsigned byte c+128 (c the integer code of intdot.go); for each
// group of 4 values, the float32 factor W; for each block of 32 (Q4_K only),
// the minimum factor M = dmin*mn_j.
type unpacked struct {
	u []byte
	w []float32
	m []float32
}

// noGEMM turns the GEMM off (benchmarks compare it with the per-vector path).
var noGEMM bool

var (
	unpackedPool sync.Pool // of *unpacked
	gemmRowsPool sync.Pool // of *[]float32: dequantized rows for the f32 GEMM
)

func aligned4(b []byte) bool { return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%4 == 0 }

// unpackRow writes row r of w (an integer-dot type) into u (Cols bytes), wf
// (Cols/4 factors) and m (Cols/32 minimum factors, Q4_K only).
func unpackRow(w *tensor.Tensor, r int, u []byte, wf, m []float32) {
	if unpackRowSIMD(w, r, u, wf) {
		return
	}
	row := w.Row(r)
	nb := w.Cols / 32
	switch w.Type {
	case tensor.Q8_0:
		for b := range nb {
			blk := row[b*q80Block : (b+1)*q80Block]
			d := f16ToF32(le16(blk))
			for i, q := range blk[2:34] {
				u[32*b+i] = q ^ 0x80
			}
			fill8(wf[8*b:8*b+8], d)
		}
	case tensor.Q4_0:
		for b := range nb {
			blk := row[b*q40Block : (b+1)*q40Block]
			d := f16ToF32(le16(blk))
			o := u[32*b : 32*b+32]
			for i, q := range blk[2:18] {
				o[i] = q&0x0f + 120 // (nibble-8) + 128
				o[i+16] = q>>4 + 120
			}
			fill8(wf[8*b:8*b+8], d)
		}
	case tensor.Q4_K:
		for sb := range nb / 8 {
			blk := row[sb*q4KBlock : (sb+1)*q4KBlock]
			dsc, dmn := q4KScales(blk)
			for j := range 8 {
				b := 8*sb + j
				qs := blk[16+32*(j/2) : 16+32*(j/2)+32]
				shift := 4 * uint(j&1)
				for i, q := range qs {
					u[32*b+i] = q>>shift&0x0f + 128
				}
				fill8(wf[8*b:8*b+8], dsc[j])
				m[b] = dmn[j]
			}
		}
	case tensor.Q6_K:
		for sb := range nb / 8 {
			blk := row[sb*q6KBlock : (sb+1)*q6KBlock]
			sc := q6KScales(blk)
			for j := range 8 {
				b := 8*sb + j
				h, i := j/4, j%4
				ql := blk[64*h+32*(i%2) : 64*h+32*(i%2)+32]
				qh := blk[128+32*h : 128+32*h+32]
				lshift, hshift := 4*uint(i/2), 2*uint(i)
				for e := range 32 {
					u[32*b+e] = ql[e]>>lshift&0x0f | (qh[e]>>hshift&3)<<4 + 96 // (q-32) + 128
				}
				fill8(wf[8*b:8*b+4], sc[8*h+2*i])
				fill8(wf[8*b+4:8*b+8], sc[8*h+2*i+1])
			}
		}
	case tensor.Q8G:
		ng := w.Cols / w.GroupSize
		spg := w.GroupSize / qBlock
		for b := range nb {
			s := math.Float32frombits(binary.LittleEndian.Uint32(w.Scales[4*(r*ng+b/spg):]))
			for i, q := range row[32*b : 32*b+32] {
				u[32*b+i] = q ^ 0x80
			}
			fill8(wf[8*b:8*b+8], s)
		}
	default:
		panic("kernels: no unpacking for " + w.Type.String())
	}
}

func fill8(dst []float32, v float32) {
	for i := range dst {
		dst[i] = v
	}
}

// gemmPacked is a batch of quantized activations laid out for the integer
// GEMM kernel: for each group of 8 vectors and each pair of blocks p, for
// each vector t of the group, 192 bytes: its 64 codes, its 16 negated 4-code
// sums (int32) and its 16 block scales, each repeated for the 8 lanes of its
// block (float32). A lone last block is padded with zero codes, sums and
// scales (adding +0 to a lane changes nothing).
type gemmPacked struct {
	npairs int
	buf    []byte // groups * npairs * 8 * 192
}

const gemmPackStride = 192

var gemmPackedPool sync.Pool // of *gemmPacked

// packGEMM packs the whole groups of a.
func packGEMM(a *actQ) *gemmPacked {
	p, _ := gemmPackedPool.Get().(*gemmPacked)
	if p == nil {
		p = new(gemmPacked)
	}
	groups := a.n / gemmGroup
	p.npairs = (a.nb + 1) / 2
	p.buf = grow(p.buf, groups*p.npairs*gemmGroup*gemmPackStride)
	for g := range groups {
		for t := range gemmGroup {
			q, d, _ := a.vec(g*gemmGroup + t)
			ls := a.lanes(g*gemmGroup + t)
			for pr := range p.npairs {
				o := p.buf[((g*p.npairs+pr)*gemmGroup+t)*gemmPackStride:][:gemmPackStride]
				for h := range 2 {
					b := 2*pr + h
					codes, sums, scales := o[32*h:32*h+32], o[64+32*h:64+32*h+32], o[128+32*h:128+32*h+32]
					if b >= a.nb {
						clear(codes)
						clear(sums)
						clear(scales)
						continue
					}
					for i, v := range q[32*b : 32*b+32] {
						codes[i] = byte(v)
					}
					for i, v := range ls[8*b : 8*b+8] {
						binary.LittleEndian.PutUint32(sums[4*i:], uint32(v))
					}
					bits := math.Float32bits(d[b])
					for i := range 8 {
						binary.LittleEndian.PutUint32(scales[4*i:], bits)
					}
				}
			}
		}
	}
	return p
}

// gemmRows computes rows [r0, r1) of p for every vector with the GEMM
// kernels, reporting false when there are none for p's type at this level.
func (j *job) gemmRows(p *product, r0, r1 int, scratch *[]float32) bool {
	if j.tokens < gemmGroup || noGEMM {
		return false
	}
	w := p.w
	groups := j.tokens / gemmGroup
	rows := w.Rows
	var tile [gemmGroup]float32
	// scatter stores a tile: vector g*8+t, row r (minus Q4_K's minimums).
	scatter := func(g, r int, mins *[gemmGroup]float32) {
		out := p.out[g*gemmGroup*rows+r:]
		if mins != nil {
			for t := range gemmGroup {
				out[t*rows] = tile[t] - mins[t]
			}
			return
		}
		_ = out[(gemmGroup-1)*rows]
		for t := range gemmGroup {
			out[t*rows] = tile[t]
		}
	}
	if p.intDot {
		if j.xp == nil || !gemmIntOK() {
			return false
		}
		up, _ := unpackedPool.Get().(*unpacked)
		if up == nil {
			up = new(unpacked)
		}
		defer unpackedPool.Put(up)
		cols, nb, np := w.Cols, w.Cols/32, j.xp.npairs
		us, ws := 64*np, 16*np // per-row strides, a lone last block padded with zeros
		up.u, up.w, up.m = grow(up.u, gemmRowBlock*us), grow(up.w, gemmRowBlock*ws), grow(up.m, gemmRowBlock*nb)
		var mins [gemmGroup]float32
		for rb := r0; rb < r1; rb += gemmRowBlock {
			re := min(rb+gemmRowBlock, r1)
			for r := rb; r < re; r++ {
				i := r - rb
				u, wf := up.u[i*us:(i+1)*us], up.w[i*ws:(i+1)*ws]
				unpackRow(w, r, u[:cols], wf[:cols/4], up.m[i*nb:(i+1)*nb])
				clear(u[cols:])
				clear(wf[cols/4:])
			}
			for g := range groups {
				xp := j.xp.buf[g*np*gemmGroup*gemmPackStride:]
				for r := rb; r < re; r++ {
					i := r - rb
					gemmInt(up.u[i*us:(i+1)*us], up.w[i*ws:(i+1)*ws], np, xp, &tile)
					if w.Type == tensor.Q4_K {
						q4kMins(up.m[i*nb:(i+1)*nb], j.xq, g*gemmGroup, &mins)
						scatter(g, r, &mins)
						continue
					}
					scatter(g, r, nil)
				}
			}
		}
	} else {
		if !gemmF32OK() || w.Cols%32 != 0 {
			return false
		}
		cols := w.Cols
		direct := w.Type == tensor.F32 && aligned4(w.Data)
		var rowsBuf []float32
		if !direct {
			buf, _ := gemmRowsPool.Get().(*[]float32)
			if buf == nil {
				buf = new([]float32)
			}
			defer gemmRowsPool.Put(buf)
			*buf = grow(*buf, gemmRowBlock*cols)
			rowsBuf = *buf
		}
		for rb := r0; rb < r1; rb += gemmRowBlock {
			re := min(rb+gemmRowBlock, r1)
			if !direct {
				for r := rb; r < re; r++ {
					DequantRow(rowsBuf[(r-rb)*cols:(r-rb+1)*cols], w, r)
				}
			}
			for g := range groups {
				x := j.x[g*gemmGroup*cols:]
				for r := rb; r < re; r++ {
					var row []float32
					if direct {
						row = tensor.AsF32(w.Row(r))
					} else {
						row = rowsBuf[(r-rb)*cols : (r-rb+1)*cols]
					}
					gemmF32(row, x, cols, &tile)
					scatter(g, r, nil)
				}
			}
		}
	}
	// The vectors after the last whole group, one at a time.
	for t := groups * gemmGroup; t < j.tokens; t++ {
		j.rowsOne(p, t, r0, r1, scratch)
	}
	return true
}
