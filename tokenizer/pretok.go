package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizers of Llama 3 and Qwen 2/3 split text with this regular
// expression (Hugging Face tokenizer.json, llama.cpp's llama-bpe and qwen2),
// where Llama 3 allows up to three digits per piece and Qwen one:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// splitWords is a hand-written scanner for it: at each position it takes the
// first alternative that matches, as a backtracking regex engine does, and
// returns what that alternative matches. The contractions are ASCII
// case-insensitive ('S, 'Ll), as in llama.cpp and transformers.js; \s is
// Unicode White_Space, \p{L} and \p{N} are Go's Unicode tables. Bytes that
// are not valid UTF-8 count as characters of no class (like U+FFFD), so
// arbitrary input splits without loss. pretok_test.go checks the scanner
// against dlclark/regexp2 running the expression itself.
type preTokenizer struct {
	name      string // as in tokenizer.ggml.pre
	maxDigits int    // 3 for llama-bpe, 1 for qwen2
}

var (
	preLlama3 = &preTokenizer{name: "llama-bpe", maxDigits: 3}
	preQwen2  = &preTokenizer{name: "qwen2", maxDigits: 1}
)

// Regex patterns as tokenizer.json spells them, to recognise them.
const (
	regexLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// Character classes of the expression.
const (
	clsOther  uint8 = 0
	clsLetter uint8 = 1
	clsNumber uint8 = 2
	clsSpace  uint8 = 3
)

var asciiClass = func() (t [128]uint8) {
	for c := range 128 {
		r := rune(c)
		switch {
		case unicode.IsLetter(r):
			t[c] = clsLetter
		case unicode.IsNumber(r):
			t[c] = clsNumber
		case unicode.IsSpace(r):
			t[c] = clsSpace
		}
	}
	return t
}()

// classAt returns the class and byte length of the character at s[i].
func classAt(s string, i int) (uint8, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && n == 1:
		return clsOther, 1
	case unicode.IsLetter(r):
		return clsLetter, n
	case unicode.IsNumber(r):
		return clsNumber, n
	case unicode.IsSpace(r):
		return clsSpace, n
	}
	return clsOther, n
}

// split calls yield with each piece of s in order; the pieces concatenate to
// s.
func (p *preTokenizer) split(s string, yield func(string)) {
	for i := 0; i < len(s); {
		e := p.matchAt(s, i)
		yield(s[i:e])
		i = e
	}
}

// matchAt returns the end of the match starting at i (always > i).
func (p *preTokenizer) matchAt(s string, i int) int {
	c := s[i]
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if c == '\'' {
		if n := contraction(s[i+1:]); n > 0 {
			return i + 1 + n
		}
	}
	cls, n := classAt(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if cls == clsLetter {
		return letters(s, i+n)
	}
	if cls != clsNumber && c != '\r' && c != '\n' && i+n < len(s) {
		if next, m := classAt(s, i+n); next == clsLetter {
			return letters(s, i+n+m)
		}
	}
	// \p{N}{1,maxDigits}
	if cls == clsNumber {
		j := i + n
		for k := 1; k < p.maxDigits && j < len(s); k++ {
			nc, m := classAt(s, j)
			if nc != clsNumber {
				break
			}
			j += m
		}
		return j
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	j, jc, jn := i, cls, n
	if c == ' ' && i+1 < len(s) {
		j = i + 1
		jc, jn = classAt(s, j)
	}
	if jc == clsOther {
		j += jn
		for j < len(s) {
			oc, m := classAt(s, j)
			if oc != clsOther {
				break
			}
			j += m
		}
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	// Here s[i] is white space. \s*[\r\n]+ ends after the last CR or LF of
	// the run of white space.
	end, lastNL, lastStart := i, -1, i
	for end < len(s) {
		sc, m := classAt(s, end)
		if sc != clsSpace {
			break
		}
		if s[end] == '\r' || s[end] == '\n' {
			lastNL = end
		}
		lastStart = end
		end += m
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	// \s+(?!\S): the whole run at the end of the text, else all but its
	// last character when that leaves any.
	if end == len(s) || lastStart == i {
		return end // the second case is \s+ matching one character
	}
	return lastStart
}

// letters returns the end of the run of letters starting at j.
func letters(s string, j int) int {
	for j < len(s) {
		cls, m := classAt(s, j)
		if cls != clsLetter {
			break
		}
		j += m
	}
	return j
}

// contraction returns the length of the contraction suffix (s, t, re, ve,
// m, ll or d, ASCII case-insensitive) that rest starts with, or 0.
func contraction(rest string) int {
	if rest == "" {
		return 0
	}
	lower := func(c byte) byte { return c | 0x20 }
	switch lower(rest[0]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(rest) > 1 && lower(rest[1]) == 'e' {
			return 2
		}
	case 'l':
		if len(rest) > 1 && lower(rest[1]) == 'l' {
			return 2
		}
	}
	return 0
}
