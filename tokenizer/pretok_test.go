package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// The oracle runs the pre-tokenizer regexes with a backtracking engine that
// supports lookahead and Unicode classes. The contractions are spelled with
// explicit ASCII cases, as llama.cpp and transformers.js run them (.NET-style
// (?i) would also fold a few non-ASCII letters).
var oracleRegex = map[*preTokenizer]string{
	preLlama3: `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	preQwen2:  `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

func compileOracle(t testing.TB, p *preTokenizer) *regexp2.Regexp {
	t.Helper()
	re, err := regexp2.Compile(oracleRegex[p], regexp2.Unicode)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// oracleSplit returns the pieces the regex cuts s into: its matches and the
// text between them (none for these patterns, which match every character).
func oracleSplit(t testing.TB, re *regexp2.Regexp, s string) []string {
	t.Helper()
	var out []string
	prev := 0
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		i, n := m.ByteRange()
		if i > prev {
			out = append(out, s[prev:i])
		}
		if n > 0 {
			out = append(out, s[i:i+n])
		}
		prev = i + n
	}
	if err != nil {
		t.Fatal(err)
	}
	if prev < len(s) {
		out = append(out, s[prev:])
	}
	return out
}

func scannerSplit(p *preTokenizer, s string) []string {
	var out []string
	p.split(s, func(w string) { out = append(out, w) })
	return out
}

// pretokAlphabet mixes the characters the regex treats differently.
var pretokAlphabet = []string{
	"a", "Z", "é", "ß", "ſ", "日", "本", "한", "ا", "ш", "\u0301", "\u0308", "ǅ",
	"0", "7", "٣", "½", "Ⅻ", "²",
	" ", " ", " ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\u2028", "\u3000", "\u200b", "\ufeff",
	"'", "'", "s", "S", "t", "re", "RE", "ve", "m", "ll", "LL", "d", "’",
	".", ",", "!", "?", "-", "_", "(", ")", "<", "|", ">", "\"", "#", "$",
	"🦙", "👍🏽", "\u200d", "\ufffd",
}

func randomPretokText(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for range rng.IntN(n + 1) {
		sb.WriteString(pretokAlphabet[rng.IntN(len(pretokAlphabet))])
	}
	return sb.String()
}

// TestPreTokenizerMatchesRegexp2 compares the scanner with the regexes on
// the corpus and on random text from a class-rich alphabet, for both
// pre-tokenizers.
func TestPreTokenizerMatchesRegexp2(t *testing.T) {
	for _, p := range []*preTokenizer{preLlama3, preQwen2} {
		re := compileOracle(t, p)
		texts := corpus()
		rng := rand.New(rand.NewPCG(8, uint64(p.maxDigits)))
		for range 5000 {
			texts = append(texts, randomPretokText(rng, 24))
		}
		for _, s := range texts {
			if got, want := scannerSplit(p, s), oracleSplit(t, re, s); !slices.Equal(got, want) {
				t.Fatalf("%s: split(%q)\n  scanner %q\n  regex   %q", p.name, s, got, want)
			}
		}
	}
}

// TestPreTokenizerInvalidUTF8 checks that ill-formed bytes split like U+FFFD
// (a character of no class) and nothing is lost.
func TestPreTokenizerInvalidUTF8(t *testing.T) {
	s := "ab\xffcd \xe2\x82 x\xc3"
	got := scannerSplit(preLlama3, s)
	want := []string{"ab", "\xffcd", " \xe2\x82", " x", "\xc3"}
	if !slices.Equal(got, want) {
		t.Errorf("split(%q) = %q, want %q", s, got, want)
	}
	// The same text with U+FFFD in place of each ill-formed byte splits at
	// the same places.
	r := strings.NewReplacer("\xff", "\ufffd", "\xe2\x82", "\ufffd\ufffd", "\xc3", "\ufffd")
	if got, want := len(scannerSplit(preLlama3, r.Replace(s))), len(want); got != want {
		t.Errorf("with U+FFFD: %d pieces, want %d", got, want)
	}
}

// TestWhiteSpaceClass pins the two characters whose class differs between
// JavaScript's \s and Unicode's White_Space: U+0085 is white space here (as
// in Hugging Face's Rust tokenizers and llama.cpp), U+FEFF is not.
func TestWhiteSpaceClass(t *testing.T) {
	if c, _ := classAt("\u0085", 0); c != clsSpace {
		t.Errorf("U+0085 class %d, want white space", c)
	}
	if c, _ := classAt("\ufeff", 0); c != clsOther {
		t.Errorf("U+FEFF class %d, want other", c)
	}
}

func FuzzPreTokenizer(f *testing.F) {
	for _, s := range corpusBase[:40] {
		f.Add(s)
	}
	f.Add("a\xffb")
	llama, qwen := compileOracle(f, preLlama3), compileOracle(f, preQwen2)
	f.Fuzz(func(t *testing.T, s string) {
		for p, re := range map[*preTokenizer]*regexp2.Regexp{preLlama3: llama, preQwen2: qwen} {
			got := scannerSplit(p, s)
			if strings.Join(got, "") != s {
				t.Fatalf("%s: pieces of %q do not concatenate back: %q", p.name, s, got)
			}
			if utf8.ValidString(s) {
				if want := oracleSplit(t, re, s); !slices.Equal(got, want) {
					t.Fatalf("%s: split(%q)\n  scanner %q\n  regex   %q", p.name, s, got, want)
				}
			}
		}
	})
}

// benchText is about 1 MB of mixed text built from the corpus (prose, code,
// numbers, many scripts, emoji), without special-token spellings.
func benchText() string {
	var sb strings.Builder
	rng := rand.New(rand.NewPCG(1, 2))
	var parts []string
	for _, s := range corpusBase {
		if !strings.Contains(s, "<") {
			parts = append(parts, s)
		}
	}
	for sb.Len() < 1<<20 {
		sb.WriteString(parts[rng.IntN(len(parts))])
		sb.WriteString([]string{" ", "\n", " ", "\n\n"}[rng.IntN(4)])
	}
	return sb.String()
}

// BenchmarkPreTokenize compares the scanner with regexp2 running the same
// expression on 1 MB of mixed text; the scanner is what the package uses.
func BenchmarkPreTokenize(b *testing.B) {
	text := benchText()
	b.Run("scanner", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			n := 0
			preLlama3.split(text, func(string) { n++ })
		}
	})
	b.Run("regexp2", func(b *testing.B) {
		re := compileOracle(b, preLlama3)
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			oracleSplit(b, re, text)
		}
	})
}
