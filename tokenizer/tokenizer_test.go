package tokenizer

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// tiny builds a small vocabulary by hand; ids are the slice positions.
func tiny(t *testing.T, pieces []string, scores []float32, types []int32) *SentencePiece {
	t.Helper()
	tok, err := New(Vocab{Pieces: pieces, Scores: scores, Types: types, BOS: 1, EOS: 2})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tok
}

func TestMergeTiesGoLeftmost(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>", " ", "a", "b", "ab", "ba"}
	tok := tiny(t, pieces, []float32{0, 0, 0, -1, -1, -1, -2, -2}, nil)
	// " aba": pairs ab and ba tie at -2; the leftmost (ab) merges, then
	// "aba" is no piece.
	if got, want := tok.Encode("aba", false, false), []int{3, 6, 4}; !slices.Equal(got, want) {
		t.Errorf("tie: Encode(aba) = %v, want %v", got, want)
	}
	better := tiny(t, pieces, []float32{0, 0, 0, -1, -1, -1, -2, -1.5}, nil)
	if got, want := better.Encode("aba", false, false), []int{3, 4, 7}; !slices.Equal(got, want) {
		t.Errorf("higher score: Encode(aba) = %v, want %v", got, want)
	}
}

func TestMergeChainsAndSpecials(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>", " ", "a", "b", " a", " ab", "ab"}
	scores := []float32{0, 0, 0, -5, -5, -5, -1, -3, -2}
	tok := tiny(t, pieces, scores, nil)
	// " ab": " a" (-1) beats "ab" (-2), then " a"+"b" = " ab".
	if got, want := tok.Encode("ab", true, true), []int{1, 7, 2}; !slices.Equal(got, want) {
		t.Errorf("Encode(ab, bos, eos) = %v, want %v", got, want)
	}
	if got := tok.Encode("", true, true); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("Encode(\"\", bos, eos) = %v, want [1 2]", got)
	}
	if got := tok.Encode("", false, false); len(got) != 0 {
		t.Errorf("Encode(\"\") = %v, want []", got)
	}
}

func TestWordMarkNormalised(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a"}
	tok := tiny(t, pieces, []float32{0, 0, 0, -1, -1, -0.5}, []int32{2, 3, 3, 1, 1, 1})
	if got, want := tok.Encode("a a", false, false), []int{5, 5}; !slices.Equal(got, want) {
		t.Errorf("Encode(a a) = %v, want %v", got, want)
	}
	if got := tok.Piece(5); got != " a" {
		t.Errorf("Piece(5) = %q, want %q", got, " a")
	}
	if got := tok.DecodeAll([]int{5, 5}); got != "a a" {
		t.Errorf("DecodeAll = %q, want %q", got, "a a")
	}
}

func TestByteFallback(t *testing.T) {
	// Byte pieces placed after the text pieces: lookup, not +3, must be used.
	pieces := []string{"<unk>", "<s>", "</s>", " ", "x"}
	for b := 0; b < 256; b++ {
		pieces = append(pieces, "<0x"+strings.ToUpper(hex2(byte(b)))+">")
	}
	scores := make([]float32, len(pieces))
	tok := tiny(t, pieces, scores, nil)
	// "é" is C3 A9; byte b sits at id 5+b.
	if got, want := tok.Encode("xé", false, false), []int{3, 4, 5 + 0xC3, 5 + 0xA9}; !slices.Equal(got, want) {
		t.Errorf("Encode(xé) = %v, want %v", got, want)
	}
	if got := tok.DecodeAll(tok.Encode("xé\xff", false, false)); got != "xé\xff" {
		t.Errorf("round trip = %q", got)
	}

	// No byte pieces, under 259 pieces: bytes fall back to <unk> (id 0).
	small := tiny(t, []string{"<unk>", "<s>", "</s>", " "}, make([]float32, 4), nil)
	if got, want := small.Encode("é", false, false), []int{3, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("small vocabulary Encode(é) = %v, want %v", got, want)
	}

	// No byte pieces but at least 259 pieces: llama2.c's +3 convention.
	big := make([]string, 300)
	for i := range big {
		big[i] = "p" + hex2(byte(i)) + hex2(byte(i>>8))
	}
	big[0], big[1], big[2], big[3] = "<unk>", "<s>", "</s>", " "
	bt := tiny(t, big, make([]float32, 300), nil)
	if got, want := bt.Encode("\x07", false, false), []int{3, 10}; !slices.Equal(got, want) {
		t.Errorf("+3 fallback Encode(\\x07) = %v, want %v", got, want)
	}
}

func hex2(b byte) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[b>>4], digits[b&15]})
}

func TestDuplicatesKeepFirst(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>", " ", "a", "▁a", " a"}
	tok := tiny(t, pieces, []float32{0, 0, 0, -1, -1, -1, -1}, nil)
	if got, want := tok.Encode("a", false, false), []int{5}; !slices.Equal(got, want) {
		t.Errorf("Encode(a) = %v, want %v (first of the duplicates)", got, want)
	}
	if got := tok.Decode(3, 6); got != " a" {
		t.Errorf("later duplicate still decodes: got %q", got)
	}
}

func TestDecodeRules(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>", " ", " hi", "<0x41>", "<0xE6>", "<0x97>", "<0xA5>"}
	tok := tiny(t, pieces, make([]float32, len(pieces)), nil)
	cases := []struct {
		prev, id int
		want     string
	}{
		{1, 4, "hi"},    // leading space stripped after BOS
		{3, 4, " hi"},   // kept otherwise
		{1, 3, ""},      // a lone dummy prefix vanishes after BOS
		{1, 5, "A"},     // byte piece
		{3, 1, ""},      // control pieces carry no text
		{3, 2, ""},      // EOS
		{3, 0, "<unk>"}, // unknown keeps its spelling, as llama2.c prints it
		{3, 99, ""},     // out of range
		{3, -1, ""},
	}
	for _, c := range cases {
		if got := tok.Decode(c.prev, c.id); got != c.want {
			t.Errorf("Decode(%d, %d) = %q, want %q", c.prev, c.id, got, c.want)
		}
	}
	// 日 is E6 97 A5: split across three byte pieces it must come out whole.
	if got := tok.DecodeAll([]int{1, 4, 6, 7, 8, 2}); got != "hi日" {
		t.Errorf("DecodeAll = %q, want %q", got, "hi日")
	}
}

func TestNewRejects(t *testing.T) {
	p := []string{"<unk>", "<s>", "</s>"}
	s := []float32{0, 0, 0}
	cases := []struct {
		name string
		v    Vocab
		want string
	}{
		{"empty", Vocab{}, "empty"},
		{"scores", Vocab{Pieces: p, Scores: s[:2], BOS: 1, EOS: 2}, "3 pieces but 2 scores"},
		{"types", Vocab{Pieces: p, Scores: s, Types: []int32{1}, BOS: 1, EOS: 2}, "3 pieces but 1 token types"},
		{"bos", Vocab{Pieces: p, Scores: s, BOS: 3, EOS: 2}, "BOS id 3"},
		{"eos", Vocab{Pieces: p, Scores: s, BOS: 1, EOS: -1}, "EOS id -1"},
		{"nan", Vocab{Pieces: p, Scores: []float32{0, float32(math.NaN()), 0}, BOS: 1, EOS: 2}, "token 1"},
		{"inf", Vocab{Pieces: p, Scores: []float32{0, 0, float32(math.Inf(-1))}, BOS: 1, EOS: 2}, "token 2"},
		{"type", Vocab{Pieces: p, Scores: s, Types: []int32{2, 3, 9}, BOS: 1, EOS: 2}, "token type 9"},
		{"byte", Vocab{Pieces: p, Scores: s, Types: []int32{2, 3, 6}, BOS: 1, EOS: 2}, "not of the form <0xNN>"},
	}
	for _, c := range cases {
		_, err := New(c.v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New error = %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestVocabRebuildsSameTokenizer(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pieces, scores := syntheticRaw(rng, 60)
	a := tiny(t, pieces, scores, nil)
	b, err := New(a.Vocab())
	if err != nil {
		t.Fatalf("New(Vocab()): %v", err)
	}
	for range 200 {
		s := randomText(rng, 12)
		if x, y := a.Encode(s, true, false), b.Encode(s, true, false); !slices.Equal(x, y) {
			t.Fatalf("Encode(%q): %v vs rebuilt %v", s, x, y)
		}
	}
}

// TestMatchesReferenceSynthetic compares the heap-based encoder with the
// naive llama2.c transcription on random vocabularies full of score ties.
func TestMatchesReferenceSynthetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for v := range 20 {
		pieces, scores := syntheticRaw(rng, 10+rng.IntN(80))
		tok := tiny(t, pieces, scores, nil)
		ref := newRefVocab(pieces, scores)
		for range 150 {
			s := randomText(rng, 25)
			got, want := tok.Encode(s, v%2 == 0, v%3 == 0), refEncode(ref, s, v%2 == 0, v%3 == 0)
			if !slices.Equal(got, want) {
				t.Fatalf("vocab %d, Encode(%q) = %v, reference %v", v, s, got, want)
			}
			if back := tok.DecodeAll(got); back != s {
				t.Fatalf("vocab %d: DecodeAll(Encode(%q)) = %q", v, s, back)
			}
		}
	}
}

func BenchmarkEncodeSynthetic100KB(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces, scores := syntheticRaw(rng, 200)
	tok, err := New(Vocab{Pieces: pieces, Scores: scores, BOS: 1, EOS: 2})
	if err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	for sb.Len() < 100_000 {
		sb.WriteString(randomText(rng, 20))
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, true, false)
	}
}
