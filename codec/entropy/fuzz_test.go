package entropy

import (
	"bytes"
	"slices"
	"testing"
)

// fuzzTables parses up to 64 tables from b; when none parses it returns a
// fixed small table.
func fuzzTables(b []byte) []*Table {
	var tables []*Table
	for len(tables) < 64 {
		t, n, err := ParseTable(b)
		if err != nil {
			break
		}
		tables = append(tables, t)
		b = b[n:]
	}
	if len(tables) == 0 {
		tables = append(tables, mustTable([]uint32{700, 200, 100, 24}, 10))
	}
	return tables
}

func seedTables() [][]byte {
	a := mustTable([]uint32{700, 200, 100, 24}, 10).AppendBinary(nil)
	b := mustTable([]uint32{1, 1<<15 - 2, 1}, 15).AppendBinary(nil)
	c := geometric(16, 0.7, 15).AppendBinary(nil)
	return [][]byte{nil, a, append(slices.Clone(a), b...), append(slices.Clone(c), a...)}
}

func FuzzDecode(f *testing.F) {
	for _, tb := range seedTables() {
		tables := fuzzTables(tb)
		for _, n := range []int{0, 1, 5, 40} {
			syms := make([]int, n)
			for i := range syms {
				syms[i] = (i * 7) % tables[i%len(tables)].Symbols()
			}
			f.Add(tb, encode(f, tables, syms), uint16(n))
		}
		f.Add(tb, []byte{0xff, 0, 1}, uint16(3))
	}
	f.Fuzz(func(t *testing.T, tb, stream []byte, count uint16) {
		tables := fuzzTables(tb)
		n := int(count % 4096)
		got, err := decode(tables, stream, n)
		if err != nil {
			return
		}
		if re := encode(t, tables, got); !bytes.Equal(re, stream) {
			t.Fatalf("accepted % x re-encodes to % x", stream, re)
		}
	})
}

func FuzzParseTable(f *testing.F) {
	for _, tb := range seedTables() {
		f.Add(tb)
		f.Add(append(slices.Clone(tb), 1, 2, 3))
	}
	f.Add([]byte{15, 0, 0x10})
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, n, err := ParseTable(b)
		if err != nil {
			if tb != nil || n != 0 {
				t.Fatal("error with a table")
			}
			return
		}
		if n > len(b) || !bytes.Equal(tb.AppendBinary(nil), b[:n]) {
			t.Fatalf("re-serializes differently")
		}
		tb2, err := NewTable(freqsOf(tb), tb.Precision())
		if err != nil || !slices.Equal(freqsOf(tb2), freqsOf(tb)) {
			t.Fatalf("NewTable disagrees: %v", err)
		}
	})
}

// FuzzRoundTrip builds tables from counts (2 bytes per count, an alphabet
// size and precision from the first bytes of each group) and codes the
// symbols given.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{3, 5, 1, 0, 2, 0, 3, 0}, []byte{0, 1, 2, 2, 1, 0})
	f.Add([]byte{0, 15, 16, 0}, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte{255, 0, 1, 1, 1, 1}, bytes.Repeat([]byte{200}, 300))
	f.Fuzz(func(t *testing.T, spec, symBytes []byte) {
		var tables []*Table
		for len(spec) >= 2 && len(tables) < 64 {
			n := 1 + int(spec[0])
			if spec[0] == 0 {
				n = MaxSymbols
			}
			prec := MinPrecision + uint(spec[1])%6
			spec = spec[2:]
			n = min(n, 1<<prec)
			counts := make([]uint64, n)
			for i := range counts {
				if len(spec) >= 2 {
					counts[i] = uint64(spec[0])<<(spec[1]%57) | uint64(spec[1])
					spec = spec[2:]
				}
			}
			tb, err := TableFromCounts(counts, prec)
			if err != nil {
				t.Fatal(err)
			}
			tables = append(tables, tb)
		}
		if len(tables) == 0 {
			tables = append(tables, mustTable([]uint32{1024}, 10))
		}
		syms := make([]int, len(symBytes))
		for i, b := range symBytes {
			tb := tables[i%len(tables)]
			// Spread the byte over the alphabet, ends included.
			syms[i] = int(b) * (tb.Symbols() - 1) / 255
			if b&1 == 1 {
				syms[i] = int(b) % tb.Symbols()
			}
		}
		out := encode(t, tables, syms)
		got, err := decode(tables, out, len(syms))
		if err != nil || !slices.Equal(got, syms) {
			t.Fatalf("round trip: %v", err)
		}
		if mb, _ := MaxBytes(len(syms), MaxPrecision); len(out) > mb {
			t.Fatalf("%d bytes > MaxBytes %d", len(out), mb)
		}
	})
}
