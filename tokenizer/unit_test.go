package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// TestValidText uses the examples of the Unicode Standard's recommended
// practice for U+FFFD substitution (chapter 3, "U+FFFD Substitution of
// Maximal Subparts"), which the WHATWG decoder and Rust follow.
func TestValidText(t *testing.T) {
	const r = "\uFFFD"
	cases := []struct{ in, want string }{
		{"plain ascii", "plain ascii"},
		{"é日🦙", "é日🦙"},
		{"\xE2\x82", r},
		{"\xE2\x82x", r + "x"},
		{"\xFF\xFE", r + r},
		{"\xF0\x9F\x98", r},
		{"\xC0\xAF", r + r},
		{"\xED\xA0\x80", r + r + r},
		{"a\xF4\x90\x80\x80b", "a" + r + r + r + r + "b"},
		{"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", "a" + r + r + r + "b" + r + "c" + r + r + "d"},
	}
	for _, c := range cases {
		if got := ValidText(c.in); got != c.want {
			t.Errorf("ValidText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestIncompleteTail(t *testing.T) {
	cases := []struct {
		in   string
		want int
	}{
		{"", 0}, {"a", 0}, {"é", 0}, {"\xC3", 1}, {"a\xE6\x97", 2}, {"\xF0\x9F\xA6", 3}, {"\xF0\x9F\xA6\x99", 0},
		{"\xFF", 0}, {"\xE0\x80", 0}, {"\xED\xA0", 0}, {"\xF4\x90", 0}, {"\x80\x80", 0},
	}
	for _, c := range cases {
		if got := incompleteTail([]byte(c.in)); got != c.want {
			t.Errorf("incompleteTail(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestStreamDecoderHoldsPartialCharacters streams a byte-fallback
// vocabulary's tokens one at a time: a character split across tokens is
// emitted once complete, and the whole equals ValidText(DecodeAll).
func TestStreamDecoderHoldsPartialCharacters(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>", " ", "x"}
	for b := 0; b < 256; b++ {
		pieces = append(pieces, "<0x"+strings.ToUpper(hex2(byte(b)))+">")
	}
	tok := tiny(t, pieces, make([]float32, len(pieces)), nil)
	byteID := func(b byte) int { return 5 + int(b) }
	// x 🦙 x, then a lone lead byte, then x.
	ids := []int{1, 4, byteID(0xF0), byteID(0x9F), byteID(0xA6), byteID(0x99), 4, byteID(0xE2), 4}
	d := NewStreamDecoder(tok)
	var outs []string
	for _, id := range ids {
		outs = append(outs, d.Next(id))
	}
	outs = append(outs, d.Flush())
	want := []string{"", "x", "", "", "", "🦙", "x", "", "\uFFFDx", ""}
	if !slices.Equal(outs, want) {
		t.Errorf("stream pieces %q, want %q", outs, want)
	}
	if got := strings.Join(outs, ""); got != ValidText(tok.DecodeAll(ids)) {
		t.Errorf("stream %q, ValidText(DecodeAll) %q", got, ValidText(tok.DecodeAll(ids)))
	}
	d = NewStreamDecoder(tok)
	if got := d.Next(byteID(0xE6)) + d.Flush(); got != "\uFFFD" {
		t.Errorf("an unfinished character flushed as %q, want U+FFFD", got)
	}
}

func TestClampSpans(t *testing.T) {
	got := clampSpans([]Span{{8, 12}, {-3, 2}, {1, 4}, {10, 30}, {5, 5}}, 20)
	want := []Span{{0, 4}, {8, 20}}
	if !slices.Equal(got, want) {
		t.Errorf("clampSpans = %v, want %v", got, want)
	}
}

// TestLiteralSpans uses the small byte-level vocabulary of errors_test.go:
// control tokens are not recognised inside literal spans (even partly), plain
// added tokens still are, and text across span boundaries is tokenized as
// if the spans were absent.
func TestLiteralSpans(t *testing.T) {
	tok, cfg := tinyHF()
	b, err := ParseHF(mustJSON(t, tok), mustJSON(t, cfg), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	text := "<|end|> the<|end|><think>"
	all := b.Encode(text, false, false)
	if want := []int{260, 258, 260, 261}; !slices.Equal(all, want) {
		t.Fatalf("Encode = %v, want %v", all, want)
	}
	// The second <|end|> (bytes 11..18) inside a span is text; <think> is
	// recognised even there.
	lit := b.EncodeWith(text, EncodeOptions{Literal: []Span{{9, len(text)}}})
	if lit[0] != 260 || slices.Contains(lit[1:], 260) || lit[len(lit)-1] != 261 {
		t.Errorf("EncodeWith(literal tail) = %v: want <|end|> first, none later, <think> last", lit)
	}
	if got := b.DecodeAll(lit); got != " the<|end|><think>" {
		t.Errorf("DecodeAll = %q", got)
	}
	// A span cutting " the" in two changes nothing: no special is there.
	if got := b.EncodeWith(text, EncodeOptions{Literal: []Span{{9, 10}}}); !slices.Equal(got, all) {
		t.Errorf("a span inside plain text changed the ids: %v, want %v", got, all)
	}
	// A special only partly inside a span is not recognised.
	if got := b.EncodeWith("<|end|>", EncodeOptions{Literal: []Span{{6, 7}}}); slices.Contains(got, 260) {
		t.Errorf("a special straddling a literal span was recognised: %v", got)
	}
}

// TestLStripRStrip: added tokens with lstrip/rstrip swallow the white space
// next to them, as Hugging Face's AddedToken does.
func TestLStripRStrip(t *testing.T) {
	tok, cfg := tinyHF()
	added := tok["added_tokens"].([]any)[0].(map[string]any)
	added["lstrip"], added["rstrip"] = true, true
	b, err := ParseHF(mustJSON(t, tok), mustJSON(t, cfg), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.Encode("in  <|end|>\t in", false, false), b.Encode("in<|end|>in", false, false); !slices.Equal(got, want) {
		t.Errorf("with lstrip/rstrip: %v, want %v", got, want)
	}
}

// TestSpecialSplitBothWays: leftmost-longest (Hugging Face) and
// longest-first (llama.cpp) matching, with ASCII and non-ASCII first bytes.
func TestSpecialSplitBothWays(t *testing.T) {
	toks := []special{{text: "<x>", id: 1}, {text: "é!", id: 2}, {text: "ab", id: 3}, {text: "bcd", id: 4}}
	text := "zé!<x>abcd"
	ids := func(fr []fragment) []int {
		var out []int
		for _, f := range fr {
			out = append(out, f.id)
		}
		return out
	}
	// Leftmost: "ab" at 6 wins over "bcd" at 7; longest-first: "bcd" first.
	if got, want := ids(newSpecialSet(toks, true).split(text, nil)), []int{-1, 2, 1, 3, -1}; !slices.Equal(got, want) {
		t.Errorf("leftmost-longest: %v, want %v", got, want)
	}
	if got, want := ids(newSpecialSet(toks, false).split(text, nil)), []int{-1, 2, 1, -1, 4}; !slices.Equal(got, want) {
		t.Errorf("longest-first: %v, want %v", got, want)
	}
}
