package tokenizer

import (
	"strings"
	"sync"

	"golang.org/x/text/unicode/norm"
)

// BPE is a merge-ranked BPE tokenizer: byte-level (GPT-2 family: Llama 3,
// Qwen 2 and 3) from a GGUF file or a tokenizer.json, or SentencePiece-style
// (Llama 2's tokenizer.json: word mark ▁, byte fallback) from a
// tokenizer.json. Text is cut at special tokens, normalised, pre-tokenized
// into words, and each word's symbols (bytes, or characters) are merged
// pairwise, the pair with the lowest merge rank first (ties: leftmost).
// It is immutable and safe for concurrent use.
type BPE struct {
	size  int
	text  []string // per id: the token's text in the file (Ġ or ▁ spelling; content for added tokens)
	piece []string // per id: text for Piece (▁ as a space, byte tokens spelled <0xNN>)
	dec   []string // per id: raw bytes it decodes to; content for added tokens
	types []int32

	// index maps a symbol string of the model's domain to a mergeable id:
	// raw bytes for byte-level vocabularies, ▁-spelled text for SentencePiece
	// style ones. Special and added tokens are not in it.
	index   map[string]int
	byteSym [256]int32 // byte-level: the token of each single byte
	byteFB  [256]int32 // SentencePiece style: the <0xNN> token of each byte, -1 if absent
	merges  map[uint64]mergeRule

	byteLevel    bool
	pre          *preTokenizer // byte-level only
	nfc          bool          // Hugging Face NFC normaliser
	prependMark  bool          // SentencePiece style: ▁ before each section, spaces as ▁
	ignoreMerges bool          // a word that is a token is taken whole
	byteFallback bool
	unk          int // -1: none
	fuseUnk      bool
	stripStart   bool // decoder drops one leading space of a text
	wordSplit    bool // SentencePiece style: no token has ▁ after another character, so text splits into words there

	specials *specialSet
	bos, eos int
	addBOS   bool
	addEOS   bool
	eog      map[int]bool

	src          Spec   // what it was built from, for containers
	chatTemplate string // tokenizer_config.json's chat_template

	cache wordCache // byte-level words already merged
}

// wordCache remembers the ids of merged words. Text repeats words, and
// merging is the costly step, so Hugging Face's tokenizers and llama.cpp's
// callers cache the same way. It is bounded: once full it stops growing.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const (
	cacheWords   = 1 << 16 // entries
	cacheWordLen = 64      // bytes; longer words are rare and not cached
)

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string][]int32, 1024)
	}
	if len(c.m) >= cacheWords {
		return
	}
	v := make([]int32, len(ids))
	for i, id := range ids {
		v[i] = int32(id)
	}
	c.m[strings.Clone(w)] = v
}

type mergeRule struct {
	rank   int32
	result int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// VocabSize is the number of ids.
func (t *BPE) VocabSize() int { return t.size }

// BOS returns the beginning-of-sequence id, or -1.
func (t *BPE) BOS() int { return t.bos }

// EOS returns the end-of-sequence id, or -1.
func (t *BPE) EOS() int { return t.eos }

// AddBOS reports the file's rule for prompts.
func (t *BPE) AddBOS() bool { return t.addBOS }

// AddEOS reports whether the file asks for EOS after a prompt.
func (t *BPE) AddEOS() bool { return t.addEOS }

// IsEOG reports whether id ends generation.
func (t *BPE) IsEOG(id int) bool { return t.eog[id] }

// Piece returns the decoded text of id (the content of a special token).
func (t *BPE) Piece(id int) string {
	if id < 0 || id >= t.size {
		return ""
	}
	return t.piece[id]
}

// Type returns the token type of id (TypeControl for special tokens,
// TypeUserDefined for added text tokens).
func (t *BPE) Type(id int) int32 {
	if id < 0 || id >= t.size {
		return TypeUndefined
	}
	return t.types[id]
}

// Encode tokenizes text; see Tokenizer.
func (t *BPE) Encode(text string, bos, eos bool) []int {
	return t.EncodeWith(text, EncodeOptions{BOS: bos, EOS: eos})
}

// EncodeWith tokenizes text with literal spans; see Tokenizer.
func (t *BPE) EncodeWith(text string, opt EncodeOptions) []int {
	ids := make([]int, 0, len(text)/3+3)
	if opt.BOS && t.bos >= 0 {
		ids = append(ids, t.bos)
	}
	m := mergerPool.Get().(*merger)
	defer mergerPool.Put(m)
	for _, f := range t.specials.split(text, opt.Literal) {
		if f.id >= 0 {
			ids = append(ids, f.id)
			continue
		}
		ids = t.encodeSection(m, text[f.start:f.end], ids)
	}
	if opt.EOS && t.eos >= 0 {
		ids = append(ids, t.eos)
	}
	return ids
}

// encodeSection tokenizes text between special tokens.
func (t *BPE) encodeSection(m *merger, s string, ids []int) []int {
	if s == "" {
		return ids
	}
	if t.nfc && !norm.NFC.IsNormalString(s) {
		s = norm.NFC.String(s)
	}
	if t.byteLevel {
		t.pre.split(s, func(w string) { ids = t.encodeWord(m, w, ids) })
		return ids
	}
	if t.prependMark {
		s = wordMark + strings.ReplaceAll(s, " ", wordMark)
	}
	return t.encodeChars(m, s, ids)
}

// encodeWord tokenizes one pre-tokenized word of a byte-level vocabulary.
func (t *BPE) encodeWord(m *merger, w string, ids []int) []int {
	if len(w) == 1 {
		return append(ids, int(t.byteSym[w[0]]))
	}
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
	if id, ok := t.index[w]; ok && t.ignoreMerges {
		ids = append(ids, id)
	} else {
		m.syms = m.syms[:0]
		for i := 0; i < len(w); i++ {
			m.syms = append(m.syms, t.byteSym[w[i]])
		}
		ids = m.run(t.merges, ids)
	}
	if cacheable {
		t.cache.put(w, ids[start:])
	}
	return ids
}

// encodeChars tokenizes a SentencePiece-style section. When no token of the
// vocabulary holds ▁ after another character, no merge can cross such a
// place, so the section is merged word by word (and words are cached);
// otherwise as a whole.
func (t *BPE) encodeChars(m *merger, s string, ids []int) []int {
	if !t.wordSplit {
		return t.encodeCharsWord(m, s, ids)
	}
	start := 0
	for i := 1; i < len(s); i++ {
		if strings.HasPrefix(s[i:], wordMark) && !strings.HasSuffix(s[:i], wordMark) {
			ids = t.encodeCachedWord(m, s[start:i], ids)
			start = i
		}
	}
	return t.encodeCachedWord(m, s[start:], ids)
}

func (t *BPE) encodeCachedWord(m *merger, w string, ids []int) []int {
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
	ids = t.encodeCharsWord(m, w, ids)
	if cacheable {
		t.cache.put(w, ids[start:])
	}
	return ids
}

// encodeCharsWord merges one SentencePiece-style run: one symbol per
// character, characters missing from the vocabulary as their byte tokens
// (byte fallback) or the unknown token.
func (t *BPE) encodeCharsWord(m *merger, s string, ids []int) []int {
	m.syms = m.syms[:0]
	for i := 0; i < len(s); {
		n := validSeqLen(s[i:])
		if n < 0 {
			n = -n // an ill-formed byte sequence: never in the vocabulary
		} else if id, ok := t.index[s[i:i+n]]; ok {
			m.syms = append(m.syms, int32(id))
			i += n
			continue
		}
		t.fallback(m, s[i:i+n])
		i += n
	}
	return m.run(t.merges, ids)
}

// fallback appends the symbols for a character missing from the vocabulary:
// its byte tokens when all exist, else the unknown token (fused with a
// preceding unknown token when the model says so).
func (t *BPE) fallback(m *merger, ch string) {
	if t.byteFallback {
		ok := true
		for i := 0; i < len(ch); i++ {
			ok = ok && t.byteFB[ch[i]] >= 0
		}
		if ok {
			for i := 0; i < len(ch); i++ {
				m.syms = append(m.syms, t.byteFB[ch[i]])
			}
			return
		}
	}
	if t.unk < 0 {
		return // no way to represent it: dropped, as Hugging Face does without an unk token
	}
	if t.fuseUnk && len(m.syms) > 0 && m.syms[len(m.syms)-1] == int32(t.unk) {
		return
	}
	m.syms = append(m.syms, int32(t.unk))
}

// Decode returns the raw bytes of id. Control tokens decode to "".
func (t *BPE) Decode(prev, id int) string {
	if id < 0 || id >= t.size || t.types[id] == TypeControl {
		return ""
	}
	p := t.dec[id]
	if t.stripStart && (prev < 0 || prev == t.bos) && strings.HasPrefix(p, " ") {
		p = p[1:]
	}
	return p
}

// DecodeAll decodes ids as the start of a text: raw bytes, control tokens
// left out, and for SentencePiece-style vocabularies the first leading space
// dropped.
func (t *BPE) DecodeAll(ids []int) string {
	var sb strings.Builder
	start := true
	for _, id := range ids {
		if id < 0 || id >= t.size || t.types[id] == TypeControl {
			continue
		}
		p := t.dec[id]
		if start && t.stripStart && strings.HasPrefix(p, " ") {
			p = p[1:]
		}
		start = false
		sb.WriteString(p)
	}
	return sb.String()
}

// merger holds the scratch state of one merge run; pooled so that Encode
// allocates little and stays safe for concurrent use.
type merger struct {
	syms []int32
	next []int32
	prev []int32
	heap minHeap[mergeCand]
}

var mergerPool = sync.Pool{New: func() any { return &merger{} }}

type mergeCand struct {
	rank   int32
	pos    int32 // left symbol position
	left   int32 // tokens at push time, to detect staleness
	right  int32
	result int32
}

func (c mergeCand) before(d mergeCand) bool {
	if c.rank != d.rank {
		return c.rank < d.rank
	}
	return c.pos < d.pos
}

// run merges m.syms with the rules and appends the resulting ids.
func (m *merger) run(rules map[uint64]mergeRule, ids []int) []int {
	n := len(m.syms)
	if n == 0 {
		return ids
	}
	if n == 1 {
		return append(ids, int(m.syms[0]))
	}
	m.next = m.next[:0]
	m.prev = m.prev[:0]
	m.heap = m.heap[:0]
	for i := range n {
		m.prev = append(m.prev, int32(i-1))
		m.next = append(m.next, int32(i+1))
	}
	m.next[n-1] = -1
	for i := 0; i+1 < n; i++ {
		m.consider(rules, int32(i), int32(i+1))
	}
	for len(m.heap) > 0 {
		c := m.heap.pop()
		if m.syms[c.pos] != c.left || m.next[c.pos] < 0 || m.syms[m.next[c.pos]] != c.right {
			continue // stale
		}
		r := m.next[c.pos]
		m.syms[c.pos] = c.result
		m.syms[r] = -1
		after := m.next[r]
		m.next[c.pos] = after
		if after >= 0 {
			m.prev[after] = c.pos
		}
		if p := m.prev[c.pos]; p >= 0 {
			m.consider(rules, p, c.pos)
		}
		if after >= 0 {
			m.consider(rules, c.pos, after)
		}
	}
	for i := int32(0); i >= 0; i = m.next[i] {
		ids = append(ids, int(m.syms[i]))
	}
	return ids
}

func (m *merger) consider(rules map[uint64]mergeRule, l, r int32) {
	a, b := m.syms[l], m.syms[r]
	rule, ok := rules[pairKey(a, b)]
	if !ok {
		return
	}
	m.heap.push(mergeCand{rank: rule.rank, pos: l, left: a, right: b, result: rule.result})
}
