package entropy

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func freqsOf(t *Table) []uint32 {
	f := make([]uint32, t.Symbols())
	for i := range f {
		f[i] = t.Freq(i)
	}
	return f
}

func TestNewTableErrors(t *testing.T) {
	cases := []struct {
		name  string
		freqs []uint32
		prec  uint
		want  error
	}{
		{"precision low", []uint32{512, 512}, 9, ErrPrecision},
		{"precision high", []uint32{1 << 15, 1 << 15}, 16, ErrPrecision},
		{"no symbols", nil, 10, ErrSymbols},
		{"too many symbols", make([]uint32, MaxSymbols+1), 15, ErrSymbols},
		{"more symbols than 1<<precision", make([]uint32, 1025), 10, ErrSymbols},
		{"zero freq", []uint32{1024, 0}, 10, ErrFreq},
		{"freq above total", []uint32{1025}, 10, ErrFreq},
		{"sum low", []uint32{511, 512}, 10, ErrSum},
		{"sum high", []uint32{513, 512}, 10, ErrSum},
	}
	for _, c := range cases {
		_, err := NewTable(c.freqs, c.prec)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	tb, err := NewTable([]uint32{1 << 15}, 15)
	if err != nil || tb.Symbols() != 1 || tb.Precision() != 15 || tb.Freq(0) != 1<<15 || tb.Bits(0) != 0 {
		t.Fatalf("one-symbol table: %v %v", tb, err)
	}
	if tb.Freq(-1) != 0 || tb.Freq(1) != 0 || !math.IsInf(tb.Bits(1), 1) {
		t.Fatal("out-of-range Freq/Bits")
	}
	tb, _ = NewTable([]uint32{256, 768}, 10)
	if tb.Bits(0) != 2 || math.Abs(tb.Bits(1)-(-math.Log2(0.75))) > 1e-12 {
		t.Fatalf("Bits: %v %v", tb.Bits(0), tb.Bits(1))
	}
}

// The golden frequencies below are worked out by hand following the rules
// in TableFromCounts' doc comment; the arithmetic is in the comments.
func TestTableFromCountsGolden(t *testing.T) {
	const two64m1 = math.MaxUint64
	cases := []struct {
		counts []uint64
		prec   uint
		want   []uint32
	}{
		// M=1024, T=2: 512 each, no remainders.
		{[]uint64{1, 1}, 10, []uint32{512, 512}},
		// T=4: 1024*3/4 = 768, 1024/4 = 256.
		{[]uint64{3, 1}, 10, []uint32{768, 256}},
		// T=3: 1024/3 = 341 rem 1 for each; one unit left, tie -> lowest index.
		{[]uint64{1, 1, 1}, 10, []uint32{342, 341, 341}},
		// T=3: 1024/3 = 341 rem 1; 2048/3 = 682 rem 2; the unit goes to rem 2.
		{[]uint64{1, 2}, 10, []uint32{341, 683}},
		// Zero counts: 1024*0 < 1 twice -> 1, 1; last gets M'=1022.
		{[]uint64{0, 0, 1}, 10, []uint32{1, 1, 1022}},
		// Tiny count: 1024*1 < 1000001 -> 1; the other gets 1023.
		{[]uint64{1, 1000000}, 10, []uint32{1, 1023}},
		// All zero: uniform, 1024/3 = 341 rem 1 -> first symbol +1.
		{[]uint64{0, 0, 0}, 10, []uint32{342, 341, 341}},
		// All zero, 4096 symbols at precision 15: 8 each.
		// (checked below separately)
		// [5,1,0,100,3] at M=4096, T=109: symbol 2 (count 0) -> 1, since
		// 4096*0 < 109; then 4095*1 >= 109 stops. M'=4095, T'=109:
		//   sym0 4095*5=20475   = 109*187+92
		//   sym1 4095*1=4095    = 109*37+62
		//   sym3 4095*100=409500= 109*3756+96
		//   sym4 4095*3=12285   = 109*112+77
		// floors sum 4092, 3 units to remainders 96, 92, 77 (syms 3, 0, 4).
		{[]uint64{5, 1, 0, 100, 3}, 12, []uint32{188, 37, 1, 3757, 113}},
		// Four counts of 2^64-1: T = 4*(2^64-1), 256 each exactly.
		{[]uint64{two64m1, two64m1, two64m1, two64m1}, 10, []uint32{256, 256, 256, 256}},
		// [2^64-1, 2^63], T = 3*2^63 - 1, M=1024:
		//   1024*(2^64-1) = 682*T + (2^64-342)
		//     (682*T = 1023*2^64 - 682; the difference is 2^64 - 342 < T)
		//   1024*2^63 = 341*T + (2^63+341)
		//     (341*T = 1023*2^63 - 341 = 511.5*2^64 - 341)
		// floors 682+341 = 1023; the unit goes to the larger remainder, sym 0.
		{[]uint64{two64m1, 1 << 63}, 10, []uint32{683, 341}},
		// [2^64-1, 0, 1] at M=1024: sym1 -> 1 (count 0), then sym2: 1023*1 < 2^64
		// -> 1; sym0 gets 1022.
		{[]uint64{two64m1, 0, 1}, 10, []uint32{1022, 1, 1}},
	}
	for _, c := range cases {
		tb, err := TableFromCounts(c.counts, c.prec)
		if err != nil {
			t.Fatalf("%v: %v", c.counts, err)
		}
		if got := freqsOf(tb); !slices.Equal(got, c.want) {
			t.Errorf("%v at %d: got %v, want %v", c.counts, c.prec, got, c.want)
		}
	}
	tb, err := TableFromCounts(make([]uint64, MaxSymbols), 15)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range freqsOf(tb) {
		if f != 8 {
			t.Fatalf("uniform 4096 at 15: freq[%d] = %d", i, f)
		}
	}
	if _, err := TableFromCounts(make([]uint64, 1025), 10); !errors.Is(err, ErrSymbols) {
		t.Fatalf("1025 symbols at 10: %v", err)
	}
	if _, err := TableFromCounts([]uint64{1}, 16); !errors.Is(err, ErrPrecision) {
		t.Fatalf("precision 16: %v", err)
	}
}

func TestTableFromCountsProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := range 2000 {
		prec := uint(MinPrecision + rng.IntN(MaxPrecision-MinPrecision+1))
		n := 1 + rng.IntN(20)
		if iter%8 == 0 {
			n = 1 + rng.IntN(min(MaxSymbols, 1<<prec))
		}
		counts := make([]uint64, n)
		switch iter % 4 {
		case 0: // small counts with zeros
			for i := range counts {
				counts[i] = uint64(rng.IntN(4))
			}
		case 1: // huge counts
			for i := range counts {
				counts[i] = math.MaxUint64 - uint64(rng.IntN(1000))
			}
		case 2: // heavy tail
			for i := range counts {
				counts[i] = uint64(math.Exp(rng.Float64() * 40))
			}
		case 3: // one dominant symbol
			counts[rng.IntN(n)] = rng.Uint64()
		}
		tb, err := TableFromCounts(counts, prec)
		if err != nil {
			t.Fatal(err)
		}
		f := freqsOf(tb)
		var sum uint64
		for i := range f {
			if f[i] < 1 {
				t.Fatalf("freq %d = 0", i)
			}
			sum += uint64(f[i])
		}
		if sum != 1<<prec {
			t.Fatalf("sum %d", sum)
		}
		// Monotone: a larger count never gets a smaller frequency.
		for i := range f {
			for j := range f {
				if counts[i] > counts[j] && f[i] < f[j] {
					t.Fatalf("counts %d > %d but freqs %d < %d", counts[i], counts[j], f[i], f[j])
				}
			}
			if i > 50 {
				break
			}
		}
		// Exactly the reference computed with math/big by the plain
		// fixed-point iteration of the rule.
		if want := refFromCounts(counts, prec); !slices.Equal(f, want) {
			t.Fatalf("counts %v: got %v, want %v", counts, f, want)
		}
		// Deterministic: same input, same table.
		tb2, _ := TableFromCounts(slices.Clone(counts), prec)
		if !slices.Equal(freqsOf(tb2), f) {
			t.Fatal("not deterministic")
		}
	}
}

func TestParseTable(t *testing.T) {
	good, _ := NewTable([]uint32{1000, 24}, 10)
	b := good.AppendBinary([]byte{})
	if want := []byte{10, 2, 0, 0xe8, 0x03, 24, 0}; !bytes.Equal(b, want) {
		t.Fatalf("AppendBinary: % x, want % x", b, want)
	}
	tb, n, err := ParseTable(append(b, 0xAA))
	if err != nil || n != len(b) || !slices.Equal(freqsOf(tb), []uint32{1000, 24}) || tb.Precision() != 10 {
		t.Fatalf("ParseTable: %v %d %v", tb, n, err)
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short header", []byte{10, 2}, ErrTruncated},
		{"precision 9", []byte{9, 1, 0, 0, 2}, ErrPrecision},
		{"precision 16", []byte{16, 1, 0, 0, 0}, ErrPrecision},
		{"zero symbols", []byte{10, 0, 0}, ErrSymbols},
		{"4097 symbols", []byte{15, 0x01, 0x10}, ErrSymbols},
		{"1025 symbols at 10", []byte{10, 0x01, 0x04}, ErrSymbols},
		{"truncated freqs", []byte{10, 2, 0, 0xe8, 0x03, 24}, ErrTruncated},
		{"zero freq", []byte{10, 2, 0, 0x00, 0x04, 0, 0}, ErrFreq},
		{"freq above total", []byte{10, 2, 0, 0x01, 0x04, 1, 0}, ErrFreq},
		{"wrong sum", []byte{10, 2, 0, 0xe8, 0x03, 23, 0}, ErrSum},
	}
	msgs := map[string]bool{}
	for _, c := range cases {
		_, n, err := ParseTable(c.b)
		if !errors.Is(err, c.want) || n != 0 {
			t.Errorf("%s: got %v (n=%d), want %v", c.name, err, n, c.want)
			continue
		}
		msgs[c.want.Error()] = true
	}
	if len(msgs) != 5 {
		t.Errorf("distinct sentinel errors: %d, want 5", len(msgs))
	}
	// Every random table survives a round trip; a 4096-symbol 15-bit one too.
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		prec := uint(10 + rng.IntN(6))
		tb := randomTable(rng, 1+rng.IntN(min(MaxSymbols, 1<<prec)), prec)
		b := tb.AppendBinary(nil)
		if len(b) != 3+2*tb.Symbols() {
			t.Fatalf("size %d", len(b))
		}
		tb2, n, err := ParseTable(b)
		if err != nil || n != len(b) || !slices.Equal(freqsOf(tb2), freqsOf(tb)) || tb2.Precision() != tb.Precision() {
			t.Fatalf("round trip: %v", err)
		}
	}
}

// TestFind checks the symbol search against a linear scan for every
// cumulative value.
func TestFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 300 {
		prec := uint(10 + iter%6)
		tb := randomTable(rng, 1+rng.IntN(min(MaxSymbols, 1<<prec)), prec)
		s := 0
		for q := uint32(0); q < 1<<prec; q++ {
			for tb.syms[s].cum+tb.syms[s].freq <= q {
				s++
			}
			if got := tb.find(q); got != s {
				t.Fatalf("find(%d) = %d, want %d", q, got, s)
			}
		}
	}
}

// refFromCounts is an independent statement of TableFromCounts' rule in
// math/big: force to 1 every symbol whose share of what is left is below 1,
// all at once, until none is; then the largest remainder method.
func refFromCounts(counts []uint64, prec uint) []uint32 {
	n := len(counts)
	m := int64(1) << prec
	f := make([]uint32, n)
	c := make([]*big.Int, n)
	total := new(big.Int)
	for i, x := range counts {
		c[i] = new(big.Int).SetUint64(x)
		total.Add(total, c[i])
	}
	if total.Sign() == 0 {
		for i := range f {
			f[i] = uint32(m / int64(n))
			if int64(i) < m%int64(n) {
				f[i]++
			}
		}
		return f
	}
	forced := make([]bool, n)
	var mp, tp *big.Int
	for {
		k := 0
		tp = new(big.Int)
		for i := range c {
			if forced[i] {
				k++
			} else {
				tp.Add(tp, c[i])
			}
		}
		mp = big.NewInt(m - int64(k))
		changed := false
		for i := range c {
			if !forced[i] && new(big.Int).Mul(mp, c[i]).Cmp(tp) < 0 {
				forced[i], changed = true, true
			}
		}
		if !changed {
			break
		}
	}
	var idx []int
	rem := make([]*big.Int, n)
	left := mp.Int64()
	for i := range c {
		if forced[i] {
			f[i] = 1
			continue
		}
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(mp, c[i]), tp, new(big.Int))
		f[i] = uint32(q.Int64())
		left -= q.Int64()
		rem[i] = r
		idx = append(idx, i)
	}
	sort.SliceStable(idx, func(a, b int) bool { return rem[idx[a]].Cmp(rem[idx[b]]) > 0 })
	for _, i := range idx[:left] {
		f[i]++
	}
	return f
}
