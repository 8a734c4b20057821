package codec

import (
	"math"

	"github.com/seamlm/seam/codec/entropy"
)

// Trellis-coded quantization (docs/codec.md §11.7). The reconstruction
// levels of a component are the multiples of half its step, split into two
// unions: the even multiples (union 0, j*step, the midtread grid) and the
// odd ones (union 1, (j+1/2)*step, the midrise grid). A state machine runs
// over the components of a token, starting in state 0: the state says which
// union the next component's level comes from, and the parity of the cell
// index j chosen within it moves the machine on. The encoder searches the
// sequence of cells of least squared error (a Viterbi search over the
// states); the decoder follows the machine, so the state costs no bits. A
// component's cell is entropy-coded with the table of its union.
//
// Against a scalar quantizer of the same step (the same alphabet, so about
// the same rate), the search can pick from twice as many levels along
// paths the machine allows; for Gaussian sources at these rates an 8-state
// machine lowers the squared error by about 1 dB.

// trellisStates is the number of states of the machine the format fixes.
const trellisStates = 8

// trellisFar bounds a coefficient, in steps, in the search: past the
// outermost level (at most MaxIndex+1/2 steps out) by so much that the
// outermost cells win every comparison, and small enough that squared
// errors summed over MaxWidth components stay finite and exact to far
// below a step.
const trellisFar = 1 << 30

// trellis is the state machine: union[s] is the union of state s, and
// next[s][p] the state after a cell of parity p (j&1) is chosen in it.
type trellis struct {
	union [trellisStates]uint8
	next  [trellisStates][2]uint8
	// into[n] are the two branches entering state n, the lower state first.
	into [trellisStates][2]branch
}

// branch is a transition out of state from on a cell of the given parity;
// cand is 2*union(from) + parity, the index of its cell among a component's
// four candidates.
type branch struct{ from, parity, cand uint8 }

// newTrellis builds the 8-state shift-register machine: after a cell of
// parity p in state s the register shifts in the bit p xor parity(s & flip),
// and the union of a state is parity(s & unionMask). With unionMask inside
// the low two bits and flip holding the top bit, the two branches entering a
// state come from states of the same union and carry different subsets (the
// rules Ungerboeck's codes follow).
func newTrellis(unionMask, flip uint) *trellis {
	const n = trellisStates
	t := &trellis{}
	for s := 0; s < n; s++ {
		t.union[s] = uint8(parity(uint(s) & unionMask))
		for p := uint(0); p < 2; p++ {
			bit := p ^ parity(uint(s)&flip)
			t.next[s][p] = uint8((uint(s)<<1 | bit) & (n - 1))
		}
	}
	// Each state is entered from states s and s|n/2 (the bit shifted out),
	// in that order.
	for s := 0; s < n; s++ {
		for p := uint8(0); p < 2; p++ {
			dst := t.next[s][p]
			t.into[dst][s/(n/2)] = branch{uint8(s), p, 2*t.union[s] + p}
		}
	}
	return t
}

func parity(x uint) uint {
	x ^= x >> 16
	x ^= x >> 8
	x ^= x >> 4
	x ^= x >> 2
	x ^= x >> 1
	return x & 1
}

// codecTrellis is the machine of format version 2's trellis scheme: 8
// states, the union of a state the parity of its lowest bit, the shifted-in
// bit the cell's parity flipped by the parity of the state's top two bits.
// Among the twelve 8-state shift registers of this form it had the least
// squared error at equal rate on Gaussian data at three rates (2.1, 3.1 and
// 4.0 bits a value: 1.03, 0.99 and 1.01 dB below the scalar quantizer; the
// others 0.92 to 1.03 dB); 16 and 32 states gained only 0.04 to 0.12 dB
// more for twice and four times the search.
var codecTrellis = newTrellis(1, 6)

// tcQuant is one component's trellis quantizer: cells j in -q..q of union 0
// (value j*step) and -q-1..q of union 1 (value (j+1/2)*step).
type tcQuant struct {
	step, invStep, half float32
	q                   int
}

func newTCQuant(step float32, q int) tcQuant {
	return tcQuant{step: step, invStep: 1 / step, half: step * 0.5, q: q}
}

// value is the level of cell j of union a.
func (q *tcQuant) value(a uint8, j int) float32 {
	return float32(float32(2*j+int(a)) * q.half)
}

// symbol is cell j of union a as its table's symbol.
func (q *tcQuant) symbol(a uint8, j int) int { return j + q.q + int(a) }

// cells is the alphabet size of union a.
func (q *tcQuant) cells(a uint8) int { return 2*q.q + 1 + int(a) }

// viterbi is the encoder's search scratch for one token.
type viterbi struct {
	cells []int32 // k x 4: component i's candidate of union a, parity p at 4i+2a+p
	back  []uint8 // k: bit n set when state n was reached by its second branch in
}

func (v *viterbi) grow(k int) {
	if cap(v.cells) < 4*k {
		v.cells, v.back = make([]int32, 4*k), make([]uint8, k)
	}
	v.cells, v.back = v.cells[:4*k], v.back[:k]
}

// search picks the cells of y (one token's k coefficients) that minimize
// the squared error, measured in units of each component's step (for a fit
// for the output the steps are S/sqrt(w_i), so this is the weighted error
// up to a constant factor). It writes each component's union and cell.
//
// The search prices error alone, not the cells' code lengths: with a
// Lagrangian rate term (entropy-constrained TCQ) at 0.06, 0.115 and 0.2
// squared steps a bit, the 25-byte codec of stories260K's boundary 4 had
// the same KL to within -1 % and +3 % at equal bytes (docs/codec.md §11.7).
//
// Candidates are, in each union, the two cells around the coefficient: one
// of each parity, the nearest of that parity. The best cell of each branch
// is among them, so the search finds the least-error path
// (TestTrellisSearchIsOptimal). The cost of a branch depends only on its union and
// parity, so each component computes four candidates and each state keeps
// the cheaper of its two entering branches. Ties go to the branch from the
// lower state and, at the end, to the lower state, so the result is one
// function of y on every machine: the arithmetic is float64 of exactly
// representable operands, every product explicitly rounded.
func (t *trellis) search(v *viterbi, qs []tcQuant, y []float32, unions []uint8, cells []int) {
	k := len(qs)
	v.grow(k)
	var cost [trellisStates]float64
	for s := 1; s < trellisStates; s++ {
		cost[s] = math.Inf(1)
	}
	for i := range qs {
		q := &qs[i]
		u := float64(float32(y[i] * q.invStep))
		if !(u >= -trellisFar && u <= trellisFar) {
			// Far outside the levels only the outermost cells are
			// candidates, but their costs still differ by an amount that
			// grows with u, so u is not clamped to the levels; only an
			// infinity is bounded, and NaN taken as 0.
			switch {
			case u != u:
				u = 0
			case u > 0:
				u = trellisFar
			default:
				u = -trellisFar
			}
		}
		// In each union the nearest cell of each parity is one of the two
		// cells around u, which have different parities: union 0's cells
		// sit on the integers, union 1's on the half-integers (cell c at
		// c + 1/2). At the ends the pair is the two outermost cells.
		f0 := max(min(int(math.Floor(u)), q.q-1), -q.q)
		f1 := max(min(int(math.Floor(u-0.5)), q.q-1), -q.q-1)
		d0, d1 := u-float64(f0), u-0.5-float64(f1)
		var errs [4]float64
		p0, p1 := f0&1, 2+f1&1
		errs[p0], errs[p0^1] = float64(d0*d0), float64((d0-1)*(d0-1))
		errs[p1], errs[p1^1] = float64(d1*d1), float64((d1-1)*(d1-1))
		cand := v.cells[4*i : 4*i+4 : 4*i+4]
		cand[p0], cand[p0^1] = int32(f0), int32(f0+1)
		cand[p1], cand[p1^1] = int32(f1), int32(f1+1)
		v.back[i] = butterfly(&cost, &errs)
	}
	s := 0
	for n := 1; n < trellisStates; n++ {
		if cost[n] < cost[s] {
			s = n
		}
	}
	for i := k - 1; i >= 0; i-- {
		b := t.into[s&7][v.back[i]>>s&1]
		unions[i], cells[i] = b.cand>>1, int(v.cells[4*i+int(b.cand)])
		s = int(b.from)
	}
}

// butterfly moves the path costs of codecTrellis on by one component whose
// four candidates cost e (index 2*union + parity): each state keeps the
// cheaper of its two entering branches, the one from the lower state on a
// tie, and bit n of the result says state n took its second branch. It is
// codecTrellis.into written out, so that the eight costs stay in registers
// (the table-driven loop took four times as long); TestButterflyIsTheMachine
// checks it against the table. Each selection compiles to a compare and a
// short jump. Measured alternatives, all slower on the 2-vCPU build machine
// (BenchmarkTrellisSearch, 19-20 ns a component with this one): the builtin
// min (23 ns), a branch-free selection on the costs' bit patterns (28 ns),
// and the costs kept in locals across the whole loop (19-20 ns, no gain).
func butterfly(c *[trellisStates]float64, e *[4]float64) uint8 {
	s0, s1, s2, s3, s4, s5, s6, s7 := c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
	e0, e1, e2, e3 := e[0], e[1], e[2], e[3]
	var b [trellisStates]uint8
	c[0], b[0] = cheaper(s0+e0, s4+e1)
	c[1], b[1] = cheaper(s0+e1, s4+e0)
	c[2], b[2] = cheaper(s1+e2, s5+e3)
	c[3], b[3] = cheaper(s1+e3, s5+e2)
	c[4], b[4] = cheaper(s2+e1, s6+e0)
	c[5], b[5] = cheaper(s2+e0, s6+e1)
	c[6], b[6] = cheaper(s3+e3, s7+e2)
	c[7], b[7] = cheaper(s3+e2, s7+e3)
	return b[0] | b[1]<<1 | b[2]<<2 | b[3]<<3 | b[4]<<4 | b[5]<<5 | b[6]<<6 | b[7]<<7
}

// cheaper is the smaller of two costs, the first on a tie, and 1 when it is
// the second.
func cheaper(first, second float64) (float64, uint8) {
	if second < first {
		return second, 1
	}
	return first, 0
}

// encodeTrellis codes one token's cells into e, the tables two per
// component (union 0, union 1).
func encodeTrellis(e *entropy.Encoder, tables []*entropy.Table, qs []tcQuant, unions []uint8, cells []int) {
	for i := range qs {
		a := unions[i]
		e.Encode(tables[2*i+int(a)], qs[i].symbol(a, cells[i]))
	}
}

// decodeTrellis reads one token's levels from d, following the machine
// from state 0.
func (t *trellis) decode(d *entropy.Decoder, tables []*entropy.Table, qs []tcQuant, v []float32) {
	s := 0
	for i := range qs {
		q := &qs[i]
		a := t.union[s]
		j := d.Decode(tables[2*i+int(a)]) - q.q - int(a)
		v[i] = q.value(a, j)
		s = int(t.next[s][j&1])
	}
}
