package kernels

import (
	"encoding/binary"
	"math"
	"sync"
	"unsafe"

	"github.com/seamlm/seam/tensor"
)

// The batched product (GEMM) of MatMuls for n >= 4 vectors.
//
// It computes exactly the bits MatVec computes for each vector: the same
// summation orders (Dot's for the float types, intdot.go's for the integer
// ones), only several of them at once, so a batch and its vectors one by
// one agree bit for bit.
//
// Float types: the register tile is one row by 8 vectors, the row loaded
// (f16, bf16: widened) once per tile; rows go gemmRowBlock at a time so that
// a group of vectors stays in cache across them. With AVX-512's 32
// registers the tile is two rows by 4 vectors instead, each vector's values
// loaded once for both rows: fewer loads per product, and it pays from 4
// vectors where the 8-vector tile needed 24.
//
// Integer types: the tile is 16 rows by 4 vectors. The 16 rows are unpacked
// once per block of rows into an interleaved form (for each unit and each
// group of 4 values, the 16 rows' 4 bytes side by side, then the rows' unit
// factors), so that each lane of a register follows one row: one VPDPBUSD
// per group of 4 values serves 16 rows, and the float step of the order,
// one product per unit, is done for 16 rows at once. The vectors are packed
// once per call (gemmPacked). Q8_0 and Q4_0 rows are interleaved straight
// from their blocks by a register transpose (interleaveFused), the other
// types through unpackRow.
//
// Vectors left over after the last whole group go through the per-vector
// kernels. Without an assembly GEMM for the type and level, every vector
// does.

const (
	gemmGroup    = 8  // vectors per float tile (the kernels are written for 8)
	gemmRowBlock = 16 // float rows widened and applied to every group in turn

	// Below these many vectors the tiles lose to rowsBlocked (the
	// per-vector kernels over a block of rows at a time), which reads the
	// weights once too without the tiles' packing and interleaving:
	// BenchmarkSmallBatchDRAM, 2048x768 from memory on 2 threads
	// (2026-12-02), ns per vector f32 at 8/16/32 vectors: blocked 42/34/32,
	// AVX2's 8-vector tile 60/38/28; q8_0 at 4/8/16, before the fused
	// interleave: blocked 35/27/25, tiles 61/34/19.
	gemmF32Min = 24
	gemmIntMin = 12

	// With AVX-512 the float types use the small tile (2 rows by
	// gemmSmallGroup vectors) from gemmSmallMin vectors instead: it beats
	// both the blocked path and the 8-vector tile at every count from 4
	// (BenchmarkMatMulBatch and -bench SmallBatchDRAM, 2026-12-02: 768x768,
	// one thread, CPU ns per vector 9.5-9.9K at 4 to 64 vectors, against
	// 15-18K blocked and 10.4-11.2K for the 8-vector tile at 24 and 64).
	gemmSmallMin   = 4
	gemmSmallGroup = 4
	// gemmPrefetchRows is how far ahead of its rows the small tile
	// prefetches.
	gemmPrefetchRows = 8

	// Q8_0 and Q4_0 blocks are transposed into the integer tile's form in
	// registers (interleaveFused), so their tile pays from 4 vectors: -bench
	// SmallBatchDRAM, q8_0, ns per vector at 4/8/16 vectors: tiles
	// 17-21/10-12/7-8K, blocked 25-27/21-24/19-22K (2026-12-02).
	gemmFusedMin = 4

	gemmIntRows   = 16                        // rows per integer tile (a register's lanes)
	gemmIntVecs   = 4                         // vectors per integer tile
	gemmIntTile   = gemmIntRows * gemmIntVecs // results per integer tile
	gemmPackEntry = 64                        // bytes per unit and vector in a gemmPacked
)

// unpacked is a block of quantized rows in the GEMM's common form: for each
// value, the unsigned byte c+128 (c the integer code of intdot.go); for each
// group of 4 values, the float32 factor W; for each block of 32 (Q4_K only),
// the minimum factor M = dmin*mn_j.
type unpacked struct {
	u []byte
	w []float32
	m []float32
	// The interleaved block of 16 rows the integer tile reads, and Q4_K's
	// minimum factors as [block][16 rows].
	il  []byte
	mil []float32
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

// unitValues is the number of values in one unit of the integer-dot order.
func unitValues(t tensor.DType) int {
	if t == tensor.Q6_K {
		return 16
	}
	return 32
}

// unitStride is the bytes of one unit of an interleaved block of rows: its
// groups of 4 values for 16 rows, then the 16 rows' factors.
func unitStride(unitVals int) int { return unitVals/4*gemmIntRows*4 + gemmIntRows*4 }

// gemmPacked is a batch of quantized vectors laid out for the integer tile:
// for each group of 4 vectors and each unit, for each vector of the group,
// 64 bytes: the unit's codes (32 or 16 bytes), at 32 the int32 -128 times
// their sum (the accumulator's start, undoing the weights' +128), at 36 the
// float32 scale of the block holding the unit.
type gemmPacked struct {
	unitVals int
	nunits   int
	buf      []byte // groups * nunits * 4 * 64
}

var gemmPackedPool sync.Pool // of *gemmPacked

// packGEMM packs the whole groups of 4 vectors of a for units of unitVals,
// a group per item of a Parallel call.
func packGEMM(a *actQ, unitVals int) *gemmPacked {
	p, _ := gemmPackedPool.Get().(*gemmPacked)
	if p == nil {
		p = new(gemmPacked)
	}
	groups := a.n / gemmIntVecs
	p.unitVals, p.nunits = unitVals, a.cols/unitVals
	p.buf = grow(p.buf, groups*p.nunits*gemmIntVecs*gemmPackEntry)
	Parallel(groups, Threads(), func(_, g int) {
		for t := range gemmIntVecs {
			v := g*gemmIntVecs + t
			q, d, _ := a.vec(v)
			ls := a.lanes(v) // negated sums of each 4 codes
			for u := range p.nunits {
				e := p.buf[((g*p.nunits+u)*gemmIntVecs+t)*gemmPackEntry:][:gemmPackEntry]
				copy(e, unsafe.Slice((*byte)(unsafe.Pointer(&q[u*unitVals])), unitVals))
				var neg int32
				for _, s := range ls[u*unitVals/4 : (u+1)*unitVals/4] {
					neg += s
				}
				binary.LittleEndian.PutUint32(e[32:], uint32(128*neg)) // -128 * sum
				binary.LittleEndian.PutUint32(e[36:], math.Float32bits(d[u*unitVals/32]))
			}
		}
	})
	return p
}

// interleave unpacks rows [r0, r0+16) of w (rows past r1 as zeros) into the
// integer tile's form in up.il (and Q4_K's minimum factors in up.mil).
func (up *unpacked) interleave(w *tensor.Tensor, r0, r1, unitVals int) {
	up.il = grow(up.il, w.Cols/unitVals*unitStride(unitVals))
	if r1-r0 >= gemmIntRows && interleaveFused(w, r0, up.il) {
		return
	}
	up.interleaveUnpacked(w, r0, r1, unitVals)
}

// interleaveUnpacked is interleave by way of unpackRow: every type, and
// blocks of fewer than 16 rows.
func (up *unpacked) interleaveUnpacked(w *tensor.Tensor, r0, r1, unitVals int) {
	cols, nb := w.Cols, w.Cols/32
	nu, us := cols/unitVals, unitStride(unitVals)
	groups := unitVals / 4
	up.u, up.w, up.m = grow(up.u, gemmIntRows*cols), grow(up.w, gemmIntRows*cols/4), grow(up.m, gemmIntRows*nb)
	up.il = grow(up.il, nu*us)
	for k := range gemmIntRows {
		u, wf, m := up.u[k*cols:(k+1)*cols], up.w[k*cols/4:(k+1)*cols/4], up.m[k*nb:(k+1)*nb]
		if r := r0 + k; r < r1 {
			unpackRow(w, r, u, wf, m)
		} else {
			clear(u)
			clear(wf)
			clear(m)
		}
	}
	if w.Type == tensor.Q4_K {
		up.mil = grow(up.mil, nb*gemmIntRows)
		for k := range gemmIntRows {
			for b, v := range up.m[k*nb : (k+1)*nb] {
				up.mil[b*gemmIntRows+k] = v
			}
		}
	}
	if interleaveSIMD(up.u, up.w, cols, unitVals, up.il) {
		return
	}
	// As 32-bit words: word g of unit u of row k goes to word 16g+k of the
	// unit's part of the block, the unit's factor to word 16*groups+k.
	src := unsafe.Slice((*uint32)(unsafe.Pointer(&up.u[0])), gemmIntRows*cols/4)
	dst := unsafe.Slice((*uint32)(unsafe.Pointer(&up.il[0])), nu*us/4)
	for k := range gemmIntRows {
		row := src[k*cols/4 : (k+1)*cols/4]
		for u := range nu {
			unit := dst[u*us/4 : (u+1)*us/4]
			for g, v := range row[u*groups : (u+1)*groups] {
				unit[16*g+k] = v
			}
			unit[16*groups+k] = math.Float32bits(up.w[k*cols/4+u*unitVals/4])
		}
	}
}

// gemmRows computes rows [r0, r1) of p with the GEMM kernels for the
// vectors of whole tiles, and returns how many vectors it did: 0 when there
// are no kernels for p's type at this level, or fewer vectors than a tile.
func (j *job) gemmRows(p *product, r0, r1 int, scratch *[]float32) int {
	if noGEMM {
		return 0
	}
	if p.intDot {
		return j.gemmIntRows(p, r0, r1, scratch)
	}
	w := p.w
	if w.Cols%32 != 0 {
		return 0
	}
	if gemmF32SmallOK() {
		if j.tokens < gemmSmallMin {
			return 0
		}
		return j.gemmSmallRows(p, r0, r1)
	}
	if j.tokens < gemmF32Min || !gemmF32OK() {
		return 0
	}
	cols, rows, groups := w.Cols, w.Rows, j.tokens/gemmGroup
	src := newRowSource(w)
	defer src.release()
	var tile [gemmGroup]float32
	for rb := r0; rb < r1; rb += gemmRowBlock {
		re := min(rb+gemmRowBlock, r1)
		block := src.block(rb, re)
		for g := range groups {
			x := j.x[g*gemmGroup*cols:]
			for r := rb; r < re; r++ {
				gemmF32(block[(r-rb)*cols:(r-rb+1)*cols], x, cols, &tile)
				// Vector g*8+t, row r.
				out := p.out[g*gemmGroup*rows+r:]
				_ = out[(gemmGroup-1)*rows]
				for t, v := range tile {
					out[t*rows] = v
				}
			}
		}
	}
	return groups * gemmGroup // the caller does the vectors after the last whole group
}

// rowSource gives the float rows [r0, r1) of a product: the weights
// themselves for aligned f32, otherwise widened into a pooled buffer.
type rowSource struct {
	w      *tensor.Tensor
	direct bool
	buf    *[]float32
}

func newRowSource(w *tensor.Tensor) rowSource {
	rs := rowSource{w: w, direct: w.Type == tensor.F32 && aligned4(w.Data)}
	if !rs.direct {
		rs.buf, _ = gemmRowsPool.Get().(*[]float32)
		if rs.buf == nil {
			rs.buf = new([]float32)
		}
		*rs.buf = grow(*rs.buf, gemmRowBlock*w.Cols)
	}
	return rs
}

// block returns rows [r0, r1) (at most gemmRowBlock) as one slice, row r at
// (r-r0)*cols.
func (rs rowSource) block(r0, r1 int) []float32 {
	cols := rs.w.Cols
	if rs.direct {
		return tensor.AsF32(rs.w.Data)[r0*cols : r1*cols]
	}
	b := (*rs.buf)[:(r1-r0)*cols]
	for r := r0; r < r1; r++ {
		DequantRow(b[(r-r0)*cols:(r-r0+1)*cols], rs.w, r)
	}
	return b
}

// prefetch returns the rows the small tile prefetches while it runs rows r
// and r+next/cols against group g: gemmPrefetchRows ahead, on the first
// group's pass, when the tile reads the block from memory (later groups
// find it in cache); nil for the others, and for widened rows.
func (rs rowSource) prefetch(g, r, next int) []float32 {
	pr := r + gemmPrefetchRows
	if !rs.direct || g != 0 || pr+1 >= rs.w.Rows {
		return nil
	}
	cols := rs.w.Cols
	return tensor.AsF32(rs.w.Data)[pr*cols : (pr+1)*cols+next]
}

func (rs rowSource) release() {
	if rs.buf != nil {
		gemmRowsPool.Put(rs.buf)
	}
}

// gemmSmallRows is gemmRows with the small float tile: rows two at a time
// against groups of gemmSmallGroup vectors.
func (j *job) gemmSmallRows(p *product, r0, r1 int) int {
	w := p.w
	cols, rows, groups := w.Cols, w.Rows, j.tokens/gemmSmallGroup
	src := newRowSource(w)
	defer src.release()
	var tile [gemmGroup]float32
	for rb := r0; rb < r1; rb += gemmRowBlock {
		re := min(rb+gemmRowBlock, r1)
		block := src.block(rb, re)
		for g := range groups {
			x := j.x[g*gemmSmallGroup*cols:]
			out := p.out[g*gemmSmallGroup*rows:]
			for r := rb; r < re; r += 2 {
				next := cols // the second row; 0 repeats the first for an odd last row
				if r+1 == re {
					next = 0
				}
				gemmF32R2(block[(r-rb)*cols:], next, x, cols, &tile, src.prefetch(g, r, next))
				for t := range gemmSmallGroup {
					out[t*rows+r] = tile[t]
				}
				if next != 0 {
					for t := range gemmSmallGroup {
						out[t*rows+r+1] = tile[gemmSmallGroup+t]
					}
				}
			}
		}
	}
	return groups * gemmSmallGroup
}

// gemmIntRows is gemmRows for the integer types.
func (j *job) gemmIntRows(p *product, r0, r1 int, scratch *[]float32) int {
	w := p.w
	uv := unitValues(w.Type)
	xp := j.packedFor(uv)
	if xp == nil || xp.nunits%4 != 0 {
		return 0
	}
	up, _ := unpackedPool.Get().(*unpacked)
	if up == nil {
		up = new(unpacked)
	}
	defer unpackedPool.Put(up)
	rows, groups := w.Rows, j.tokens/gemmIntVecs
	var mins [gemmIntTile]float32 // zeros unless Q4_K
	for rb := r0; rb < r1; rb += gemmIntRows {
		up.interleave(w, rb, r1, uv)
		n := min(gemmIntRows, r1-rb)
		for g := range groups {
			if w.Type == tensor.Q4_K {
				for t := range gemmIntVecs {
					q4kMins(up.mil, j.xq, g*gemmIntVecs+t, mins[t*gemmIntRows:(t+1)*gemmIntRows])
				}
			}
			gemmInt(up.il, uv, xp.nunits, xp.buf[g*xp.nunits*gemmIntVecs*gemmPackEntry:],
				p.out[g*gemmIntVecs*rows+rb:], rows, n, &mins)
		}
	}
	return groups * gemmIntVecs
}

// gemmIntMinFor is the fewest vectors for which the integer tile runs on
// a matrix of type t.
func gemmIntMinFor(t tensor.DType) int {
	if fusedInterleaveOK(t) {
		return gemmFusedMin
	}
	return gemmIntMin
}

// packedFor returns the job's vectors packed for units of unitVals, or nil
// when the integer tile does not run.
func (j *job) packedFor(unitVals int) *gemmPacked {
	for _, p := range j.xp {
		if p != nil && p.unitVals == unitVals {
			return p
		}
	}
	return nil
}

// pack packs the job's quantized vectors for the integer tile, once per
// unit size its products use, before the products start (spread over the
// threads: a group of 4 vectors per item).
func (j *job) pack() {
	if j.xq == nil || !gemmIntOK() || noGEMM {
		return
	}
	for i := range j.np {
		p := &j.ps[i]
		if !p.intDot || j.tokens < gemmIntMinFor(p.w.Type) {
			continue
		}
		uv := unitValues(p.w.Type)
		if j.packedFor(uv) != nil {
			continue
		}
		k := 0
		if j.xp[0] != nil {
			k = 1
		}
		j.xp[k] = packGEMM(j.xq, uv)
	}
}
