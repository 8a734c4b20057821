package tokenizer

import (
	"fmt"
	"math"
	"strings"

	"github.com/seamlm/seam/gguf"
)

// GGUF metadata keys of the vocabulary (llama.cpp's names).
const (
	KeyModel          = "tokenizer.ggml.model"
	KeyPre            = "tokenizer.ggml.pre"
	KeyTokens         = "tokenizer.ggml.tokens"
	KeyScores         = "tokenizer.ggml.scores"
	KeyTokenTypes     = "tokenizer.ggml.token_type"
	KeyMerges         = "tokenizer.ggml.merges"
	KeyBOS            = "tokenizer.ggml.bos_token_id"
	KeyEOS            = "tokenizer.ggml.eos_token_id"
	KeyUNK            = "tokenizer.ggml.unknown_token_id"
	KeyEOT            = "tokenizer.ggml.eot_token_id"
	KeyEOM            = "tokenizer.ggml.eom_token_id"
	KeyAddBOS         = "tokenizer.ggml.add_bos_token"
	KeyAddEOS         = "tokenizer.ggml.add_eos_token"
	KeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
	KeyChatTemplate   = "tokenizer.chat_template"
)

// ignoredKeys are tokenizer.ggml.* keys that do not change how the "llama"
// and "gpt2" tokenizers encode or decode (llama.cpp reads them for other
// tokenizer models, infill prompts or padding). Any other tokenizer.ggml.*
// key is refused by name.
var ignoredKeys = map[string]bool{
	"tokenizer.ggml.padding_token_id":   true,
	"tokenizer.ggml.seperator_token_id": true, // sic, llama.cpp's spelling
	"tokenizer.ggml.cls_token_id":       true,
	"tokenizer.ggml.mask_token_id":      true,
	"tokenizer.ggml.prefix_token_id":    true,
	"tokenizer.ggml.suffix_token_id":    true,
	"tokenizer.ggml.middle_token_id":    true,
	"tokenizer.ggml.fim_pre_token_id":   true,
	"tokenizer.ggml.fim_suf_token_id":   true,
	"tokenizer.ggml.fim_mid_token_id":   true,
	"tokenizer.ggml.fim_pad_token_id":   true,
	"tokenizer.ggml.fim_rep_token_id":   true,
	"tokenizer.ggml.fim_sep_token_id":   true,
	"tokenizer.ggml.add_sep_token":      true,
	"tokenizer.ggml.token_type_count":   true,
}

// GGUFVocab is a vocabulary as a GGUF file stores it (tokenizer.ggml.*).
type GGUFVocab struct {
	Model  string // "llama" (SentencePiece) or "gpt2" (byte-level BPE)
	Pre    string // gpt2: the pre-tokenizer, "llama-bpe" or "qwen2"
	Tokens []string
	Types  []int32   // nil: inferred (llama) or all normal (gpt2)
	Scores []float32 // llama: merge scores; nil for gpt2
	Merges []string  // gpt2: "a b", best first
	// Special ids, -1 when the vocabulary has none.
	BOS, EOS, UNK, EOT, EOM int
	AddBOS, AddEOS          bool
	AddSpacePrefix          bool   // llama: a dummy-prefix space before text (default true)
	ChatTemplate            string // tokenizer.chat_template, "" when absent
}

// Known pre-tokenizer names, as llama.cpp spells them, with their aliases.
var preByName = map[string]*preTokenizer{
	"llama-bpe":        preLlama3,
	"llama3":           preLlama3,
	"llama-v3":         preLlama3,
	"qwen2":            preQwen2,
	"deepseek-r1-qwen": preQwen2,
}

// ReadGGUFVocab reads the vocabulary of a GGUF file and checks it: counts
// agree, ids are in range, every tokenizer.ggml.* key is understood.
func ReadGGUFVocab(f *gguf.File) (*GGUFVocab, error) {
	name := f.Name()
	fail := func(key, format string, args ...any) error {
		return fmt.Errorf("gguf %s: %s: %s", name, key, fmt.Sprintf(format, args...))
	}
	for _, kv := range f.Metadata() {
		k := kv.Key
		if !strings.HasPrefix(k, "tokenizer.ggml.") || ignoredKeys[k] {
			continue
		}
		switch k {
		case KeyModel, KeyPre, KeyTokens, KeyScores, KeyTokenTypes, KeyMerges, KeyBOS, KeyEOS, KeyUNK, KeyEOT, KeyEOM, KeyAddBOS, KeyAddEOS, KeyAddSpacePrefix:
		case "tokenizer.ggml.remove_extra_whitespaces":
			if b, err := f.Bool(k); err != nil || b {
				return nil, fail(k, "only false is supported")
			}
		default:
			return nil, fail(k, "key not understood by Seam's tokenizer (refused rather than ignored)")
		}
	}
	v := &GGUFVocab{BOS: -1, EOS: -1, UNK: -1, EOT: -1, EOM: -1}
	var err error
	if v.Model, err = f.String(KeyModel); err != nil {
		return nil, err
	}
	if v.Tokens, err = f.Strings(KeyTokens); err != nil {
		return nil, err
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, fail(KeyTokens, "empty")
	}
	if f.Has(KeyScores) {
		if v.Scores, err = f.Float32s(KeyScores); err != nil {
			return nil, err
		}
		if len(v.Scores) != n {
			return nil, fail(KeyScores, "%d entries, but %s has %d", len(v.Scores), KeyTokens, n)
		}
		for i, s := range v.Scores {
			if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
				return nil, fail(KeyScores, "entry %d is %v, not finite", i, s)
			}
		}
	}
	if f.Has(KeyTokenTypes) {
		if v.Types, err = f.Int32s(KeyTokenTypes); err != nil {
			return nil, err
		}
		if len(v.Types) != n {
			return nil, fail(KeyTokenTypes, "%d entries, but %s has %d", len(v.Types), KeyTokens, n)
		}
		for i, ty := range v.Types {
			if ty < TypeUndefined || ty > TypeByte {
				return nil, fail(KeyTokenTypes, "entry %d (%q) is %d, not one of 0..6", i, v.Tokens[i], ty)
			}
		}
	}
	if f.Has(KeyMerges) {
		if v.Merges, err = f.Strings(KeyMerges); err != nil {
			return nil, err
		}
	}
	if f.Has(KeyPre) {
		if v.Pre, err = f.String(KeyPre); err != nil {
			return nil, err
		}
	}
	defBOS, defEOS, defUNK, defAddBOS := -1, -1, -1, false
	switch v.Model {
	case "llama":
		defBOS, defEOS, defUNK, defAddBOS = 1, 2, 0, true
		v.AddSpacePrefix = true
	case "gpt2":
		if v.Pre == "" {
			return nil, fail(KeyPre, "missing: the pre-tokenizer of a gpt2 vocabulary must be named (llama.cpp would guess \"default\")")
		}
		p, ok := preByName[v.Pre]
		if !ok {
			return nil, fail(KeyPre, "%q is not supported (supported: llama-bpe, qwen2 and their aliases llama3, llama-v3, deepseek-r1-qwen)", v.Pre)
		}
		defAddBOS = p == preLlama3 // llama.cpp's default for llama-bpe
		if v.Merges == nil {
			return nil, fail(KeyMerges, "missing: a gpt2 vocabulary needs its merges")
		}
	default:
		return nil, fail(KeyModel, "%q is not supported (supported: llama, gpt2)", v.Model)
	}
	ids := []struct {
		key string
		dst *int
		def int
	}{{KeyBOS, &v.BOS, defBOS}, {KeyEOS, &v.EOS, defEOS}, {KeyUNK, &v.UNK, defUNK}, {KeyEOT, &v.EOT, -1}, {KeyEOM, &v.EOM, -1}}
	for _, e := range ids {
		*e.dst = e.def
		if !f.Has(e.key) {
			continue
		}
		u, err := f.Uint(e.key)
		if err != nil {
			return nil, err
		}
		if u >= uint64(n) {
			return nil, fail(e.key, "%d is outside the %d-token vocabulary", u, n)
		}
		*e.dst = int(u)
	}
	bools := []struct {
		key string
		dst *bool
		def bool
	}{{KeyAddBOS, &v.AddBOS, defAddBOS}, {KeyAddEOS, &v.AddEOS, false}, {KeyAddSpacePrefix, &v.AddSpacePrefix, v.AddSpacePrefix}}
	for _, e := range bools {
		*e.dst = e.def
		if f.Has(e.key) {
			if *e.dst, err = f.Bool(e.key); err != nil {
				return nil, err
			}
		}
	}
	if f.Has(KeyChatTemplate) {
		if v.ChatTemplate, err = f.String(KeyChatTemplate); err != nil {
			return nil, err
		}
	}
	if v.Model == "gpt2" && v.AddSpacePrefix {
		return nil, fail(KeyAddSpacePrefix, "true is not supported for a gpt2 vocabulary")
	}
	if v.AddBOS && v.BOS < 0 {
		return nil, fail(KeyAddBOS, "true, but the file has no %s", KeyBOS)
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, fail(KeyAddEOS, "true, but the file has no %s", KeyEOS)
	}
	return v, nil
}

// AddTo writes the vocabulary's keys to a GGUF writer, with the types
// llama.cpp's converter uses. Absent ids (-1) and empty strings are left out;
// the add_* flags are always written so that no reader falls back on a
// default.
func (v *GGUFVocab) AddTo(w *gguf.Writer) error {
	kvs := []struct {
		key string
		val any
		on  bool
	}{
		{KeyModel, v.Model, true},
		{KeyPre, v.Pre, v.Pre != ""},
		{KeyTokens, v.Tokens, true},
		{KeyScores, v.Scores, v.Scores != nil},
		{KeyTokenTypes, v.Types, v.Types != nil},
		{KeyMerges, v.Merges, v.Merges != nil},
		{KeyBOS, uint32(v.BOS), v.BOS >= 0},
		{KeyEOS, uint32(v.EOS), v.EOS >= 0},
		{KeyUNK, uint32(v.UNK), v.UNK >= 0},
		{KeyEOT, uint32(v.EOT), v.EOT >= 0},
		{KeyEOM, uint32(v.EOM), v.EOM >= 0},
		{KeyAddBOS, v.AddBOS, true},
		{KeyAddEOS, v.AddEOS, true},
		{KeyAddSpacePrefix, v.AddSpacePrefix, v.Model == "llama"},
		{KeyChatTemplate, v.ChatTemplate, v.ChatTemplate != ""},
	}
	for _, e := range kvs {
		if !e.on {
			continue
		}
		if err := w.Add(e.key, e.val); err != nil {
			return err
		}
	}
	return nil
}

// NewFromGGUF builds the tokenizer of a GGUF vocabulary with llama.cpp's
// semantics; name (the file) is used in errors.
func NewFromGGUF(v *GGUFVocab, name string) (Tokenizer, error) {
	switch v.Model {
	case "llama":
		return newSentencePieceGGUF(v, name)
	case "gpt2":
		return newBPEGGUF(v, name)
	}
	return nil, fmt.Errorf("gguf %s: %s: %q is not supported (supported: llama, gpt2)", name, KeyModel, v.Model)
}

func newSentencePieceGGUF(v *GGUFVocab, name string) (*SentencePiece, error) {
	n := len(v.Tokens)
	scores := v.Scores
	if scores == nil {
		scores = make([]float32, n) // llama.cpp's default
	}
	if len(scores) != n {
		return nil, fmt.Errorf("gguf %s: %s: %d entries, but %s has %d", name, KeyScores, len(scores), KeyTokens, n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("gguf %s: %s: %d entries, but %s has %d", name, KeyTokenTypes, len(v.Types), KeyTokens, n)
	}
	t, err := New(Vocab{Pieces: v.Tokens, Scores: scores, Types: v.Types, BOS: v.BOS, EOS: v.EOS})
	if err != nil {
		return nil, fmt.Errorf("gguf %s: vocabulary: %w", name, err)
	}
	var specials []special
	for id, ty := range t.types {
		if ty == TypeControl || ty == TypeUserDefined || ty == TypeUnknown {
			specials = append(specials, special{text: v.Tokens[id], id: id, plain: ty == TypeUserDefined})
		}
	}
	t.specials = newSpecialSet(specials, false)
	t.noPrefix = !v.AddSpacePrefix
	t.addBOS, t.addEOS = v.AddBOS, v.AddEOS
	t.eog = eogSet(v.Tokens, v.EOS, v.EOT, v.EOM)
	t.ggufVocab = v
	return t, nil
}

// fimTexts are the infill markers of the families Seam runs, which
// llama.cpp detects by text and makes control tokens.
var fimTexts = map[string]bool{
	"<|fim_prefix|>": true,
	"<|fim_suffix|>": true,
	"<|fim_middle|>": true,
	"<|fim_pad|>":    true,
	"<|fim_repo|>":   true,
	"<|repo_name|>":  true,
	"<|file_sep|>":   true,
}

// forcedControl reports whether llama.cpp treats a token with text s as a
// control token whatever its type in the file.
func forcedControl(s string) bool { return eogTexts[s] || fimTexts[s] }

// eogSet is llama.cpp's end-of-generation set: EOS, EOT, EOM and the tokens
// whose text says so.
func eogSet(tokens []string, ids ...int) map[int]bool {
	eog := map[int]bool{}
	for _, id := range ids {
		if id >= 0 {
			eog[id] = true
		}
	}
	for id, s := range tokens {
		if eogTexts[s] {
			eog[id] = true
		}
	}
	return eog
}

func newBPEGGUF(v *GGUFVocab, name string) (*BPE, error) {
	file := "gguf " + name
	n := len(v.Tokens)
	pre, ok := preByName[v.Pre]
	if !ok {
		return nil, fmt.Errorf("%s: %s: %q is not supported (supported: llama-bpe, qwen2)", file, KeyPre, v.Pre)
	}
	types := make([]int32, n)
	for i := range types {
		types[i] = TypeNormal
	}
	if v.Types != nil {
		if len(v.Types) != n {
			return nil, fmt.Errorf("%s: %s: %d entries, but %s has %d", file, KeyTokenTypes, len(v.Types), KeyTokens, n)
		}
		copy(types, v.Types)
	}
	merges := make([][2]string, len(v.Merges))
	for i, m := range v.Merges {
		k := strings.IndexByte(m[min(1, len(m)):], ' ') // as llama.cpp: the first space after the first byte
		if k < 0 {
			return nil, fmt.Errorf("%s: %s[%d] (%q) has no space separating the pair", file, KeyMerges, i, m)
		}
		k += min(1, len(m))
		merges[i] = [2]string{m[:k], m[k+1:]}
	}
	c := &bpeConfig{
		file: file, tokensField: KeyTokens, mergesField: KeyMerges,
		tokens: v.Tokens, types: types, merges: merges,
		byteLevel: true, pre: pre, ignoreMerges: pre == preLlama3,
		unk: v.UNK, bos: v.BOS, eos: v.EOS, eot: v.EOT, eom: v.EOM, addBOS: v.AddBOS,
		src: Spec{Kind: SpecGGUF, GGUF: v},
	}
	for id, ty := range types {
		forced := forcedControl(v.Tokens[id])
		if ty == TypeControl || ty == TypeUserDefined || ty == TypeUnknown || forced {
			c.specials = append(c.specials, special{text: v.Tokens[id], id: id, plain: ty == TypeUserDefined && !forced})
		}
	}
	t, err := buildBPE(c)
	if err != nil {
		return nil, err
	}
	// llama.cpp makes tokens named like end-of-generation or infill markers
	// control tokens whatever the file says: parsed from text, decoded to
	// nothing. They stay in the merge index, as llama.cpp merges by text.
	for id, s := range v.Tokens {
		if forcedControl(s) {
			t.types[id] = TypeControl
		}
	}
	t.eog = eogSet(v.Tokens, v.EOS, v.EOT, v.EOM)
	t.addEOS = v.AddEOS
	return t, nil
}

// ggufVocab converts a parsed tokenizer.json to its GGUF form.
func (h *hfFile) ggufVocab() (*GGUFVocab, error) {
	c := &h.cfg
	n := len(c.tokens)
	v := &GGUFVocab{
		Tokens: make([]string, n), Types: make([]int32, n),
		BOS: c.bos, EOS: c.eos, UNK: -1, EOT: -1, EOM: -1,
		AddBOS: c.addBOS, AddEOS: h.addEOS, ChatTemplate: h.chatTemplate,
	}
	copy(v.Tokens, c.tokens)
	copy(v.Types, c.types)
	if c.byteLevel {
		v.Model, v.Pre = "gpt2", h.pre
		if want := h.pre == preLlama3.name; c.ignoreMerges != want {
			return nil, fmt.Errorf("%s: model.ignore_merges = %v, but llama.cpp's %s pre-tokenizer implies %v: a GGUF file cannot express this", h.name, c.ignoreMerges, h.pre, want)
		}
		v.Merges = make([]string, len(c.merges))
		for i, m := range c.merges {
			if strings.Contains(m[0], " ") {
				return nil, fmt.Errorf("%s: model.merges[%d]: %q contains a space, which GGUF's \"a b\" form cannot hold", h.name, i, m[0])
			}
			v.Merges[i] = m[0] + " " + m[1]
		}
		return v, nil
	}
	// SentencePiece style: llama.cpp merges by score, the best-scoring piece
	// first. Minus the merge rank that forms a piece orders merges as
	// tokenizer.json does; pieces no merge forms score below all of them.
	v.Model, v.AddSpacePrefix = "llama", true
	if !c.byteFallback {
		return nil, fmt.Errorf("%s: model.byte_fallback is false; a GGUF SentencePiece vocabulary always falls back to bytes", h.name)
	}
	t, err := buildBPE(c)
	if err != nil {
		return nil, err
	}
	v.Scores = make([]float32, n)
	for id := range v.Scores {
		v.Scores[id] = -float32(len(c.merges) + id)
		if !mergeable(t.types[id]) {
			v.Scores[id] = 0
		}
		v.Types[id] = t.types[id]
	}
	for i, m := range c.merges {
		id := t.index[m[0]+m[1]]
		if s := -float32(i); s > v.Scores[id] {
			v.Scores[id] = s
		}
	}
	if v.UNK = c.unk; v.UNK >= 0 {
		v.Types[v.UNK] = TypeUnknown
	}
	return v, nil
}
