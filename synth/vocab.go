package synth

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/seamlm/seam/gguf"
)

// Vocab is a vocabulary in the shape of GGUF's tokenizer.ggml.* keys.
//
// TEMPORARY: it mirrors tokenizer.GGUFVocab, which the tokenizer package
// is gaining together with tokenizer.ReadHFVocab; once that lands, synth
// takes a *tokenizer.GGUFVocab and readHFVocab below goes.
type Vocab struct {
	Model, Pre     string   // tokenizer.ggml.model ("gpt2") and .pre ("llama-bpe", "qwen2")
	Tokens         []string // one per id
	Types          []int32  // llama.cpp token types: 1 normal, 3 control, 4 user-defined
	Scores         []float32
	Merges         []string // "left right", in rank order
	BOS, EOS       int      // -1 when absent
	AddBOS, AddEOS bool
}

// addTo writes the vocabulary's tokenizer.ggml.* keys.
func (v *Vocab) addTo(gw *gguf.Writer) error {
	kvs := []keyValue{
		{gguf.KeyTokenizerModel, v.Model},
		{"tokenizer.ggml.pre", v.Pre},
		{gguf.KeyTokens, v.Tokens},
		{gguf.KeyTokenTypes, v.Types},
	}
	if v.Scores != nil {
		kvs = append(kvs, keyValue{gguf.KeyScores, v.Scores})
	}
	if v.Merges != nil {
		kvs = append(kvs, keyValue{"tokenizer.ggml.merges", v.Merges})
	}
	if v.BOS >= 0 {
		kvs = append(kvs, keyValue{gguf.KeyBOS, uint32(v.BOS)})
	}
	if v.EOS >= 0 {
		kvs = append(kvs, keyValue{gguf.KeyEOS, uint32(v.EOS)})
	}
	kvs = append(kvs, keyValue{"tokenizer.ggml.add_bos_token", v.AddBOS}, keyValue{"tokenizer.ggml.add_eos_token", v.AddEOS})
	return addAll(gw, kvs)
}

// ReadVocab reads the byte-level BPE vocabulary of a Hugging Face
// tokenizer folder (tokenizer.json and tokenizer_config.json).
//
// TEMPORARY, minimal: only what a synthetic GGUF needs (tokens, types,
// merges, BOS/EOS), for the byte-level BPE families whose pre-tokenizer it
// recognises (Llama 3: llama-bpe; Qwen 2/3: qwen2). tokenizer.ReadHFVocab
// replaces it.
func ReadVocab(dir string) (*Vocab, error) {
	var tj struct {
		Model struct {
			Type   string            `json:"type"`
			Vocab  map[string]int    `json:"vocab"`
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	}
	path := filepath.Join(dir, "tokenizer.json")
	if err := readJSON(path, &tj); err != nil {
		return nil, err
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("%s: model.type %q, want BPE", path, tj.Model.Type)
	}
	v := &Vocab{Model: "gpt2", BOS: -1, EOS: -1}
	pre := string(tj.PreTokenizer)
	switch {
	case strings.Contains(pre, `\\p{N}{1,3}`):
		v.Pre = "llama-bpe"
	case strings.Contains(pre, `[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|`):
		v.Pre = "qwen2"
	default:
		return nil, fmt.Errorf("%s: pre_tokenizer is neither Llama 3's nor Qwen 2's", path)
	}
	n := len(tj.Model.Vocab)
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	if n > 1<<22 {
		return nil, fmt.Errorf("%s: %d tokens", path, n)
	}
	v.Tokens = make([]string, n)
	v.Types = make([]int32, n)
	for tok, id := range tj.Model.Vocab {
		if id < 0 || id >= n || v.Tokens[id] != "" {
			return nil, fmt.Errorf("%s: model.vocab id %d of %q is out of range or taken twice", path, id, tok)
		}
		v.Tokens[id], v.Types[id] = tok, 1
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || (v.Tokens[a.ID] != "" && v.Tokens[a.ID] != a.Content) {
			return nil, fmt.Errorf("%s: added token %d %q clashes with %q", path, a.ID, a.Content, v.Tokens[a.ID])
		}
		v.Tokens[a.ID], v.Types[a.ID] = a.Content, 4
		if a.Special {
			v.Types[a.ID] = 3
		}
	}
	for id, tok := range v.Tokens {
		if tok == "" {
			return nil, fmt.Errorf("%s: no token has id %d", path, id)
		}
	}
	for i, m := range tj.Model.Merges {
		var s string
		var pair []string
		if json.Unmarshal(m, &s) == nil {
			v.Merges = append(v.Merges, s)
		} else if json.Unmarshal(m, &pair) == nil && len(pair) == 2 {
			v.Merges = append(v.Merges, pair[0]+" "+pair[1])
		} else {
			return nil, fmt.Errorf("%s: merge %d is neither \"a b\" nor [a, b]", path, i)
		}
	}
	return v, v.readConfig(filepath.Join(dir, "tokenizer_config.json"))
}

// readConfig takes BOS, EOS and add_bos_token from tokenizer_config.json.
func (v *Vocab) readConfig(path string) error {
	var cfg map[string]json.RawMessage
	if err := readJSON(path, &cfg); err != nil {
		return err
	}
	id := func(key string) (int, error) {
		raw, ok := cfg[key]
		if !ok || string(raw) == "null" {
			return -1, nil
		}
		var s string
		var obj struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(raw, &s) != nil {
			if err := json.Unmarshal(raw, &obj); err != nil {
				return -1, fmt.Errorf("%s: %s is neither a string nor {content}", path, key)
			}
			s = obj.Content
		}
		if i := slices.Index(v.Tokens, s); i >= 0 {
			return i, nil
		}
		return -1, fmt.Errorf("%s: %s %q is not a token", path, key, s)
	}
	var err error
	if v.BOS, err = id("bos_token"); err != nil {
		return err
	}
	if v.EOS, err = id("eos_token"); err != nil {
		return err
	}
	// Llama 3's template post-processor prepends BOS; llama.cpp's converter
	// records that as add_bos_token. Qwen's config says false.
	v.AddBOS = v.BOS >= 0
	if raw, ok := cfg["add_bos_token"]; ok {
		if err := json.Unmarshal(raw, &v.AddBOS); err != nil {
			return fmt.Errorf("%s: add_bos_token: %w", path, err)
		}
	}
	return nil
}

func readJSON(path string, dst any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
