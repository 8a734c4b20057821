package tokenizer

import (
	"fmt"
	"math"
	"strings"
)

// wordMark is SentencePiece's word-boundary symbol; GGUF vocabularies spell
// the space with it, llama2.c files with an ASCII space.
const wordMark = "\u2581"

// Vocab is a vocabulary as stored in a model file.
type Vocab struct {
	Pieces []string
	Scores []float32
	Types  []int32 // may be nil: types are then inferred (see New)
	BOS    int
	EOS    int
}

// SentencePiece is the tokenizer of llama2.c's tokenizer.bin and of GGUF
// files whose tokenizer.ggml.model is "llama": SentencePiece-style BPE.
//
// Vocabularies from both sources are normalised on construction so that they
// behave identically: the SentencePiece word mark U+2581 ("▁") used by GGUF is
// stored as a plain space, the form llama2.c's tokenizer.bin uses. Encoding
// follows llama2.c's encode() and llama.cpp's SPM tokenizer: a dummy-prefix
// space, one symbol per UTF-8 character with byte fallback, then greedy
// merges of the best-scoring adjacent pair. Decoding follows llama2.c's
// decode().
//
// Built by New (llama2.c semantics: no special token is ever parsed from
// text; user-defined and unused pieces match like normal ones) or from a
// GGUFVocab (llama.cpp semantics: control, user-defined and unknown pieces
// spelled in the text become those tokens, and every text fragment after a
// special token gets its own dummy-prefix space). It is immutable and safe
// for concurrent use.
type SentencePiece struct {
	pieces []string // word mark normalised to a space
	scores []float32
	types  []int32
	bos    int
	eos    int

	// lookup maps the text of every matchable piece (not unknown, control or
	// byte) to its id; on duplicates the first id wins.
	lookup   map[string]int
	maxMatch int      // longest matchable piece in bytes, to skip hopeless merges
	byteIDs  [256]int // id to emit for each raw byte (byte fallback)
	byteVal  []int16  // per id: the raw byte a byte piece stands for, or -1

	// llama.cpp semantics (GGUF); all false/nil for llama2.c files.
	specials  *specialSet // parsed from text; nil: none (llama2.c)
	noPrefix  bool        // tokenizer.ggml.add_space_prefix = false
	addBOS    bool
	addEOS    bool
	eog       map[int]bool
	ggufVocab *GGUFVocab // the source, for containers; nil for llama2.c

	wordSplit bool      // no matchable piece has a space after another character
	cache     wordCache // merged words
}

// New validates v and builds a tokenizer from it.
//
// Pieces are normalised: every U+2581 becomes a space. When v.Types is nil
// the types are inferred the way llama2.c's vocabularies are laid out: BOS and
// EOS are control pieces, "<unk>" is the unknown piece, pieces spelled
// <0xNN> are byte pieces, everything else is normal. When v.Types is given, a
// byte-typed piece must be spelled <0xNN>.
//
// If two matchable pieces have the same (normalised) text, text is matched to
// the first of them; the later one can still be decoded.
//
// Byte fallback emits, for a byte b, the byte piece <0xNN> for b when the
// vocabulary has one; otherwise id b+3 (llama2.c's convention: <unk>, <s>,
// </s>, then the 256 bytes) when that id exists; otherwise the unknown piece
// (the first unknown-typed id, else 0). Only with all 256 byte pieces present
// is DecodeAll(Encode(s)) == s guaranteed for arbitrary bytes.
func New(v Vocab) (*SentencePiece, error) {
	n := len(v.Pieces)
	if err := checkVocab(v); err != nil {
		return nil, err
	}
	t := &SentencePiece{
		pieces: make([]string, n),
		scores: append([]float32(nil), v.Scores...),
		types:  make([]int32, n),
		bos:    v.BOS,
		eos:    v.EOS,
		lookup: make(map[string]int, n),
	}
	for i, p := range v.Pieces {
		t.pieces[i] = strings.ReplaceAll(p, wordMark, " ")
	}
	if v.Types != nil {
		copy(t.types, v.Types)
	} else {
		t.inferTypes()
	}
	if err := t.indexBytes(); err != nil {
		return nil, err
	}
	t.indexText()
	_, t.wordSplit = t.lookup[" "]
	for p := range t.lookup {
		if strings.Contains(strings.TrimLeft(p, " "), " ") {
			t.wordSplit = false
		}
	}
	t.addBOS = true // llama2.c's run.c always starts a prompt with BOS
	t.eog = map[int]bool{t.bos: true, t.eos: true}
	return t, nil
}

func checkVocab(v Vocab) error {
	n := len(v.Pieces)
	if n == 0 {
		return fmt.Errorf("empty vocabulary")
	}
	if len(v.Scores) != n {
		return fmt.Errorf("vocabulary has %d pieces but %d scores", n, len(v.Scores))
	}
	if v.Types != nil && len(v.Types) != n {
		return fmt.Errorf("vocabulary has %d pieces but %d token types", n, len(v.Types))
	}
	if v.BOS < 0 || v.BOS >= n {
		return fmt.Errorf("BOS id %d out of range [0, %d)", v.BOS, n)
	}
	if v.EOS < 0 || v.EOS >= n {
		return fmt.Errorf("EOS id %d out of range [0, %d)", v.EOS, n)
	}
	for i, s := range v.Scores {
		// A NaN or infinite score would make the merge order meaningless.
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("token %d (%q): score %v is not finite", i, v.Pieces[i], s)
		}
	}
	for i, ty := range v.Types {
		if ty < TypeUndefined || ty > TypeByte {
			return fmt.Errorf("token %d (%q): token type %d is not one of 0..6", i, v.Pieces[i], ty)
		}
	}
	return nil
}

// inferTypes assigns types to a vocabulary that came without them.
func (t *SentencePiece) inferTypes() {
	for i, p := range t.pieces {
		_, isByte := parseBytePiece(p)
		switch {
		case i == t.bos || i == t.eos:
			t.types[i] = TypeControl
		case p == "<unk>":
			t.types[i] = TypeUnknown
		case isByte:
			t.types[i] = TypeByte
		default:
			t.types[i] = TypeNormal
		}
	}
}

// indexBytes fills byteVal and byteIDs from the byte pieces.
func (t *SentencePiece) indexBytes() error {
	t.byteVal = make([]int16, len(t.pieces))
	found := [256]bool{}
	for i, p := range t.pieces {
		t.byteVal[i] = -1
		if t.types[i] != TypeByte {
			continue
		}
		b, ok := parseBytePiece(p)
		if !ok {
			return fmt.Errorf("token %d: byte-typed piece %q is not of the form <0xNN>", i, p)
		}
		t.byteVal[i] = int16(b)
		if !found[b] {
			found[b] = true
			t.byteIDs[b] = i
		}
	}
	unk := t.unknownID()
	for b := range 256 {
		switch {
		case found[b]:
		case b+3 < len(t.pieces):
			t.byteIDs[b] = b + 3
		default:
			t.byteIDs[b] = unk
		}
	}
	return nil
}

func (t *SentencePiece) unknownID() int {
	for i, ty := range t.types {
		if ty == TypeUnknown {
			return i
		}
	}
	return 0
}

// indexText builds the text lookup over matchable pieces.
func (t *SentencePiece) indexText() {
	for i, p := range t.pieces {
		if !t.matchable(i) || p == "" {
			continue
		}
		if _, dup := t.lookup[p]; dup {
			continue // keep the first id with this text
		}
		t.lookup[p] = i
		t.maxMatch = max(t.maxMatch, len(p))
	}
}

// matchable reports whether text can be encoded to piece id. Unknown,
// control and byte pieces stand for no text of their own.
func (t *SentencePiece) matchable(id int) bool {
	switch t.types[id] {
	case TypeUnknown, TypeControl, TypeByte:
		return false
	}
	return true
}

// parseBytePiece recognises "<0xNN>" (two hex digits, either case).
func parseBytePiece(p string) (byte, bool) {
	if len(p) != 6 || p[:3] != "<0x" || p[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexDigit(p[3])
	lo, ok2 := hexDigit(p[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// VocabSize returns the number of pieces.
func (t *SentencePiece) VocabSize() int { return len(t.pieces) }

// BOS returns the beginning-of-sequence id.
func (t *SentencePiece) BOS() int { return t.bos }

// EOS returns the end-of-sequence id.
func (t *SentencePiece) EOS() int { return t.eos }

// Piece returns the normalised text of piece id (word mark as a space), or ""
// when id is out of range.
func (t *SentencePiece) Piece(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Score returns the merge score of piece id, or 0 when id is out of range.
func (t *SentencePiece) Score(id int) float32 {
	if id < 0 || id >= len(t.pieces) {
		return 0
	}
	return t.scores[id]
}

// Type returns the token type of piece id (given or inferred), or
// TypeUndefined when id is out of range.
func (t *SentencePiece) Type(id int) int32 {
	if id < 0 || id >= len(t.pieces) {
		return TypeUndefined
	}
	return t.types[id]
}

// Vocab returns a copy of the normalised vocabulary, with types filled in;
// New(t.Vocab()) builds a tokenizer that behaves identically.
func (t *SentencePiece) Vocab() Vocab {
	return Vocab{
		Pieces: append([]string(nil), t.pieces...),
		Scores: append([]float32(nil), t.scores...),
		Types:  append([]int32(nil), t.types...),
		BOS:    t.bos,
		EOS:    t.eos,
	}
}

// AddBOS reports whether a prompt starts with BOS: always for llama2.c
// files, tokenizer.ggml.add_bos_token (default true) for GGUF.
func (t *SentencePiece) AddBOS() bool { return t.addBOS }

// AddEOS reports whether the file asks for EOS after a prompt (GGUF's
// tokenizer.ggml.add_eos_token; never for llama2.c).
func (t *SentencePiece) AddEOS() bool { return t.addEOS }

// IsEOG reports whether id ends generation: BOS or EOS for llama2.c files
// (run.c stops at BOS); for GGUF, EOS, the end-of-turn ids and the texts
// llama.cpp treats as end of generation.
func (t *SentencePiece) IsEOG(id int) bool { return t.eog[id] }

// Decode returns the text of token id following token prev, with llama2.c's
// rules: at the start of a text (prev < 0 or prev is BOS) a leading space is
// dropped (it is the dummy prefix), and a byte piece becomes its raw byte
// (possibly one part of a multi-byte UTF-8 character). Control pieces (BOS,
// EOS, ...) decode to "" so that llama2.c files ("\n<s>\n") and GGUF files
// ("<s>") agree; so do unknown pieces of a GGUF vocabulary (as llama.cpp
// and Hugging Face render them); ids out of range decode to "".
func (t *SentencePiece) Decode(prev, id int) string {
	p := t.render(id)
	if (prev < 0 || prev == t.bos) && !t.noPrefix && strings.HasPrefix(p, " ") && t.byteVal[id] < 0 {
		p = p[1:]
	}
	return p
}

// render is the text of id with no regard to its position.
func (t *SentencePiece) render(id int) string {
	if id < 0 || id >= len(t.pieces) || t.types[id] == TypeControl {
		return ""
	}
	if t.specials != nil && t.types[id] == TypeUnknown {
		return ""
	}
	if b := t.byteVal[id]; b >= 0 {
		return string([]byte{byte(b)})
	}
	return t.pieces[id]
}

// DecodeAll decodes a whole sequence as the start of a text, so that the
// dummy-prefix space Encode adds is dropped and DecodeAll(Encode(s, ...)) == s.
// Byte pieces are assembled as raw bytes, so characters split across byte
// pieces come out whole. A llama2.c vocabulary drops a leading space after
// every BOS (run.c's rule); a GGUF vocabulary only from the first piece that
// renders any text (Hugging Face's rule: later pieces keep the space that
// Encode put after a special token).
func (t *SentencePiece) DecodeAll(ids []int) string {
	var sb strings.Builder
	if t.specials == nil {
		prev := t.bos
		for _, id := range ids {
			sb.WriteString(t.Decode(prev, id))
			prev = id
		}
		return sb.String()
	}
	start := true
	for _, id := range ids {
		p := t.render(id)
		if p == "" {
			continue
		}
		if start && !t.noPrefix && p[0] == ' ' && t.byteVal[id] < 0 {
			p = p[1:]
		}
		start = false
		sb.WriteString(p)
	}
	return sb.String()
}
