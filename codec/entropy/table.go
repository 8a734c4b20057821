package entropy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Alphabet and precision limits of a Table.
const (
	MaxSymbols   = 4096 // largest alphabet
	MinPrecision = 10   // smallest precision: frequencies sum to 1<<10
	MaxPrecision = 15   // largest precision: frequencies sum to 1<<15
)

// Errors of NewTable, TableFromCounts and ParseTable. Each returned error
// wraps exactly one of them (test with errors.Is) and names the field and
// its value.
var (
	ErrPrecision = errors.New("entropy: bad table precision")
	ErrSymbols   = errors.New("entropy: bad table symbol count")
	ErrFreq      = errors.New("entropy: bad table frequency")
	ErrSum       = errors.New("entropy: bad table frequency sum")
	ErrTruncated = errors.New("entropy: truncated table")
)

// sym is one symbol's slot in the cumulative layout: [cum, cum+freq).
type sym struct {
	cum, freq uint32
}

// Table holds the static frequencies of an alphabet of n symbols. The
// frequencies are each >= 1 and sum to exactly 1<<precision. A Table is
// immutable and safe for concurrent use.
type Table struct {
	prec    uint
	syms    []sym
	lastCum uint64   // cum of the last symbol
	shift   uint     // the bucket of a cumulative value q is q >> shift
	look    []uint64 // per bucket, packed: see build
}

// Fields of a bucket entry of Table.look. The bucket's values q lie in the
// slots of symbols lo and lo+1 only, unless bit 63 (lookSlow) is set.
const (
	lookSym   = 0  // bits 0..11: lo, the symbol holding the bucket's first value
	lookCum0  = 12 // bits 12..27: cum[lo]
	lookCum1  = 28 // bits 28..43: cum[lo+1] (1<<precision past the end)
	lookCum2  = 44 // bits 44..59: cum[lo+2] (1<<precision past the end)
	lookSlow  = 63 // the bucket holds more than two symbols: binary search
	lookMask  = 0xffff
	lookSymMk = 0xfff
)

func checkShape(n int, precision uint) error {
	if precision < MinPrecision || precision > MaxPrecision {
		return fmt.Errorf("%w: precision %d, want %d..%d", ErrPrecision, precision, MinPrecision, MaxPrecision)
	}
	if n < 1 || n > MaxSymbols || n > 1<<precision {
		return fmt.Errorf("%w: symbols %d, want 1..%d (and at most 1<<precision = %d)",
			ErrSymbols, n, MaxSymbols, 1<<precision)
	}
	return nil
}

// NewTable validates freqs against precision and returns the table. The
// slice is copied.
func NewTable(freqs []uint32, precision uint) (*Table, error) {
	if err := checkShape(len(freqs), precision); err != nil {
		return nil, err
	}
	total := uint64(1) << precision
	var sum uint64
	for i, f := range freqs {
		if f < 1 || uint64(f) > total {
			return nil, fmt.Errorf("%w: freq[%d] = %d, want 1..%d", ErrFreq, i, f, total)
		}
		sum += uint64(f)
	}
	if sum != total {
		return nil, fmt.Errorf("%w: freqs sum to %d, want %d (1<<%d)", ErrSum, sum, total, precision)
	}
	return build(freqs, precision), nil
}

// build makes the table of already validated frequencies.
func build(freqs []uint32, precision uint) *Table {
	n := len(freqs)
	total := uint32(1) << precision
	t := &Table{prec: precision, syms: make([]sym, n)}
	var cum uint32
	for i, f := range freqs {
		t.syms[i] = sym{cum, f}
		cum += f
	}
	t.lastCum = uint64(t.syms[n-1].cum)
	cumAt := func(i int) uint64 {
		if i >= n {
			return uint64(total)
		}
		return uint64(t.syms[i].cum)
	}
	// Buckets: about eight per symbol, at most 4096 and at most one per
	// cumulative value.
	lb := min(uint(bits.Len(uint(n-1)))+3, 12, precision)
	t.shift = precision - lb
	t.look = make([]uint64, 1<<lb)
	lo, hi := 0, 0
	for b := range t.look {
		first := uint32(b) << t.shift
		lastQ := first + 1<<t.shift - 1
		for t.syms[lo].cum+t.syms[lo].freq <= first {
			lo++
		}
		for t.syms[hi].cum+t.syms[hi].freq <= lastQ {
			hi++
		}
		e := uint64(lo)<<lookSym | cumAt(lo)<<lookCum0 | cumAt(lo+1)<<lookCum1 | cumAt(lo+2)<<lookCum2
		if hi-lo > 1 {
			e |= 1 << lookSlow
		}
		t.look[b] = e
	}
	return t
}

// slot returns the symbol whose slot holds q (q < 1<<precision) and the
// slot's cum and freq.
func (t *Table) slot(q uint64) (s int, cum, freq uint64) {
	e := t.look[q>>(t.shift&63)]
	if e>>lookSlow != 0 {
		return t.search(int(e&lookSymMk), q)
	}
	c0 := e >> lookCum0 & lookMask
	c1 := e >> lookCum1 & lookMask
	c2 := e >> lookCum2 & lookMask
	up := -((c1 - q - 1) >> 63) // all ones when q >= cum[lo+1], branch-free
	cum = c0 + (c1-c0)&up
	end := c1 + (c2-c1)&up
	return int(e&lookSymMk) + int(up&1), cum, end - cum
}

// search returns the symbol at lo or after whose slot holds q, with its
// cum and freq.
func (t *Table) search(lo int, q uint64) (int, uint64, uint64) {
	hi := len(t.syms) - 1
	for lo < hi {
		mid := (lo + hi + 1) >> 1
		if uint64(t.syms[mid].cum) <= q {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, uint64(t.syms[lo].cum), uint64(t.syms[lo].freq)
}

// find returns the symbol whose slot holds q.
func (t *Table) find(q uint32) int {
	s, _, _ := t.slot(uint64(q))
	return s
}

// Symbols returns the alphabet size n.
func (t *Table) Symbols() int { return len(t.syms) }

// Precision returns the precision: the frequencies sum to 1<<Precision().
func (t *Table) Precision() uint { return t.prec }

// Freq returns the frequency of sym, or 0 when sym is out of range.
func (t *Table) Freq(sym int) uint32 {
	if uint(sym) >= uint(len(t.syms)) {
		return 0
	}
	return t.syms[sym].freq
}

// Bits returns -log2(freq/2^precision), the ideal code length of sym in
// bits (for rate estimates only; the coder itself uses no floating point).
// It returns +Inf when sym is out of range.
func (t *Table) Bits(sym int) float64 {
	if uint(sym) >= uint(len(t.syms)) {
		return math.Inf(1)
	}
	return float64(t.prec) - math.Log2(float64(t.syms[sym].freq))
}

// AppendBinary appends the serialized table to b (docs/entropy.md): one
// byte of precision, the symbol count as a little-endian uint16, then each
// frequency as a little-endian uint16; 3+2n bytes in all.
func (t *Table) AppendBinary(b []byte) []byte {
	b = append(b, byte(t.prec))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(t.syms)))
	for _, s := range t.syms {
		b = binary.LittleEndian.AppendUint16(b, uint16(s.freq))
	}
	return b
}

// ParseTable parses one table serialized by AppendBinary from the start of
// b and returns it with the number of bytes it took. Bytes after the table
// are not looked at. Every field is checked, and the whole table validated,
// before anything is allocated.
func ParseTable(b []byte) (t *Table, n int, err error) {
	if len(b) < 3 {
		return nil, 0, fmt.Errorf("%w: %d bytes, want at least 3 for the header", ErrTruncated, len(b))
	}
	prec := uint(b[0])
	syms := int(binary.LittleEndian.Uint16(b[1:]))
	if err := checkShape(syms, prec); err != nil {
		return nil, 0, err
	}
	n = 3 + 2*syms
	if len(b) < n {
		return nil, 0, fmt.Errorf("%w: %d bytes, want %d for %d symbols", ErrTruncated, len(b), n, syms)
	}
	total := uint64(1) << prec
	var sum uint64
	for i := range syms {
		f := uint64(binary.LittleEndian.Uint16(b[3+2*i:]))
		if f < 1 || f > total {
			return nil, 0, fmt.Errorf("%w: freq[%d] = %d, want 1..%d", ErrFreq, i, f, total)
		}
		sum += f
	}
	if sum != total {
		return nil, 0, fmt.Errorf("%w: freqs sum to %d, want %d (1<<%d)", ErrSum, sum, total, prec)
	}
	freqs := make([]uint32, syms)
	for i := range freqs {
		freqs[i] = uint32(binary.LittleEndian.Uint16(b[3+2*i:]))
	}
	return build(freqs, prec), n, nil
}

// TableFromCounts builds a table from symbol counts, deterministically and
// with integer arithmetic only (exact 128-bit products and quotients), so
// the same counts give the same table on every machine. Let M = 1<<precision
// and T the sum of the counts.
//
// If T = 0 every symbol gets M/n, and the first M mod n symbols (lowest
// indices) one more.
//
// Otherwise every symbol gets at least 1 and the rest is proportional:
//
//  1. Rank the symbols by (count ascending, index ascending). Walk this
//     order and set a symbol's frequency to 1 while M'*count < T', where M'
//     is M minus the number of symbols already set to 1 and T' the sum of
//     the counts of the symbols not yet set. Such a symbol's proportional
//     share of what is left would be below 1. Equal counts are never split
//     by this rule.
//  2. Each remaining symbol i gets floor(M'*count_i/T') (at least 1 by
//     step 1), and the D = M' - sum of those units left over go one each
//     to the D remaining symbols with the largest remainders
//     (M'*count_i mod T'), ties to the lower index (largest remainder
//     method).
//
// It fails when n is outside 1..MaxSymbols or above M, or precision is
// outside MinPrecision..MaxPrecision.
func TableFromCounts(counts []uint64, precision uint) (*Table, error) {
	n := len(counts)
	if err := checkShape(n, precision); err != nil {
		return nil, err
	}
	m := uint64(1) << precision
	freqs := make([]uint32, n)
	var total u128
	for _, c := range counts {
		total = total.add(u128{0, c})
	}
	if total == (u128{}) {
		for i := range freqs {
			freqs[i] = uint32(m / uint64(n))
			if uint64(i) < m%uint64(n) {
				freqs[i]++
			}
		}
		return build(freqs, precision), nil
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if counts[a] != counts[b] {
			if counts[a] < counts[b] {
				return -1
			}
			return 1
		}
		return a - b
	})
	// Step 1. It stops before the last symbol: there M' >= 1 and T' is its count.
	k, rest := 0, total
	for ; ; k++ {
		c := counts[order[k]]
		if mul64(m-uint64(k), c).cmp(rest) >= 0 {
			break
		}
		rest = rest.sub(u128{0, c})
		freqs[order[k]] = 1
	}
	// Step 2.
	mp := m - uint64(k)
	type remainder struct {
		r   u128
		idx int
	}
	rems := make([]remainder, 0, n-k)
	var sum uint64
	for _, i := range order[k:] {
		q, r := div16(mul64(mp, counts[i]), rest)
		freqs[i] = uint32(q)
		sum += q
		rems = append(rems, remainder{r, i})
	}
	slices.SortFunc(rems, func(a, b remainder) int {
		if c := a.r.cmp(b.r); c != 0 {
			return -c
		}
		return a.idx - b.idx
	})
	for _, r := range rems[:mp-sum] {
		freqs[r.idx]++
	}
	return build(freqs, precision), nil
}

// u128 is an unsigned 128-bit integer for TableFromCounts.
type u128 struct{ hi, lo uint64 }

func mul64(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}
}

func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, b)
	return u128{hi, lo}
}

func (x u128) cmp(y u128) int {
	switch {
	case x.hi < y.hi:
		return -1
	case x.hi > y.hi:
		return 1
	case x.lo < y.lo:
		return -1
	case x.lo > y.lo:
		return 1
	}
	return 0
}

func (x u128) shl(s uint) u128 {
	if s == 0 {
		return x
	}
	return u128{x.hi<<s | x.lo>>(64-s), x.lo << s}
}

// div16 returns num/den and num%den for a quotient below 1<<16 and
// den < 1<<100 (shift-and-subtract long division).
func div16(num, den u128) (uint64, u128) {
	var q uint64
	for s := 15; s >= 0; s-- {
		if d := den.shl(uint(s)); d.cmp(num) <= 0 {
			num = num.sub(d)
			q |= 1 << s
		}
	}
	return q, num
}
