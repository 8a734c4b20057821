package scheduler

import (
	"bytes"
	"unicode/utf8"

	"github.com/seamlm/seam/tokenizer"
)

// textStream turns decoded token pieces into text that is safe to release:
// never a byte of a stop string (the text stops before it, even when the
// stop string arrives split across tokens), and never part of a UTF-8
// character. It holds back the shortest tail of the text that could still
// become either, and releases it once it cannot.
type textStream struct {
	stops    []string
	pend     []byte // decoded, not yet released
	released int    // bytes of the generated text released so far
	decoded  int    // bytes of the generated text decoded so far
	tokens   []held // tokens not yet released, in order
}

// held is a generated token and where its text lies in the generated text.
type held struct {
	tok        Token
	start, end int
}

// push appends one token's decoded piece. It returns the chunk that can be
// released now and whether a stop string was found (the chunk then ends
// just before it, and nothing more may be pushed).
func (ts *textStream) push(piece string, tok Token) (Chunk, bool) {
	ts.pend = append(ts.pend, piece...)
	ts.tokens = append(ts.tokens, held{tok: tok, start: ts.decoded, end: ts.decoded + len(piece)})
	ts.decoded += len(piece)
	if at := ts.firstStop(); at >= 0 {
		return ts.release(at, true), true
	}
	return ts.release(completeUTF8(ts.pend[:len(ts.pend)-ts.stopPrefix()]), false), false
}

// finish releases everything still held, at the end of generation.
func (ts *textStream) finish() Chunk { return ts.release(len(ts.pend), true) }

// release hands out pend[:n]. Tokens whose text is entirely released go
// with it; with last set, so do the tokens whose text is only partly
// released (the ones a stop string cut).
func (ts *textStream) release(n int, last bool) Chunk {
	c := Chunk{Text: validUTF8(ts.pend[:n])}
	ts.pend = append(ts.pend[:0], ts.pend[n:]...)
	ts.released += n
	k := 0
	for k < len(ts.tokens) && (ts.tokens[k].end <= ts.released || (last && ts.tokens[k].start < ts.released)) {
		c.Tokens = append(c.Tokens, ts.tokens[k].tok)
		k++
	}
	ts.tokens = ts.tokens[k:]
	if last {
		ts.tokens = nil
	}
	return c
}

// firstStop is the offset in pend of the earliest stop string, or -1.
// Released text never holds the start of a stop string (stopPrefix holds
// it back), so searching pend finds every occurrence.
func (ts *textStream) firstStop() int {
	at := -1
	for _, s := range ts.stops {
		if i := bytes.Index(ts.pend, []byte(s)); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	return at
}

// stopPrefix is the length of the longest tail of pend that is a proper
// prefix of some stop string: text that a later token may complete.
func (ts *textStream) stopPrefix() int {
	best := 0
	for _, s := range ts.stops {
		for n := min(len(s)-1, len(ts.pend)); n > best; n-- {
			if bytes.HasSuffix(ts.pend, []byte(s[:n])) {
				best = n
				break
			}
		}
	}
	return best
}

// completeUTF8 is the length of the longest prefix of b that does not end
// inside a UTF-8 character that later bytes could complete. Bytes that can
// never become valid UTF-8 are not held back. (tokenizer.StreamDecoder does
// this per token; the scheduler needs it on the bytes it holds for stop
// strings too, with each token's offset, so it keeps its own.)
func completeUTF8(b []byte) int {
	for back := 1; back <= utf8.UTFMax-1 && back <= len(b); back++ {
		c := b[len(b)-back]
		if utf8.RuneStart(c) {
			if c >= 0xC0 && !utf8.FullRune(b[len(b)-back:]) {
				return len(b) - back
			}
			return len(b)
		}
	}
	return len(b)
}

// validUTF8 returns b as a string, each invalid byte sequence replaced by
// U+FFFD: text released to a client is always valid UTF-8.
func validUTF8(b []byte) string { return tokenizer.ValidText(string(b)) }
