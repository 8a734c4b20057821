package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/gguf"
)

// tinyHF returns a small byte-level tokenizer.json (the 256 byte tokens, a
// few merges, two added tokens) as a map to edit, and its config.
func tinyHF() (map[string]any, map[string]any) {
	vocab := map[string]any{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	merges := []any{"Ġ t", "h e", "Ġt he", "i n"}
	for i, m := range []string{"Ġt", "he", "Ġthe", "in"} {
		vocab[m] = 256 + i
	}
	tok := map[string]any{
		"version":    "1.0",
		"truncation": nil,
		"padding":    nil,
		"added_tokens": []any{
			map[string]any{"id": 260, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			map[string]any{"id": 261, "content": "<think>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false},
		},
		"normalizer": nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regexLlama3}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": true, "vocab": vocab, "merges": merges,
		},
	}
	cfg := map[string]any{"bos_token": nil, "eos_token": "<|end|>", "chat_template": "{{ messages }}"}
	return tok, cfg
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTinyHF(t *testing.T) {
	tok, cfg := tinyHF()
	b, err := ParseHF(mustJSON(t, tok), mustJSON(t, cfg), "tiny/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	// " the" merges to Ġthe (258); "<|end|>" is the special 260; <think> 261.
	got := b.Encode("in the<|end|><think>", false, false)
	want := []int{259, 258, 260, 261}
	if !equalInts(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if b.EOS() != 260 || !b.IsEOG(260) || b.BOS() != -1 || b.AddBOS() || ChatTemplate(b) != "{{ messages }}" {
		t.Errorf("EOS %d, IsEOG(260) %v, BOS %d, AddBOS %v, template %q", b.EOS(), b.IsEOG(260), b.BOS(), b.AddBOS(), ChatTemplate(b))
	}
	if got := b.DecodeAll(got); got != "in the<think>" {
		t.Errorf("DecodeAll = %q", got)
	}
}

// TestAdditionalSpecialTokens: a token listed in tokenizer_config.json's
// additional_special_tokens is special (a control token) even when
// added_tokens marks it otherwise.
func TestAdditionalSpecialTokens(t *testing.T) {
	tok, cfg := tinyHF()
	cfg["additional_special_tokens"] = []any{"<think>"}
	b, err := ParseHF(mustJSON(t, tok), mustJSON(t, cfg), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if b.Type(261) != TypeControl || b.DecodeAll([]int{261}) != "" {
		t.Errorf("<think>: type %d, decodes to %q; want a control token decoding to nothing", b.Type(261), b.DecodeAll([]int{261}))
	}
	cfg["additional_special_tokens"] = []any{"<nope>"}
	if _, err := ParseHF(mustJSON(t, tok), mustJSON(t, cfg), "tiny"); err == nil || !strings.Contains(err.Error(), `additional_special_tokens[0] "<nope>" is not a token`) {
		t.Errorf("an unknown additional special token: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHFBadInput checks that each unsupported or inconsistent tokenizer.json
// is refused with one line naming the file and the field.
func TestHFBadInput(t *testing.T) {
	model := func(tok map[string]any) map[string]any { return tok["model"].(map[string]any) }
	cases := []struct {
		name  string
		edit  func(tok, cfg map[string]any)
		field string
	}{
		{"unknown model type", func(tok, _ map[string]any) { model(tok)["type"] = "WordPiece" }, `model.type "WordPiece"`},
		{"merge names a missing token", func(tok, _ map[string]any) {
			model(tok)["merges"] = append(model(tok)["merges"].([]any), "q zz")
		}, `model.merges[4] ("q" "zz"): "zz" is not a token of model.vocab`},
		{"merge result missing", func(tok, _ map[string]any) {
			model(tok)["merges"] = append(model(tok)["merges"].([]any), "a b")
		}, `model.merges[4] ("a" "b"): "ab" is not a token`},
		{"unknown pre-tokenizer", func(tok, _ map[string]any) { tok["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, `pre_tokenizer type "Whitespace"`},
		{"unknown split regex", func(tok, _ map[string]any) {
			tok["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\w+`}
		}, `pre_tokenizer Split regex "\\w+"`},
		{"unknown normalizer", func(tok, _ map[string]any) { tok["normalizer"] = map[string]any{"type": "NFKC"} }, `normalizer type "NFKC"`},
		{"unknown decoder", func(tok, _ map[string]any) { tok["decoder"] = map[string]any{"type": "WordPiece"} }, `decoder type "WordPiece"`},
		{"unknown post-processor", func(tok, _ map[string]any) { tok["post_processor"] = map[string]any{"type": "BertProcessing"} }, `post_processor type "BertProcessing"`},
		{"unknown model field", func(tok, _ map[string]any) { model(tok)["new_knob"] = true }, `model: json: unknown field "new_knob"`},
		{"dropout", func(tok, _ map[string]any) { model(tok)["dropout"] = 0.1 }, "model.dropout 0.1"},
		{"truncation", func(tok, _ map[string]any) { tok["truncation"] = map[string]any{"max_length": 8} }, "truncation is set"},
		{"single_word", func(tok, _ map[string]any) {
			tok["added_tokens"].([]any)[0].(map[string]any)["single_word"] = true
		}, `added_tokens[0] ("<|end|>"): single_word`},
		{"added id clash", func(tok, _ map[string]any) {
			tok["added_tokens"].([]any)[0].(map[string]any)["id"] = 258
		}, `added_tokens[0]: id 258 is "<|end|>", but model.vocab gives it to "Ġthe"`},
		{"eos not a token", func(_, cfg map[string]any) { cfg["eos_token"] = "<eos>" }, `tokenizer_config.json: eos_token "<eos>" is not a token`},
		{"add_bos without bos", func(_, cfg map[string]any) { cfg["add_bos_token"] = true }, "tokenizer_config.json: add_bos_token is true but there is no bos_token"},
		{"split_special_tokens", func(_, cfg map[string]any) { cfg["split_special_tokens"] = true }, "split_special_tokens = true"},
	}
	for _, c := range cases {
		tok, cfg := tinyHF()
		c.edit(tok, cfg)
		_, err := ParseHF(mustJSON(t, tok), mustJSON(t, cfg), "dir/tokenizer.json")
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.field) || !strings.Contains(msg, "dir/") || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q should be one line naming the file and %q", c.name, msg, c.field)
		}
	}
}

// writeRawGGUF writes a GGUF with the given tokenizer keys (and a llama
// architecture header) for error tests.
func writeRawGGUF(t *testing.T, kvs [][2]any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := gguf.NewWriter(f, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if err := w.Add(kv[0].(string), kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGGUFBadInput checks GGUF vocabularies that are refused, each with one
// line naming the file and the key.
func TestGGUFBadInput(t *testing.T) {
	tok, _ := tinyHF()
	good, err := ParseHF(mustJSON(t, tok), nil, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	tokens := good.text
	merges := []string{"Ġ t", "h e", "Ġt he", "i n"}
	base := func() map[string]any {
		return map[string]any{
			KeyModel: "gpt2", KeyPre: "llama-bpe", KeyTokens: tokens, KeyMerges: merges,
			KeyTokenTypes: make([]int32, len(tokens)), KeyAddBOS: false,
		}
	}
	cases := []struct {
		name string
		edit func(m map[string]any)
		key  string
	}{
		{"unknown pre", func(m map[string]any) { m[KeyPre] = "gpt-4o" }, `tokenizer.ggml.pre: "gpt-4o" is not supported`},
		{"missing pre", func(m map[string]any) { delete(m, KeyPre) }, "tokenizer.ggml.pre: missing"},
		{"unknown model", func(m map[string]any) { m[KeyModel] = "bert" }, `tokenizer.ggml.model: "bert" is not supported`},
		{"type count", func(m map[string]any) { m[KeyTokenTypes] = make([]int32, len(tokens)-1) }, "tokenizer.ggml.token_type: 261 entries, but tokenizer.ggml.tokens has 262"},
		{"score count", func(m map[string]any) { m[KeyScores] = make([]float32, 3) }, "tokenizer.ggml.scores: 3 entries, but tokenizer.ggml.tokens has 262"},
		{"bad type", func(m map[string]any) {
			ty := make([]int32, len(tokens))
			ty[5] = 9
			m[KeyTokenTypes] = ty
		}, "tokenizer.ggml.token_type: entry 5"},
		{"eos out of range", func(m map[string]any) { m[KeyEOS] = uint32(1000) }, "tokenizer.ggml.eos_token_id: 1000 is outside"},
		{"merge names a missing token", func(m map[string]any) { m[KeyMerges] = append(append([]string{}, merges...), "q zz") }, `tokenizer.ggml.merges[4] ("q" "zz")`},
		{"missing merges", func(m map[string]any) { delete(m, KeyMerges) }, "tokenizer.ggml.merges: missing"},
		{"unknown key", func(m map[string]any) { m["tokenizer.ggml.new_knob"] = true }, "tokenizer.ggml.new_knob: key not understood"},
		{"space prefix on gpt2", func(m map[string]any) { m[KeyAddSpacePrefix] = true }, "tokenizer.ggml.add_space_prefix: true is not supported"},
		{"extra whitespace removal", func(m map[string]any) { m["tokenizer.ggml.remove_extra_whitespaces"] = true }, "tokenizer.ggml.remove_extra_whitespaces: only false"},
		{"add_bos without bos", func(m map[string]any) { delete(m, KeyAddBOS) }, "tokenizer.ggml.add_bos_token: true, but the file has no tokenizer.ggml.bos_token_id"},
	}
	for _, c := range cases {
		m := base()
		c.edit(m)
		var kvs [][2]any
		for k, v := range m {
			kvs = append(kvs, [2]any{k, v})
		}
		path := writeRawGGUF(t, kvs)
		_, err := LoadGGUF(path)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.key) || !strings.Contains(msg, path) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q should be one line naming %s and %q", c.name, msg, path, c.key)
		}
	}
	// The base vocabulary itself loads.
	var kvs [][2]any
	for k, v := range base() {
		kvs = append(kvs, [2]any{k, v})
	}
	if _, err := LoadGGUF(writeRawGGUF(t, kvs)); err != nil {
		t.Errorf("base vocabulary refused: %v", err)
	}
}
