package tokenizer

import (
	"fmt"
	"strings"
)

// bpeConfig is everything a BPE needs, gathered from a tokenizer.json or a
// GGUF file. Error messages name the file and the fields below.
type bpeConfig struct {
	file        string // for errors
	tokensField string // e.g. "model.vocab" or "tokenizer.ggml.tokens"
	mergesField string

	tokens []string // per id, as the file spells it; added tokens as their content
	types  []int32
	merges [][2]string

	byteLevel    bool
	pre          *preTokenizer
	nfc          bool
	prependMark  bool
	ignoreMerges bool
	byteFallback bool
	unk          int
	fuseUnk      bool
	stripStart   bool

	specials []special
	leftmost bool // Hugging Face's added-token matching (else llama.cpp's)

	bos, eos, eot, eom int // -1: none
	addBOS             bool
	src                Spec
}

// mergeable reports whether tokens of type ty take part in BPE (everything
// but special, added, unknown and byte tokens).
func mergeable(ty int32) bool {
	switch ty {
	case TypeControl, TypeUserDefined, TypeUnknown, TypeByte:
		return false
	}
	return true
}

func buildBPE(c *bpeConfig) (*BPE, error) {
	n := len(c.tokens)
	if n == 0 {
		return nil, fmt.Errorf("%s: %s is empty", c.file, c.tokensField)
	}
	if len(c.types) != n {
		return nil, fmt.Errorf("%s: %d token types for %d tokens in %s", c.file, len(c.types), n, c.tokensField)
	}
	t := &BPE{
		size:         n,
		text:         c.tokens,
		piece:        make([]string, n),
		dec:          make([]string, n),
		types:        c.types,
		index:        make(map[string]int, n),
		merges:       make(map[uint64]mergeRule, len(c.merges)),
		byteLevel:    c.byteLevel,
		pre:          c.pre,
		nfc:          c.nfc,
		prependMark:  c.prependMark,
		ignoreMerges: c.ignoreMerges,
		byteFallback: c.byteFallback,
		unk:          c.unk,
		fuseUnk:      c.fuseUnk,
		stripStart:   c.stripStart,
		bos:          c.bos,
		eos:          c.eos,
		addBOS:       c.addBOS,
		src:          c.src,
	}
	for _, id := range []int{c.bos, c.eos, c.eot, c.eom, c.unk} {
		if id >= n {
			return nil, fmt.Errorf("%s: special token id %d is outside the %d-token vocabulary", c.file, id, n)
		}
	}
	if err := t.decodeTokens(c); err != nil {
		return nil, err
	}
	if err := t.indexBytes(c); err != nil {
		return nil, err
	}
	if err := t.indexMerges(c); err != nil {
		return nil, err
	}
	if !c.byteLevel {
		// Word splitting is exact when no merge can produce a token holding
		// ▁ after another character, and ▁ itself is a token (so no unknown
		// tokens fuse across the cut).
		_, t.wordSplit = t.index[wordMark]
		for key := range t.index {
			if strings.Contains(strings.TrimLeft(key, wordMark), wordMark) {
				t.wordSplit = false
			}
		}
	}
	t.specials = newSpecialSet(c.specials, c.leftmost)
	t.eog = map[int]bool{}
	for _, id := range []int{c.eos, c.eot, c.eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for id, s := range t.text {
		if eogTexts[s] && !mergeable(t.types[id]) {
			t.eog[id] = true
		}
	}
	return t, nil
}

// decodeTokens fills piece, dec and index.
func (t *BPE) decodeTokens(c *bpeConfig) error {
	for id, s := range t.text {
		ty := t.types[id]
		if ty < TypeUndefined || ty > TypeByte {
			return fmt.Errorf("%s: token %d (%q): token type %d is not one of 0..6", c.file, id, s, ty)
		}
		switch {
		case ty == TypeControl || ty == TypeUserDefined:
			t.piece[id], t.dec[id] = s, s
			continue
		case c.byteLevel:
			raw, ok := byteLevelDecode(s)
			if !ok {
				return fmt.Errorf("%s: %s: token %d (%q) has a character outside the byte-level alphabet", c.file, c.tokensField, id, s)
			}
			t.piece[id], t.dec[id] = raw, raw
		default:
			t.piece[id] = strings.ReplaceAll(s, wordMark, " ")
			t.dec[id] = t.piece[id]
			if b, ok := parseBytePiece(s); ok && (ty == TypeByte || c.byteFallback) {
				t.types[id] = TypeByte
				t.dec[id] = string([]byte{b})
				continue
			}
		}
		if !mergeable(ty) || s == "" {
			continue
		}
		key := s // SentencePiece style: symbols are ▁-spelled text
		if c.byteLevel {
			key = t.dec[id]
		}
		if _, dup := t.index[key]; !dup {
			t.index[key] = id
		}
	}
	return nil
}

// indexBytes finds the single-byte tokens (byte-level) or the byte-fallback
// tokens (SentencePiece style).
func (t *BPE) indexBytes(c *bpeConfig) error {
	for b := range 256 {
		t.byteFB[b] = -1
	}
	if c.byteLevel {
		for b := range 256 {
			id, ok := t.index[string([]byte{byte(b)})]
			if !ok {
				return fmt.Errorf("%s: %s has no token for byte 0x%02X (%q): a byte-level vocabulary needs all 256", c.file, c.tokensField, b, string(byteToRune[b]))
			}
			t.byteSym[b] = int32(id)
		}
		return nil
	}
	for id, ty := range t.types {
		if ty != TypeByte {
			continue
		}
		b, ok := parseBytePiece(t.text[id])
		if !ok {
			return fmt.Errorf("%s: %s: token %d is typed byte but spelled %q, not <0xNN>", c.file, c.tokensField, id, t.text[id])
		}
		if t.byteFB[b] < 0 {
			t.byteFB[b] = int32(id)
		}
	}
	return nil
}

// indexMerges resolves each merge to ids. A merge naming a token that is not
// in the vocabulary, or whose result is not, is refused: the file is
// inconsistent.
func (t *BPE) indexMerges(c *bpeConfig) error {
	key := func(s string) (string, bool) {
		if c.byteLevel {
			return byteLevelDecode(s)
		}
		return s, true
	}
	lookup := func(i int, s string) (int32, error) {
		k, ok := key(s)
		if ok {
			if id, found := t.index[k]; found {
				return int32(id), nil
			}
		}
		return 0, fmt.Errorf("%s: %s[%d] (%q %q): %q is not a token of %s", c.file, c.mergesField, i, c.merges[i][0], c.merges[i][1], s, c.tokensField)
	}
	for i, m := range c.merges {
		a, err := lookup(i, m[0])
		if err != nil {
			return err
		}
		b, err := lookup(i, m[1])
		if err != nil {
			return err
		}
		r, err := lookup(i, m[0]+m[1])
		if err != nil {
			return err
		}
		k := pairKey(a, b)
		if prev, dup := t.merges[k]; dup {
			return fmt.Errorf("%s: %s[%d] (%q %q) repeats %s[%d]", c.file, c.mergesField, i, m[0], m[1], c.mergesField, prev.rank)
		}
		t.merges[k] = mergeRule{rank: int32(i), result: r}
	}
	return nil
}
