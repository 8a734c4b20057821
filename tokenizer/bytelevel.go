package tokenizer

import "strings"

// Byte-level BPE vocabularies (GPT-2's bytes_to_unicode) spell each byte as
// one printable character: the bytes '!'..'~', '¡'..'¬' and '®'..'ÿ' as
// themselves, the 68 others as U+0100 onwards in byte order (space is 'Ġ',
// newline 'Ċ').
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	next := rune(256)
	for b := range 256 {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = next
			next++
		}
		b2r[b] = r
		r2b[r] = byte(b)
	}
	return b2r, r2b
}()

// byteLevelDecode maps a byte-level token text back to its bytes; ok is
// false when a character is not one of the 256 byte characters.
func byteLevelDecode(s string) (string, bool) {
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		b, ok := runeToByte[r]
		if !ok {
			return "", false
		}
		sb.WriteByte(b)
	}
	return sb.String(), true
}
