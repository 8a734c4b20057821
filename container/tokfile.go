package container

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/seamlm/seam/tokenizer"
)

// tokenizer.json holds one tokenizer, as it was imported (docs/container.md
// §7). Version 2 records what the vocabulary came from, since each source
// has its own rules: a llama2.c tokenizer.bin, a GGUF vocabulary (llama.cpp
// semantics, SentencePiece or byte-level BPE), or a Hugging Face
// tokenizer.json kept verbatim. Version 1 files (no "version" field) hold a
// llama2.c-style vocabulary and are still read.
const tokfileVersion = 2

// tokenizerV1 is version 1, and the "llama2c" body of version 2. Pieces are
// stored as JSON strings when every piece is valid UTF-8 (the usual case,
// readable with any viewer) and as standard base64 otherwise: JSON strings
// cannot carry arbitrary bytes, and a llama2.c vocabulary may hold any.
type tokenizerV1 struct {
	PieceEncoding string    `json:"piece_encoding"` // "utf8" or "base64"
	Pieces        []string  `json:"pieces"`
	Scores        []float32 `json:"scores"`
	Types         []int32   `json:"types"` // null: inferred when loaded, see tokenizer.New
	BOS           int       `json:"bos"`
	EOS           int       `json:"eos"`
}

type tokenizerV2 struct {
	Version int            `json:"version"`
	Kind    string         `json:"kind"`
	Llama2c *tokenizerV1   `json:"llama2c,omitempty"`
	GGUF    *ggufVocabJSON `json:"gguf,omitempty"`
	HF      *hfJSON        `json:"hf,omitempty"`
}

// ggufVocabJSON is tokenizer.GGUFVocab; token and merge strings use the
// same piece_encoding rule as version 1.
type ggufVocabJSON struct {
	Model          string    `json:"model"`
	Pre            string    `json:"pre"`
	PieceEncoding  string    `json:"piece_encoding"`
	Tokens         []string  `json:"tokens"`
	Types          []int32   `json:"types"`
	Scores         []float32 `json:"scores"`
	Merges         []string  `json:"merges"`
	BOS            int       `json:"bos"`
	EOS            int       `json:"eos"`
	UNK            int       `json:"unk"`
	EOT            int       `json:"eot"`
	EOM            int       `json:"eom"`
	AddBOS         bool      `json:"add_bos"`
	AddEOS         bool      `json:"add_eos"`
	AddSpacePrefix bool      `json:"add_space_prefix"`
	ChatTemplate   string    `json:"chat_template"`
}

type hfJSON struct {
	Tokenizer json.RawMessage `json:"tokenizer"` // tokenizer.json, verbatim
	Config    json.RawMessage `json:"config"`    // tokenizer_config.json, or null
}

// encodeTokenizer writes a llama2.c vocabulary (version 2, kind llama2c).
func encodeTokenizer(v tokenizer.Vocab) ([]byte, error) {
	return encodeTokenizerSpec(tokenizer.Spec{Kind: tokenizer.SpecLlama2c, Llama2c: &v})
}

func encodeTokenizerSpec(s tokenizer.Spec) ([]byte, error) {
	out := tokenizerV2{Version: tokfileVersion, Kind: s.Kind}
	switch {
	case s.Kind == tokenizer.SpecLlama2c && s.Llama2c != nil:
		v := s.Llama2c
		enc, pieces := encodeStrings(v.Pieces)
		out.Llama2c = &tokenizerV1{PieceEncoding: enc, Pieces: pieces, Scores: v.Scores, Types: v.Types, BOS: v.BOS, EOS: v.EOS}
	case s.Kind == tokenizer.SpecGGUF && s.GGUF != nil:
		g := s.GGUF
		enc := "utf8"
		for _, ss := range [][]string{g.Tokens, g.Merges} {
			if e, _ := encodeStrings(ss); e == "base64" {
				enc = e
			}
		}
		_, tokens := encodeStringsAs(g.Tokens, enc)
		_, merges := encodeStringsAs(g.Merges, enc)
		out.GGUF = &ggufVocabJSON{
			Model: g.Model, Pre: g.Pre, PieceEncoding: enc, Tokens: tokens, Types: g.Types, Scores: g.Scores, Merges: merges,
			BOS: g.BOS, EOS: g.EOS, UNK: g.UNK, EOT: g.EOT, EOM: g.EOM,
			AddBOS: g.AddBOS, AddEOS: g.AddEOS, AddSpacePrefix: g.AddSpacePrefix, ChatTemplate: g.ChatTemplate,
		}
	case s.Kind == tokenizer.SpecHF && s.HFTokenizer != nil:
		out.HF = &hfJSON{Tokenizer: s.HFTokenizer, Config: s.HFConfig}
		if s.HFConfig == nil {
			out.HF.Config = json.RawMessage("null")
		}
	default:
		return nil, fmt.Errorf("encode tokenizer: spec of kind %q is incomplete or unknown", s.Kind)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep pieces readable: "<0x0A>", not "\u003c0x0A\u003e"
	if err := enc.Encode(&out); err != nil {
		return nil, fmt.Errorf("encode tokenizer: %w", err)
	}
	return b.Bytes(), nil
}

// encodeStrings picks utf8 when every string is valid UTF-8, else base64.
func encodeStrings(ss []string) (string, []string) {
	for _, p := range ss {
		if !utf8.ValidString(p) {
			return encodeStringsAs(ss, "base64")
		}
	}
	return "utf8", ss
}

func encodeStringsAs(ss []string, enc string) (string, []string) {
	if enc != "base64" {
		return enc, ss
	}
	out := make([]string, len(ss))
	for i, p := range ss {
		out[i] = base64.StdEncoding.EncodeToString([]byte(p))
	}
	return enc, out
}

func decodeStrings(enc string, ss []string, what string) error {
	switch enc {
	case "utf8":
	case "base64":
		for i, p := range ss {
			raw, err := base64.StdEncoding.DecodeString(p)
			if err != nil {
				return fmt.Errorf("%s: %s %d: %w", TokenizerFile, what, i, err)
			}
			ss[i] = string(raw)
		}
	default:
		return fmt.Errorf("%s: piece_encoding %q, want \"utf8\" or \"base64\"", TokenizerFile, enc)
	}
	return nil
}

// strictDecode decodes one JSON object refusing unknown fields.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", TokenizerFile, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: data after the JSON object", TokenizerFile)
	}
	return nil
}

// parseTokenizer decodes tokenizer.json (version 1 or 2) and builds the
// tokenizer, which must have exactly vocabSize ids.
func parseTokenizer(data []byte, vocabSize int) (tokenizer.Tokenizer, error) {
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s: %w", TokenizerFile, err)
	}
	var spec tokenizer.Spec
	switch {
	case probe.Version == nil:
		var v1 tokenizerV1
		if err := strictDecode(data, &v1); err != nil {
			return nil, err
		}
		v, err := v1Vocab(&v1)
		if err != nil {
			return nil, err
		}
		spec = tokenizer.Spec{Kind: tokenizer.SpecLlama2c, Llama2c: v}
	case *probe.Version == tokfileVersion:
		var v2 tokenizerV2
		if err := strictDecode(data, &v2); err != nil {
			return nil, err
		}
		var err error
		if spec, err = v2Spec(&v2); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s: version %d is not one this Seam reads (1 or %d)", TokenizerFile, *probe.Version, tokfileVersion)
	}
	tok, err := tokenizer.FromSpec(spec, TokenizerFile)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() != vocabSize {
		return nil, fmt.Errorf("%s: %d pieces, the config's vocab_size is %d", TokenizerFile, tok.VocabSize(), vocabSize)
	}
	return tok, nil
}

func v1Vocab(v1 *tokenizerV1) (*tokenizer.Vocab, error) {
	if err := decodeStrings(v1.PieceEncoding, v1.Pieces, "piece"); err != nil {
		return nil, err
	}
	return &tokenizer.Vocab{Pieces: v1.Pieces, Scores: v1.Scores, Types: v1.Types, BOS: v1.BOS, EOS: v1.EOS}, nil
}

func v2Spec(v2 *tokenizerV2) (tokenizer.Spec, error) {
	bodies := 0
	for _, set := range []bool{v2.Llama2c != nil, v2.GGUF != nil, v2.HF != nil} {
		if set {
			bodies++
		}
	}
	if bodies != 1 {
		return tokenizer.Spec{}, fmt.Errorf("%s: kind %q with %d bodies, want exactly one", TokenizerFile, v2.Kind, bodies)
	}
	switch {
	case v2.Kind == tokenizer.SpecLlama2c && v2.Llama2c != nil:
		v, err := v1Vocab(v2.Llama2c)
		return tokenizer.Spec{Kind: v2.Kind, Llama2c: v}, err
	case v2.Kind == tokenizer.SpecGGUF && v2.GGUF != nil:
		g := v2.GGUF
		if err := decodeStrings(g.PieceEncoding, g.Tokens, "token"); err != nil {
			return tokenizer.Spec{}, err
		}
		if err := decodeStrings(g.PieceEncoding, g.Merges, "merge"); err != nil {
			return tokenizer.Spec{}, err
		}
		return tokenizer.Spec{Kind: v2.Kind, GGUF: &tokenizer.GGUFVocab{
			Model: g.Model, Pre: g.Pre, Tokens: g.Tokens, Types: g.Types, Scores: g.Scores, Merges: g.Merges,
			BOS: g.BOS, EOS: g.EOS, UNK: g.UNK, EOT: g.EOT, EOM: g.EOM,
			AddBOS: g.AddBOS, AddEOS: g.AddEOS, AddSpacePrefix: g.AddSpacePrefix, ChatTemplate: g.ChatTemplate,
		}}, nil
	case v2.Kind == tokenizer.SpecHF && v2.HF != nil:
		cfg := []byte(v2.HF.Config)
		if string(bytes.TrimSpace(cfg)) == "null" || len(cfg) == 0 {
			cfg = nil
		}
		return tokenizer.Spec{Kind: v2.Kind, HFTokenizer: v2.HF.Tokenizer, HFConfig: cfg}, nil
	}
	return tokenizer.Spec{}, fmt.Errorf("%s: kind %q is not llama2c, gguf or hf, or its body is missing", TokenizerFile, v2.Kind)
}
