package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// utf8Seq describes the sequence a lead byte starts: how many continuation
// bytes follow and the allowed range of the first of them (the rest are
// always 0x80..0xBF). need < 0 means the byte cannot start a sequence.
func utf8Seq(c byte) (need int, lo, hi byte) {
	switch {
	case c < 0x80:
		return 0, 0, 0
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80, 0xBF
	case c == 0xE0:
		return 2, 0xA0, 0xBF
	case c == 0xED:
		return 2, 0x80, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		return 2, 0x80, 0xBF
	case c == 0xF0:
		return 3, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80, 0xBF
	case c == 0xF4:
		return 3, 0x80, 0x8F
	}
	return -1, 0, 0
}

// ValidText returns s with every ill-formed UTF-8 sequence replaced by
// U+FFFD, one replacement per maximal subpart (the Unicode recommendation
// that Rust's String::from_utf8_lossy, the WHATWG TextDecoder and so Hugging
// Face's decoders follow): "\xE2\x82" becomes one U+FFFD, "\xFF\xFF" two.
// Valid text is returned unchanged.
func ValidText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		n := validSeqLen(s[i:])
		if n > 0 {
			sb.WriteString(s[i : i+n])
			i += n
			continue
		}
		sb.WriteString("\uFFFD")
		i += -n
	}
	return sb.String()
}

// validSeqLen returns the length of the valid sequence at the start of s
// (> 0), or minus the length of the maximal ill-formed subpart there (< 0).
// s must not be empty.
func validSeqLen(s string) int {
	need, lo, hi := utf8Seq(s[0])
	if need == 0 {
		return 1
	}
	if need < 0 {
		return -1
	}
	j := 1
	for k := range need {
		if j >= len(s) {
			return -j // truncated: the whole prefix is one subpart
		}
		c := s[j]
		l, h := byte(0x80), byte(0xBF)
		if k == 0 {
			l, h = lo, hi
		}
		if c < l || c > h {
			return -j
		}
		j++
	}
	return j
}

// incompleteTail returns how many bytes at the end of b are the start of a
// valid UTF-8 sequence that more bytes could complete (0, 1, 2 or 3).
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c&0xC0 == 0x80 {
			continue // a continuation byte: look further back for the lead
		}
		need, lo, hi := utf8Seq(c)
		if need < k { // ASCII, an invalid byte, or a sequence already complete
			return 0
		}
		for i, d := range b[len(b)-k+1:] {
			l, h := byte(0x80), byte(0xBF)
			if i == 0 {
				l, h = lo, hi
			}
			if d < l || d > h {
				return 0
			}
		}
		return k
	}
	return 0
}

// StreamDecoder turns a stream of token ids into text, emitting only complete
// UTF-8: bytes of a character split across tokens are held back until the
// character is whole, and ill-formed bytes become U+FFFD exactly as
// ValidText would replace them in the whole output. The concatenation of
// everything Next and Flush return equals ValidText(t.DecodeAll(ids)).
type StreamDecoder struct {
	t       Tokenizer
	prev    int
	pending []byte
}

// NewStreamDecoder starts a stream at the beginning of a text (as after
// BOS).
func NewStreamDecoder(t Tokenizer) *StreamDecoder {
	return &StreamDecoder{t: t, prev: -1}
}

// Next adds token id and returns the text that became complete.
func (d *StreamDecoder) Next(id int) string {
	piece := d.t.Decode(d.prev, id)
	d.prev = id
	d.pending = append(d.pending, piece...)
	keep := incompleteTail(d.pending)
	out := ValidText(string(d.pending[:len(d.pending)-keep]))
	d.pending = append(d.pending[:0], d.pending[len(d.pending)-keep:]...)
	return out
}

// Flush returns what is held back (an unfinished character, as U+FFFD) and
// resets the pending bytes.
func (d *StreamDecoder) Flush() string {
	out := ValidText(string(d.pending))
	d.pending = d.pending[:0]
	return out
}
