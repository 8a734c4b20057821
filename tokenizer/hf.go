package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// File names of a Hugging Face tokenizer folder.
const (
	HFTokenizerFile = "tokenizer.json"
	HFConfigFile    = "tokenizer_config.json"
)

// maxHFFile bounds the size of a tokenizer.json read whole (the largest
// public ones are tens of MB).
const maxHFFile = 512 << 20

// LoadHF reads a Hugging Face tokenizer. path is a tokenizer.json or a
// folder holding one; tokenizer_config.json beside it, when present, supplies
// the BOS/EOS rules and the chat template.
func LoadHF(path string) (*BPE, error) {
	tokPath, cfgPath, err := hfPaths(path)
	if err != nil {
		return nil, err
	}
	tok, cfg, err := readHFFiles(tokPath, cfgPath)
	if err != nil {
		return nil, err
	}
	return ParseHF(tok, cfg, tokPath)
}

// ReadHFVocab reads a Hugging Face tokenizer folder (or tokenizer.json path)
// and returns the vocabulary as a GGUF file stores it, the way llama.cpp's
// converter writes it: byte-level vocabularies as model "gpt2" with their
// pre-tokenizer name and merges, SentencePiece-style ones as model "llama"
// with scores (minus the merge rank that forms each piece). Added tokens
// become control (special) or user-defined (other) tokens.
func ReadHFVocab(dir string) (*GGUFVocab, error) {
	tokPath, cfgPath, err := hfPaths(dir)
	if err != nil {
		return nil, err
	}
	tok, cfg, err := readHFFiles(tokPath, cfgPath)
	if err != nil {
		return nil, err
	}
	h, err := parseHF(tok, cfg, tokPath)
	if err != nil {
		return nil, err
	}
	return h.ggufVocab()
}

func hfPaths(path string) (tokPath, cfgPath string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("tokenizer: %w", err)
	}
	tokPath = path
	if st.IsDir() {
		tokPath = filepath.Join(path, HFTokenizerFile)
	}
	return tokPath, filepath.Join(filepath.Dir(tokPath), HFConfigFile), nil
}

func readHFFiles(tokPath, cfgPath string) (tok, cfg []byte, err error) {
	if tok, err = readBounded(tokPath); err != nil {
		return nil, nil, err
	}
	cfg, err = readBounded(cfgPath)
	if os.IsNotExist(err) {
		return tok, nil, nil
	}
	return tok, cfg, err
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxHFFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxHFFile {
		return nil, fmt.Errorf("%s: larger than %d bytes, more than any tokenizer file", path, maxHFFile)
	}
	return data, nil
}

// ParseHF builds a tokenizer from the bytes of tokenizer.json and
// tokenizer_config.json (nil when absent); name is used in errors.
func ParseHF(tokJSON, cfgJSON []byte, name string) (*BPE, error) {
	h, err := parseHF(tokJSON, cfgJSON, name)
	if err != nil {
		return nil, err
	}
	t, err := buildBPE(&h.cfg)
	if err != nil {
		return nil, err
	}
	t.addEOS, t.chatTemplate = h.addEOS, h.chatTemplate
	return t, nil
}

// hfFile is a parsed tokenizer.json and tokenizer_config.json.
type hfFile struct {
	name         string
	cfg          bpeConfig
	pre          string // GGUF pre-tokenizer name, byte-level only
	special      []bool // per id: an added token marked special
	added        []bool // per id: an added token
	addEOS       bool
	chatTemplate string
}

// JSON shapes. Objects whose keys Seam does not know are refused by name
// (see checkKeys): a key that changes behaviour must not be ignored.
type hfJSON struct {
	Version       string          `json:"version"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type hfAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type hfModel struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   map[string]int  `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

// decodeStrict decodes data into v refusing unknown keys, naming what.
func decodeStrict(data []byte, v any, name, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %s: %v", name, what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: %s: data after the JSON value", name, what)
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

func componentType(raw json.RawMessage, name, field string) (string, error) {
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return "", fmt.Errorf("%s: %s: %v", name, field, err)
	}
	if t.Type == "" {
		return "", fmt.Errorf("%s: %s has no type", name, field)
	}
	return t.Type, nil
}

func parseHF(tokJSON, cfgJSON []byte, name string) (*hfFile, error) {
	var j hfJSON
	if err := decodeStrict(tokJSON, &j, name, "tokenizer.json"); err != nil {
		var seam struct {
			Version       any     `json:"version"`
			PieceEncoding *string `json:"piece_encoding"`
		}
		if json.Unmarshal(tokJSON, &seam) == nil {
			if _, num := seam.Version.(float64); num || seam.PieceEncoding != nil {
				return nil, fmt.Errorf("%s is a Seam container's tokenizer file, not a Hugging Face tokenizer.json: open the container folder instead", name)
			}
		}
		return nil, err
	}
	h := &hfFile{name: name}
	c := &h.cfg
	c.file, c.tokensField, c.mergesField = name, "model.vocab", "model.merges"
	c.leftmost = true
	c.bos, c.eos, c.eot, c.eom, c.unk = -1, -1, -1, -1, -1
	c.src = Spec{Kind: SpecHF, HFTokenizer: tokJSON, HFConfig: cfgJSON}
	if !isNull(j.Truncation) {
		return nil, fmt.Errorf("%s: truncation is set; Seam never truncates silently (set it to null)", name)
	}
	if isNull(j.Model) {
		return nil, fmt.Errorf("%s: model is missing", name)
	}
	var m hfModel
	if err := decodeStrict(j.Model, &m, name, "model"); err != nil {
		return nil, err
	}
	if err := h.model(&m); err != nil {
		return nil, err
	}
	if err := h.vocab(&m, j.AddedTokens); err != nil {
		return nil, err
	}
	if err := h.pipeline(&j); err != nil {
		return nil, err
	}
	if err := h.addedTokens(j.AddedTokens); err != nil {
		return nil, err
	}
	post, err := h.postProcessor(j.PostProcessor)
	if err != nil {
		return nil, err
	}
	if err := h.config(cfgJSON, post); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *hfFile) model(m *hfModel) error {
	if m.Type != "BPE" {
		return fmt.Errorf("%s: model.type %q is not supported (supported: BPE)", h.name, m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return fmt.Errorf("%s: model.dropout %v is not supported: BPE dropout makes encoding random", h.name, *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return fmt.Errorf("%s: model.continuing_subword_prefix %q is not supported", h.name, *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return fmt.Errorf("%s: model.end_of_word_suffix %q is not supported", h.name, *m.EndOfWordSuffix)
	}
	h.cfg.ignoreMerges, h.cfg.byteFallback, h.cfg.fuseUnk = m.IgnoreMerges, m.ByteFallback, m.FuseUnk
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return fmt.Errorf("%s: model.merges: %w", h.name, err)
	}
	h.cfg.merges = merges
	return nil
}

// parseMerges accepts both spellings: "a b" strings (tokenizers < 0.20) and
// ["a", "b"] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	body := bytes.TrimSpace(raw)
	if len(body) > 0 && body[0] == '[' {
		body = bytes.TrimSpace(body[1:])
	}
	if len(body) > 0 && body[0] == '[' {
		var pairs [][2]string
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return nil, fmt.Errorf("a list of [a, b] pairs: %v", err)
		}
		return pairs, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err != nil {
		return nil, fmt.Errorf("neither a list of \"a b\" strings nor of [a, b] pairs: %v", err)
	}
	pairs := make([][2]string, len(strs))
	for i, s := range strs {
		a, b, ok := strings.Cut(s, " ")
		if !ok {
			return nil, fmt.Errorf("entry %d (%q) has no space separating the pair", i, s)
		}
		pairs[i] = [2]string{a, b}
	}
	return pairs, nil
}

// vocab lays out the ids: model.vocab, then the added tokens, which may also
// be in model.vocab with the same id.
func (h *hfFile) vocab(m *hfModel, added []hfAddedToken) error {
	size, entries := 0, len(m.Vocab)+len(added)
	for tok, id := range m.Vocab {
		if id < 0 || id >= maxVocab {
			return fmt.Errorf("%s: model.vocab[%q] = %d, outside [0, %d)", h.name, tok, id, maxVocab)
		}
		size = max(size, id+1)
	}
	for i, a := range added {
		if a.ID < 0 || a.ID >= maxVocab {
			return fmt.Errorf("%s: added_tokens[%d] (%q): id %d outside [0, %d)", h.name, i, a.Content, a.ID, maxVocab)
		}
		size = max(size, a.ID+1)
	}
	if size > entries {
		return fmt.Errorf("%s: model.vocab and added_tokens hold %d entries but ids reach %d: ids must be contiguous", h.name, entries, size-1)
	}
	c := &h.cfg
	c.tokens = make([]string, size)
	c.types = make([]int32, size)
	set := make([]bool, size)
	for tok, id := range m.Vocab {
		if set[id] {
			return fmt.Errorf("%s: model.vocab: id %d is given to both %q and %q", h.name, id, c.tokens[id], tok)
		}
		c.tokens[id], c.types[id], set[id] = tok, TypeNormal, true
	}
	h.special = make([]bool, size)
	h.added = make([]bool, size)
	for i, a := range added {
		if set[a.ID] && c.tokens[a.ID] != a.Content {
			return fmt.Errorf("%s: added_tokens[%d]: id %d is %q, but model.vocab gives it to %q", h.name, i, a.ID, a.Content, c.tokens[a.ID])
		}
		if h.added[a.ID] {
			return fmt.Errorf("%s: added_tokens[%d]: id %d (%q) is added twice", h.name, i, a.ID, a.Content)
		}
		c.tokens[a.ID], set[a.ID] = a.Content, true
		h.added[a.ID], h.special[a.ID] = true, a.Special
		c.types[a.ID] = TypeUserDefined
		if a.Special {
			c.types[a.ID] = TypeControl
		}
	}
	for id := range set {
		if !set[id] {
			return fmt.Errorf("%s: no token has id %d: ids must be contiguous", h.name, id)
		}
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return fmt.Errorf("%s: model.unk_token %q is not in model.vocab", h.name, *m.UnkToken)
		}
		c.unk = id
		if !h.added[id] {
			c.types[id] = TypeUnknown
		}
	}
	return nil
}

// maxVocab bounds ids so that a hostile file cannot make Seam allocate
// gigabytes for a sparse id space.
const maxVocab = 1 << 22

// pipeline recognises the normalizer, pre-tokenizer and decoder. Only the
// combinations of the supported families are accepted; anything else is
// refused by name.
func (h *hfFile) pipeline(j *hfJSON) error {
	norm, err := h.normalizer(j.Normalizer)
	if err != nil {
		return err
	}
	pre, err := h.preTokenizer(j.PreTokenizer)
	if err != nil {
		return err
	}
	dec, err := h.decoder(j.Decoder)
	if err != nil {
		return err
	}
	c := &h.cfg
	switch {
	case pre != nil && dec == "ByteLevel" && (norm == "" || norm == "NFC"):
		c.byteLevel, c.pre, c.nfc = true, pre, norm == "NFC"
		h.pre = pre.name
		if c.byteFallback {
			return fmt.Errorf("%s: model.byte_fallback with a ByteLevel pre-tokenizer is not supported", h.name)
		}
	case pre == nil && dec == "SentencePiece" && norm == "Prepend+Replace":
		c.prependMark, c.stripStart = true, true
	default:
		return fmt.Errorf("%s: unsupported pipeline: normalizer %s, pre_tokenizer %s, decoder %s (supported: byte-level BPE with a Llama 3 or Qwen 2 Split regex and ByteLevel; SentencePiece-style BPE with Prepend/Replace ▁ and a ByteFallback decoder)",
			h.name, orNone(norm), orNone(preName(pre)), orNone(dec))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func preName(p *preTokenizer) string {
	if p == nil {
		return ""
	}
	return p.name
}

func (h *hfFile) normalizer(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	typ, err := componentType(raw, h.name, "normalizer")
	if err != nil {
		return "", err
	}
	switch typ {
	case "NFC":
		var n struct {
			Type string `json:"type"`
		}
		return "NFC", decodeStrict(raw, &n, h.name, "normalizer")
	case "Sequence":
		var seq struct {
			Type        string            `json:"type"`
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := decodeStrict(raw, &seq, h.name, "normalizer"); err != nil {
			return "", err
		}
		if len(seq.Normalizers) == 2 && isPrependMark(seq.Normalizers[0]) && isReplace(seq.Normalizers[1], " ", wordMark) {
			return "Prepend+Replace", nil
		}
		return "", fmt.Errorf("%s: normalizer Sequence %s is not supported (supported: NFC; Sequence of Prepend \"▁\" and Replace \" \" with \"▁\")", h.name, compact(raw))
	}
	return "", fmt.Errorf("%s: normalizer type %q is not supported (supported: NFC; Sequence of Prepend \"▁\" and Replace \" \" with \"▁\")", h.name, typ)
}

func isPrependMark(raw json.RawMessage) bool {
	var p struct {
		Type    string `json:"type"`
		Prepend string `json:"prepend"`
	}
	return decodeStrict(raw, &p, "", "") == nil && p.Type == "Prepend" && p.Prepend == wordMark
}

func isReplace(raw json.RawMessage, from, to string) bool {
	var r struct {
		Type    string `json:"type"`
		Pattern struct {
			String *string `json:"String"`
		} `json:"pattern"`
		Content string `json:"content"`
	}
	return decodeStrict(raw, &r, "", "") == nil && r.Type == "Replace" && r.Pattern.String != nil && *r.Pattern.String == from && r.Content == to
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	s := b.String()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// preTokenizer recognises Sequence[Split(regex of llama-bpe or qwen2,
// Isolated), ByteLevel(add_prefix_space false, use_regex false)].
func (h *hfFile) preTokenizer(raw json.RawMessage) (*preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := componentType(raw, h.name, "pre_tokenizer")
	if err != nil {
		return nil, err
	}
	if typ != "Sequence" {
		return nil, fmt.Errorf("%s: pre_tokenizer type %q is not supported (supported: Sequence of a Llama 3 or Qwen 2 Split and ByteLevel)", h.name, typ)
	}
	var seq struct {
		Type          string            `json:"type"`
		Pretokenizers []json.RawMessage `json:"pretokenizers"`
	}
	if err := decodeStrict(raw, &seq, h.name, "pre_tokenizer"); err != nil {
		return nil, err
	}
	if len(seq.Pretokenizers) != 2 {
		return nil, fmt.Errorf("%s: pre_tokenizer Sequence of %d steps is not supported (supported: Split then ByteLevel)", h.name, len(seq.Pretokenizers))
	}
	var split struct {
		Type    string `json:"type"`
		Pattern struct {
			Regex *string `json:"Regex"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	if err := decodeStrict(seq.Pretokenizers[0], &split, h.name, "pre_tokenizer.pretokenizers[0]"); err != nil {
		return nil, err
	}
	if split.Type != "Split" || split.Pattern.Regex == nil || split.Behavior != "Isolated" || split.Invert {
		return nil, fmt.Errorf("%s: pre_tokenizer.pretokenizers[0] %s is not supported (supported: Split with a Regex, Isolated, not inverted)", h.name, compact(seq.Pretokenizers[0]))
	}
	var pre *preTokenizer
	switch *split.Pattern.Regex {
	case regexLlama3:
		pre = preLlama3
	case regexQwen2:
		pre = preQwen2
	default:
		return nil, fmt.Errorf("%s: pre_tokenizer Split regex %q is not supported (supported: the Llama 3 and Qwen 2 patterns)", h.name, *split.Pattern.Regex)
	}
	var bl struct {
		Type           string `json:"type"`
		AddPrefixSpace bool   `json:"add_prefix_space"`
		TrimOffsets    bool   `json:"trim_offsets"`
		UseRegex       bool   `json:"use_regex"`
	}
	if err := decodeStrict(seq.Pretokenizers[1], &bl, h.name, "pre_tokenizer.pretokenizers[1]"); err != nil {
		return nil, err
	}
	if bl.Type != "ByteLevel" || bl.AddPrefixSpace || bl.UseRegex {
		return nil, fmt.Errorf("%s: pre_tokenizer.pretokenizers[1] %s is not supported (supported: ByteLevel with add_prefix_space and use_regex false)", h.name, compact(seq.Pretokenizers[1]))
	}
	return pre, nil
}

// decoder recognises ByteLevel and Llama 2's Sequence[Replace ▁→" ",
// ByteFallback, Fuse, Strip(" ", 1, 0)].
func (h *hfFile) decoder(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	typ, err := componentType(raw, h.name, "decoder")
	if err != nil {
		return "", err
	}
	switch typ {
	case "ByteLevel":
		var d struct {
			Type           string `json:"type"`
			AddPrefixSpace bool   `json:"add_prefix_space"`
			TrimOffsets    bool   `json:"trim_offsets"`
			UseRegex       bool   `json:"use_regex"`
		}
		// The flags only matter for offsets and pre-tokenizing, never for
		// decoding ids to bytes.
		return "ByteLevel", decodeStrict(raw, &d, h.name, "decoder")
	case "Sequence":
		var seq struct {
			Type     string            `json:"type"`
			Decoders []json.RawMessage `json:"decoders"`
		}
		if err := decodeStrict(raw, &seq, h.name, "decoder"); err != nil {
			return "", err
		}
		if len(seq.Decoders) == 4 && isReplace(seq.Decoders[0], wordMark, " ") && isPlain(seq.Decoders[1], "ByteFallback") &&
			isPlain(seq.Decoders[2], "Fuse") && isStripSpace(seq.Decoders[3]) {
			return "SentencePiece", nil
		}
		return "", fmt.Errorf("%s: decoder Sequence %s is not supported (supported: ByteLevel; Replace ▁, ByteFallback, Fuse, Strip)", h.name, compact(raw))
	}
	return "", fmt.Errorf("%s: decoder type %q is not supported (supported: ByteLevel; Sequence of Replace ▁, ByteFallback, Fuse, Strip)", h.name, typ)
}

func isPlain(raw json.RawMessage, typ string) bool {
	var d struct {
		Type string `json:"type"`
	}
	return decodeStrict(raw, &d, "", "") == nil && d.Type == typ
}

func isStripSpace(raw json.RawMessage) bool {
	var d struct {
		Type    string `json:"type"`
		Content string `json:"content"`
		Start   int    `json:"start"`
		Stop    int    `json:"stop"`
	}
	return decodeStrict(raw, &d, "", "") == nil && d.Type == "Strip" && d.Content == " " && d.Start == 1 && d.Stop == 0
}

// addedTokens makes every added token a special for splitting.
func (h *hfFile) addedTokens(added []hfAddedToken) error {
	for i, a := range added {
		if a.SingleWord {
			return fmt.Errorf("%s: added_tokens[%d] (%q): single_word is not supported", h.name, i, a.Content)
		}
		if a.Content == "" {
			return fmt.Errorf("%s: added_tokens[%d]: empty content", h.name, i)
		}
		// A normalized added token is matched against normalised text. With no
		// normaliser, or NFC and content already in NFC, that is the raw text;
		// with the ▁ normaliser it is not, and Seam does not implement it.
		if a.Normalized && (h.cfg.prependMark || !norm.NFC.IsNormalString(a.Content)) {
			return fmt.Errorf("%s: added_tokens[%d] (%q): normalized = true is not supported with this normalizer", h.name, i, a.Content)
		}
		h.cfg.specials = append(h.cfg.specials, special{text: a.Content, id: a.ID, lstrip: a.LStrip, rstrip: a.RStrip, plain: !a.Special})
	}
	return nil
}

// postRule is what a post_processor adds with add_special_tokens=True.
type postRule struct {
	known      bool // the post-processor says what it adds
	bos, eos   int  // -1: nothing
	addB, addE bool
}

func (h *hfFile) postProcessor(raw json.RawMessage) (postRule, error) {
	r := postRule{bos: -1, eos: -1}
	if isNull(raw) {
		return r, nil
	}
	typ, err := componentType(raw, h.name, "post_processor")
	if err != nil {
		return r, err
	}
	switch typ {
	case "ByteLevel":
		r.known = true // adds nothing
		return r, nil
	case "TemplateProcessing":
		var tp struct {
			Type          string            `json:"type"`
			Single        []json.RawMessage `json:"single"`
			Pair          json.RawMessage   `json:"pair"`
			SpecialTokens map[string]struct {
				ID     string   `json:"id"`
				IDs    []int    `json:"ids"`
				Tokens []string `json:"tokens"`
			} `json:"special_tokens"`
		}
		if err := decodeStrict(raw, &tp, h.name, "post_processor"); err != nil {
			return r, err
		}
		r.known = true
		seen := false
		for i, item := range tp.Single {
			var it struct {
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct {
					ID string `json:"id"`
				} `json:"Sequence"`
			}
			_ = json.Unmarshal(item, &it)
			switch {
			case it.Sequence != nil && it.Sequence.ID == "A" && !seen:
				seen = true
			case it.SpecialToken != nil && (i == 0 || i == len(tp.Single)-1):
				st, ok := tp.SpecialTokens[it.SpecialToken.ID]
				if !ok || len(st.IDs) != 1 {
					return r, fmt.Errorf("%s: post_processor.special_tokens[%q] must name exactly one id", h.name, it.SpecialToken.ID)
				}
				if !seen {
					r.bos, r.addB = st.IDs[0], true
				} else {
					r.eos, r.addE = st.IDs[0], true
				}
			default:
				return r, fmt.Errorf("%s: post_processor.single %s is not supported (supported: [special] $A [special])", h.name, compact(item))
			}
		}
		if !seen {
			return r, fmt.Errorf("%s: post_processor.single has no sequence $A", h.name)
		}
		return r, nil
	}
	return r, fmt.Errorf("%s: post_processor type %q is not supported (supported: ByteLevel, TemplateProcessing)", h.name, typ)
}

// config reads tokenizer_config.json: BOS/EOS tokens and rules, the chat
// template, and refuses settings Seam does not implement.
func (h *hfFile) config(data []byte, post postRule) error {
	c := &h.cfg
	cfgName := filepath.Join(filepath.Dir(h.name), HFConfigFile)
	var cfg map[string]json.RawMessage
	if data != nil {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return fmt.Errorf("%s: %v", cfgName, err)
		}
	}
	boolKey := func(key string) (val, set bool, err error) {
		raw, ok := cfg[key]
		if !ok || isNull(raw) {
			return false, false, nil
		}
		if err := json.Unmarshal(raw, &val); err != nil {
			return false, false, fmt.Errorf("%s: %s: %v", cfgName, key, err)
		}
		return val, true, nil
	}
	tokenKey := func(key string) (int, error) {
		raw, ok := cfg[key]
		if !ok || isNull(raw) {
			return -1, nil
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			var obj struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal(raw, &obj); err != nil {
				return -1, fmt.Errorf("%s: %s is neither a string nor an object with content", cfgName, key)
			}
			s = obj.Content
		}
		if id := slices.Index(c.tokens, s); id >= 0 {
			return id, nil
		}
		return -1, fmt.Errorf("%s: %s %q is not a token of %s", cfgName, key, s, h.name)
	}
	for _, key := range []string{"split_special_tokens", "add_prefix_space", "do_lower_case"} {
		if v, _, err := boolKey(key); err != nil {
			return err
		} else if v {
			return fmt.Errorf("%s: %s = true is not supported", cfgName, key)
		}
	}
	if v, set, err := boolKey("legacy"); err != nil {
		return err
	} else if set && !v && c.prependMark {
		return fmt.Errorf("%s: legacy = false is not supported (its Metaspace handling differs from tokenizer.json's normalizer)", cfgName)
	}
	if raw, ok := cfg["errors"]; ok && !isNull(raw) {
		var e string
		if err := json.Unmarshal(raw, &e); err != nil || e != "replace" {
			return fmt.Errorf("%s: errors = %s is not supported (Seam replaces invalid UTF-8 with U+FFFD)", cfgName, raw)
		}
	}
	var err error
	if c.bos, err = tokenKey("bos_token"); err != nil {
		return err
	}
	if c.eos, err = tokenKey("eos_token"); err != nil {
		return err
	}
	// The post-processor is what Hugging Face runs for add_special_tokens;
	// tokenizer_config's add_bos_token/add_eos_token override it (as
	// LlamaTokenizerFast does), naming the config's tokens.
	c.addBOS, h.addEOS = post.addB, post.addE
	if post.addB && c.bos < 0 {
		c.bos = post.bos
	}
	if post.addE && c.eos < 0 {
		c.eos = post.eos
	}
	if post.addB && post.bos != c.bos {
		return fmt.Errorf("%s: post_processor adds token %d first but bos_token is %d", h.name, post.bos, c.bos)
	}
	if v, set, err := boolKey("add_bos_token"); err != nil {
		return err
	} else if set {
		c.addBOS = v
	}
	if v, set, err := boolKey("add_eos_token"); err != nil {
		return err
	} else if set {
		h.addEOS = v
	}
	if c.addBOS && c.bos < 0 {
		return fmt.Errorf("%s: add_bos_token is true but there is no bos_token", cfgName)
	}
	if h.addEOS && c.eos < 0 {
		return fmt.Errorf("%s: add_eos_token is true but there is no eos_token", cfgName)
	}
	// Tokens listed as additional special tokens are special even when
	// added_tokens says otherwise (transformers registers them as special).
	if raw, ok := cfg["additional_special_tokens"]; ok && !isNull(raw) {
		var names []json.RawMessage
		if err := json.Unmarshal(raw, &names); err != nil {
			return fmt.Errorf("%s: additional_special_tokens: %v", cfgName, err)
		}
		for i, n := range names {
			key := fmt.Sprintf("additional_special_tokens[%d]", i)
			cfg[key] = n
			id, err := tokenKey(key)
			if err != nil {
				return err
			}
			c.types[id] = TypeControl
			h.special[id] = true
			for k := range c.specials {
				if c.specials[k].id == id {
					c.specials[k].plain = false
				}
			}
		}
	}
	if raw, ok := cfg["chat_template"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &h.chatTemplate); err != nil {
			return fmt.Errorf("%s: chat_template: only a single template string is supported: %v", cfgName, err)
		}
	}
	return nil
}
