package tokenizer

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
)

// special is a token recognised by its exact text before any other
// processing: a control token (<|eot_id|>, <s>) or an added text token.
type special struct {
	text           string
	id             int
	lstrip, rstrip bool // swallow the whitespace before / after a match (Hugging Face)
	plain          bool // an added text token (not control): recognised in literal spans too
}

// specialSet finds special tokens in text, in one of two ways:
//
//   - leftmost-longest (Hugging Face's added vocabulary): scanning left to
//     right, the longest special starting at each position;
//   - longest-first (llama.cpp's tokenizer_st_partition): every occurrence
//     of the longest special splits the text, then the next longest is
//     looked for in the remaining pieces, and so on.
//
// They differ only when specials overlap in the text.
//
// Inside literal spans only plain (added text) tokens are recognised, as
// llama.cpp's tokenize(parse_special=false) and Hugging Face's
// split_special_tokens=True still match user-defined tokens.
type specialSet struct {
	byFirst      [256][]special // candidates by first byte, longest first
	firsts       string         // the distinct first bytes, to skip text quickly
	longestFirst []special      // all, longest first (stable by id)
	leftmost     bool
	plain        *specialSet // the plain subset, for literal spans; nil when empty
}

func newSpecialSet(toks []special, leftmost bool) *specialSet {
	s := newMatcher(toks, leftmost)
	var plain []special
	for _, t := range toks {
		if t.plain {
			plain = append(plain, t)
		}
	}
	if len(plain) > 0 {
		s.plain = newMatcher(plain, leftmost)
	}
	return s
}

const utf8RuneSelf = 0x80

func newMatcher(toks []special, leftmost bool) *specialSet {
	s := &specialSet{leftmost: leftmost}
	for _, t := range toks {
		if t.text == "" {
			continue
		}
		s.longestFirst = append(s.longestFirst, t)
	}
	slices.SortStableFunc(s.longestFirst, func(a, b special) int { return cmp.Compare(len(b.text), len(a.text)) })
	nonASCII := false
	for _, t := range s.longestFirst {
		c := t.text[0]
		if s.byFirst[c] == nil {
			s.firsts += string(rune(c))
			nonASCII = nonASCII || c >= utf8RuneSelf
		}
		s.byFirst[c] = append(s.byFirst[c], t)
	}
	if nonASCII {
		s.firsts = "" // IndexAny reads runes, not bytes: scan byte by byte instead
	}
	return s
}

// fragment is a piece of the text: a special token (id >= 0) or raw text
// text[start:end] (id < 0).
type fragment struct {
	start, end int
	id         int
}

// split cuts text into raw fragments and special tokens. No control token
// is recognised unless it lies entirely outside the literal spans; adjacent
// raw fragments are joined, so a literal span does not by itself cut the
// text.
func (s *specialSet) split(text string, literal []Span) []fragment {
	if s == nil || len(s.longestFirst) == 0 {
		return []fragment{{0, len(text), -1}}
	}
	var out []fragment
	pos := 0
	for _, sp := range clampSpans(literal, len(text)) {
		out = s.splitRegion(text, pos, sp.Start, out)
		if s.plain != nil {
			out = s.plain.splitRegion(text, sp.Start, sp.End, out)
		} else {
			out = appendRaw(out, sp.Start, sp.End)
		}
		pos = sp.End
	}
	out = s.splitRegion(text, pos, len(text), out)
	return s.strip(text, out)
}

// clampSpans keeps the spans inside [0, n), in order and disjoint; a caller's
// overlapping or unsorted spans are merged rather than trusted.
func clampSpans(spans []Span, n int) []Span {
	var out []Span
	for _, sp := range spans {
		a, b := max(sp.Start, 0), min(sp.End, n)
		if a >= b {
			continue
		}
		out = append(out, Span{a, b})
	}
	slices.SortFunc(out, func(x, y Span) int { return cmp.Compare(x.Start, y.Start) })
	merged := out[:0]
	for _, sp := range out {
		if k := len(merged); k > 0 && sp.Start <= merged[k-1].End {
			merged[k-1].End = max(merged[k-1].End, sp.End)
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

func appendRaw(out []fragment, a, b int) []fragment {
	if a >= b {
		return out
	}
	if k := len(out); k > 0 && out[k-1].id < 0 && out[k-1].end == a {
		out[k-1].end = b
		return out
	}
	return append(out, fragment{a, b, -1})
}

func (s *specialSet) splitRegion(text string, a, b int, out []fragment) []fragment {
	if a >= b {
		return out
	}
	if s.leftmost {
		return s.leftmostLongest(text, a, b, out)
	}
	return s.longestFirstSplit(text, a, b, out)
}

func (s *specialSet) leftmostLongest(text string, a, b int, out []fragment) []fragment {
	rawStart := a
	for i := a; i < b; {
		if s.byFirst[text[i]] == nil {
			if s.firsts != "" {
				k := strings.IndexAny(text[i:b], s.firsts)
				if k < 0 {
					break
				}
				i += k
				continue
			}
			i++
			continue
		}
		m, ok := s.matchAt(text[:b], i)
		if !ok {
			i++
			continue
		}
		out = appendRaw(out, rawStart, i)
		out = append(out, fragment{i, i + len(m.text), m.id})
		i += len(m.text)
		rawStart = i
	}
	return appendRaw(out, rawStart, b)
}

// matchAt returns the longest special that text[i:] starts with.
func (s *specialSet) matchAt(text string, i int) (special, bool) {
	for _, c := range s.byFirst[text[i]] {
		if strings.HasPrefix(text[i:], c.text) {
			return c, true
		}
	}
	return special{}, false
}

func (s *specialSet) longestFirstSplit(text string, a, b int, out []fragment) []fragment {
	frags := []fragment{{a, b, -1}}
	for _, sp := range s.longestFirst {
		var next []fragment
		for _, f := range frags {
			if f.id >= 0 {
				next = append(next, f)
				continue
			}
			pos := f.start
			for {
				k := strings.Index(text[pos:f.end], sp.text)
				if k < 0 {
					break
				}
				next = appendRaw(next, pos, pos+k)
				next = append(next, fragment{pos + k, pos + k + len(sp.text), sp.id})
				pos += k + len(sp.text)
			}
			next = appendRaw(next, pos, f.end)
		}
		frags = next
	}
	for _, f := range frags {
		if f.id < 0 {
			out = appendRaw(out, f.start, f.end)
		} else {
			out = append(out, f)
		}
	}
	return out
}

// strip applies lstrip/rstrip: whitespace next to such a special is dropped
// from the neighbouring raw fragment.
func (s *specialSet) strip(text string, frags []fragment) []fragment {
	has := false
	for _, t := range s.longestFirst {
		has = has || t.lstrip || t.rstrip
	}
	if !has {
		return frags
	}
	flags := map[int]special{}
	for _, t := range s.longestFirst {
		flags[t.id] = t
	}
	for i, f := range frags {
		if f.id < 0 {
			continue
		}
		t := flags[f.id]
		if t.lstrip && i > 0 && frags[i-1].id < 0 {
			p := &frags[i-1]
			p.end = p.start + len(strings.TrimRightFunc(text[p.start:p.end], unicode.IsSpace))
		}
		if t.rstrip && i+1 < len(frags) && frags[i+1].id < 0 {
			n := &frags[i+1]
			n.start = n.end - len(strings.TrimLeftFunc(text[n.start:n.end], unicode.IsSpace))
		}
	}
	kept := frags[:0]
	for _, f := range frags {
		if f.id >= 0 || f.start < f.end {
			kept = append(kept, f)
		}
	}
	return kept
}
