package tokenizer

import (
	"unicode/utf8"
)

// Encode turns text into token ids with llama2.c's algorithm:
//
//  1. BOS if bos is set;
//  2. if text is non-empty, a dummy-prefix space followed by one symbol per
//     UTF-8 character: the piece spelling that character, or else one byte
//     piece per byte of it (byte fallback);
//  3. repeatedly merge the adjacent pair whose concatenation is a piece with
//     the highest score (ties: the leftmost pair) until no pair merges;
//  4. EOS if eos is set.
//
// The result equals llama2.c's encode() except in corner cases where
// llama2.c's behaviour is an accident of its string lookups:
//   - invalid UTF-8 is split into single bytes (llama2.c groups a byte with
//     up to three following continuation bytes even when they do not form a
//     character, then falls back to bytes for the whole group);
//   - unknown, control and byte pieces never take part in a merge (llama2.c
//     also concatenates their spellings, "<0x0A>" or "\n<s>\n", and looks
//     the result up; tok512.bin has no piece such a lookup could match);
//   - merges scoring at or below -1e10 are applied (llama2.c ignores them);
//   - a vocabulary without a " " piece gets the byte fallback for the dummy
//     prefix (llama2.c emits id -1).
//
// A vocabulary read from GGUF first cuts out the special pieces spelled in
// the text (llama.cpp's parse_special) and gives each remaining fragment
// that follows the start or a special token its dummy-prefix space (none
// when the file sets tokenizer.ggml.add_space_prefix to false).
//
// Duplicate piece spellings resolve to the first id (see New).
//
// Merging uses a priority queue over a linked list of symbols, so the cost is
// O(n log n) in the text length.
func (t *SentencePiece) Encode(text string, bos, eos bool) []int {
	return t.EncodeWith(text, EncodeOptions{BOS: bos, EOS: eos})
}

// EncodeWith is Encode with literal spans, in which no special piece is
// recognised.
func (t *SentencePiece) EncodeWith(text string, opt EncodeOptions) []int {
	ids := make([]int, 0, len(text)/2+3)
	if opt.BOS {
		ids = append(ids, t.bos)
	}
	prevSpecial := true
	for _, f := range t.specials.split(text, opt.Literal) {
		if f.id >= 0 {
			ids = append(ids, f.id)
			prevSpecial = true
			continue
		}
		frag := text[f.start:f.end]
		if frag == "" {
			continue
		}
		if prevSpecial && !t.noPrefix {
			frag = " " + frag
		}
		ids = t.encodeFragment(frag, ids)
		prevSpecial = false
	}
	if opt.EOS {
		ids = append(ids, t.eos)
	}
	return ids
}

// encodeFragment merges a text fragment. When no matchable piece holds a
// space after another character, no merge can cross such a place, so the
// fragment is merged word by word (words cached); otherwise as a whole.
func (t *SentencePiece) encodeFragment(s string, ids []int) []int {
	if !t.wordSplit {
		return append(ids, t.merge(t.symbols(s))...)
	}
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == ' ' && s[i-1] != ' ' {
			ids = t.encodeWord(s[start:i], ids)
			start = i
		}
	}
	return t.encodeWord(s[start:], ids)
}

func (t *SentencePiece) encodeWord(w string, ids []int) []int {
	cacheable := len(w) <= cacheWordLen
	if cacheable {
		if cached, ok := t.cache.get(w); ok {
			for _, id := range cached {
				ids = append(ids, int(id))
			}
			return ids
		}
	}
	start := len(ids)
	ids = append(ids, t.merge(t.symbols(w))...)
	if cacheable {
		t.cache.put(w, ids[start:])
	}
	return ids
}

// symbols splits text into characters and maps each to a piece, falling back
// to byte pieces. Invalid UTF-8 bytes each become one byte piece.
func (t *SentencePiece) symbols(text string) []int {
	syms := make([]int, 0, len(text))
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if !(r == utf8.RuneError && size == 1) {
			if id, ok := t.lookup[text[i:i+size]]; ok {
				syms = append(syms, id)
				i += size
				continue
			}
		}
		for _, b := range []byte(text[i : i+size]) {
			syms = append(syms, t.byteIDs[b])
		}
		i += size
	}
	return syms
}

// candidate is a possible merge of the adjacent symbols left and right into
// piece id. It is stale once either symbol has changed.
type candidate struct {
	score       float32
	left, right int // symbol positions
	leftTok     int // tokens at push time, to detect staleness
	rightTok    int
	id          int
}

// before orders candidates: higher score first, then leftmost. Symbol
// positions never reorder, so a smaller left position is further left.
func (c candidate) before(d candidate) bool {
	if c.score != d.score {
		return c.score > d.score
	}
	return c.left < d.left
}

// mergeState is a doubly linked list of symbols plus a heap of candidates.
type mergeState struct {
	t    *SentencePiece
	tok  []int // token per position; -1 once merged into its left neighbour
	prev []int
	next []int
	heap minHeap[candidate]
	buf  []byte // scratch for concatenating pieces
}

// merge applies the best merges to syms and returns the remaining tokens.
func (t *SentencePiece) merge(syms []int) []int {
	n := len(syms)
	s := &mergeState{t: t, tok: syms, prev: make([]int, n), next: make([]int, n)}
	for i := range n {
		s.prev[i] = i - 1
		s.next[i] = i + 1
	}
	s.next[n-1] = -1
	for i := 0; i+1 < n; i++ {
		s.consider(i, i+1)
	}
	for len(s.heap) > 0 {
		c := s.heap.pop()
		if s.tok[c.left] != c.leftTok || s.tok[c.right] != c.rightTok || s.next[c.left] != c.right {
			continue // stale: one side merged with something else first
		}
		s.apply(c)
	}
	out := make([]int, 0, n)
	for i := 0; i != -1; i = s.next[i] {
		out = append(out, s.tok[i])
	}
	return out
}

// apply merges the right symbol of c into its left one and queues the two
// pairs the merged symbol now forms with its neighbours. A merged piece is
// longer than either part, so its id differs from both and older candidates
// naming them become detectably stale.
func (s *mergeState) apply(c candidate) {
	s.tok[c.left] = c.id
	s.tok[c.right] = -1
	after := s.next[c.right]
	s.next[c.left] = after
	if after != -1 {
		s.prev[after] = c.left
	}
	if p := s.prev[c.left]; p != -1 {
		s.consider(p, c.left)
	}
	if after != -1 {
		s.consider(c.left, after)
	}
}

// consider queues the merge of adjacent positions l and r if their
// concatenation is a matchable piece.
func (s *mergeState) consider(l, r int) {
	t := s.t
	a, b := s.tok[l], s.tok[r]
	if !t.matchable(a) || !t.matchable(b) {
		return
	}
	pa, pb := t.pieces[a], t.pieces[b]
	if len(pa)+len(pb) > t.maxMatch {
		return
	}
	s.buf = append(append(s.buf[:0], pa...), pb...)
	id, ok := t.lookup[string(s.buf)] // no allocation: map index by converted bytes
	if !ok {
		return
	}
	s.heap.push(candidate{score: t.scores[id], left: l, right: r, leftTok: a, rightTok: b, id: id})
}
