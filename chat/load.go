package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/seamlm/seam/gguf"
)

// Files and metadata keys Load reads.
const (
	ConfigFile       = "tokenizer_config.json"
	TokenizerFile    = "tokenizer.json"
	TemplateFile     = "chat_template.jinja" // newer Hugging Face repositories keep the template here
	KeyChatTemplate  = "tokenizer.chat_template"
	keyTokens        = "tokenizer.ggml.tokens"
	keyTokenTypes    = "tokenizer.ggml.token_type"
	keyBOS           = "tokenizer.ggml.bos_token_id"
	keyEOS           = "tokenizer.ggml.eos_token_id"
	ggufControlToken = 3

	maxConfigBytes = 64 << 20
)

// Load reads the chat template of a model: from a GGUF file
// (tokenizer.chat_template), a tokenizer_config.json (chat_template), a
// tokenizer.json (the tokenizer_config.json beside it), or a folder holding
// those (and chat_template.jinja, which takes precedence as in Hugging Face
// transformers). A model without a template gets a Template that renders with
// Fallback; HasTemplate tells which.
func Load(path string) (*Template, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	if st.IsDir() {
		return loadDir(path)
	}
	head, err := readHead(path, 4)
	if err != nil {
		return nil, err
	}
	if string(head) == "GGUF" {
		return loadGGUF(path)
	}
	if filepath.Base(path) == TokenizerFile {
		return loadDir(filepath.Dir(path))
	}
	c, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	return c.template(path, "")
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("chat: %s: %w", path, err)
	}
	return b[:k], nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("chat: %s: %w", path, err)
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("chat: %s is larger than %d bytes", path, maxConfigBytes)
	}
	return b, nil
}

func loadDir(dir string) (*Template, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	var c config
	if _, err := os.Stat(cfgPath); err == nil {
		if c, err = readConfig(cfgPath); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("chat: %w", err)
	} else {
		cfgPath = dir
	}
	if err := c.addTokenizerSpecials(filepath.Join(dir, TokenizerFile)); err != nil {
		return nil, err
	}
	jinjaPath := filepath.Join(dir, TemplateFile)
	src, err := readBounded(jinjaPath)
	if err == nil {
		return c.template(jinjaPath, string(src))
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return c.template(cfgPath, "")
}

// config is what Load reads from a tokenizer_config.json.
type config struct {
	source   string
	bos, eos string
	specials []string
}

// template compiles the config's template (or override, when not empty).
func (c config) template(name, override string) (*Template, error) {
	src := c.source
	if override != "" {
		src = override
	}
	t, err := New(src, Config{Name: name, BOS: c.bos, EOS: c.eos, Specials: c.specials})
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return t, nil
}

// readConfig reads a tokenizer_config.json.
func readConfig(path string) (config, error) {
	b, err := readBounded(path)
	if err != nil {
		return config{}, err
	}
	var raw struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		Added        map[string]struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens_decoder"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return config{}, fmt.Errorf("chat: %s: not a GGUF file nor a tokenizer_config.json: %w", path, err)
	}
	var c config
	if c.source, err = chatTemplate(raw.ChatTemplate); err != nil {
		return config{}, fmt.Errorf("chat: %s: chat_template: %w", path, err)
	}
	if c.bos, err = tokenText(raw.BOS); err != nil {
		return config{}, fmt.Errorf("chat: %s: bos_token: %w", path, err)
	}
	if c.eos, err = tokenText(raw.EOS); err != nil {
		return config{}, fmt.Errorf("chat: %s: eos_token: %w", path, err)
	}
	for _, a := range raw.Added {
		if a.Special {
			c.specials = append(c.specials, a.Content)
		}
	}
	return c, nil
}

// chatTemplate reads chat_template: absent or null, a string, or a list of
// {"name": ..., "template": ...} from which the one named "default" is used.
func chatTemplate(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("want a string or a list of named templates: %w", err)
	}
	var names []string
	found := -1
	for i, n := range named {
		if n.Name == nil || n.Template == nil {
			return "", fmt.Errorf("entry %d lacks a name or a template", i)
		}
		names = append(names, *n.Name)
		if *n.Name == "default" {
			if found >= 0 {
				return "", fmt.Errorf(`two templates are named "default"`)
			}
			found = i
		}
	}
	if found < 0 {
		return "", fmt.Errorf(`no template is named "default" (the file has %q); Seam does not guess which to use`, names)
	}
	return *named[found].Template, nil
}

// tokenText reads bos_token or eos_token: absent, null, a string, or an
// AddedToken object with a "content" string.
func tokenText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("want a string or an object with a \"content\" string, got %.80s", raw)
	}
	return *obj.Content, nil
}

// addTokenizerSpecials adds the special added tokens of a tokenizer.json, if
// the file exists.
func (c *config) addTokenizerSpecials(path string) error {
	b, err := readBounded(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var tj struct {
		Added []struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(b, &tj); err != nil {
		return fmt.Errorf("chat: %s: %w", path, err)
	}
	for _, a := range tj.Added {
		if a.Special {
			c.specials = append(c.specials, a.Content)
		}
	}
	return nil
}

// loadGGUF reads tokenizer.chat_template and the control tokens of a GGUF.
func loadGGUF(path string) (*Template, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	defer f.Close()
	var c config
	if f.Has(KeyChatTemplate) {
		if c.source, err = f.String(KeyChatTemplate); err != nil {
			return nil, fmt.Errorf("chat: %w", err)
		}
	}
	if f.Has(keyTokens) {
		tokens, err := f.Strings(keyTokens)
		if err != nil {
			return nil, fmt.Errorf("chat: %w", err)
		}
		if c.bos, err = ggufToken(f, keyBOS, tokens); err != nil {
			return nil, err
		}
		if c.eos, err = ggufToken(f, keyEOS, tokens); err != nil {
			return nil, err
		}
		if f.Has(keyTokenTypes) {
			types, err := f.Int32s(keyTokenTypes)
			if err != nil {
				return nil, fmt.Errorf("chat: %w", err)
			}
			if len(types) != len(tokens) {
				return nil, fmt.Errorf("chat: gguf %s: %s has %d entries, %s has %d", path, keyTokenTypes, len(types), keyTokens, len(tokens))
			}
			for i, ty := range types {
				if ty == ggufControlToken {
					c.specials = append(c.specials, tokens[i])
				}
			}
		}
	}
	return c.template(path, "")
}

// ggufToken returns the text of the token a metadata key names, or "" when
// the key is absent.
func ggufToken(f *gguf.File, key string, tokens []string) (string, error) {
	if !f.Has(key) {
		return "", nil
	}
	id, err := f.Uint(key)
	if err != nil {
		return "", fmt.Errorf("chat: %w", err)
	}
	if id >= uint64(len(tokens)) {
		return "", fmt.Errorf("chat: gguf %s: %s is %d, outside the %d-token vocabulary", f.Name(), key, id, len(tokens))
	}
	return tokens[id], nil
}
