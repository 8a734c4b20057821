package container

import (
	"slices"
	"strings"
	"testing"

	"github.com/seamlm/seam/tokenizer"
)

// smallGGUFSpec is a byte-level vocabulary of the 256 bytes, one merge and
// one control token, as a GGUF file would store it.
func smallGGUFSpec() tokenizer.Spec {
	v := &tokenizer.GGUFVocab{Model: "gpt2", Pre: "llama-bpe", BOS: 257, EOS: 257, UNK: -1, EOT: -1, EOM: -1, AddBOS: true, ChatTemplate: "{{ bos_token }}"}
	next := rune(256)
	for b := range 256 {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE) {
			r = next
			next++
		}
		v.Tokens = append(v.Tokens, string(r))
		v.Types = append(v.Types, tokenizer.TypeNormal)
	}
	v.Tokens = append(v.Tokens, "ab", "<|begin_of_text|>")
	v.Types = append(v.Types, tokenizer.TypeNormal, tokenizer.TypeControl)
	v.Merges = []string{"a b"}
	return tokenizer.Spec{Kind: tokenizer.SpecGGUF, GGUF: v}
}

func TestTokenizerFileVersions(t *testing.T) {
	// Version 1 (no version field): llama2.c rules, "<s>" is text.
	v1 := []byte(`{"piece_encoding":"utf8","pieces":["<unk>","<s>","</s>"," ","a","<s"],"scores":[0,0,0,-1,-1,-2],"types":null,"bos":1,"eos":2}`)
	tok, err := parseTokenizer(v1, 6)
	if err != nil {
		t.Fatal(err)
	}
	if ids := tok.Encode("<s>", false, false); slices.Contains(ids, 1) {
		t.Errorf("version 1 parsed <s> as BOS: %v", ids)
	}
	// Version 2, kind gguf: llama.cpp rules, the control token is parsed;
	// the chat template survives.
	data, err := encodeTokenizerSpec(smallGGUFSpec())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), `{"version":2,"kind":"gguf","gguf":{"model":"gpt2","pre":"llama-bpe","piece_encoding":"utf8"`) {
		t.Errorf("version 2 file starts %.80s", data)
	}
	tok, err = parseTokenizer(data, 258)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("<|begin_of_text|>ab", false, false); !slices.Equal(got, []int{257, 256}) {
		t.Errorf("gguf kind: Encode = %v, want [257 256]", got)
	}
	if !tok.AddBOS() || tokenizer.ChatTemplate(tok) != "{{ bos_token }}" {
		t.Errorf("gguf kind: AddBOS %v, template %q", tok.AddBOS(), tokenizer.ChatTemplate(tok))
	}
	// Refusals, by name.
	for _, c := range []struct{ data, want string }{
		{`{"version":3,"kind":"gguf"}`, "version 3 is not one this Seam reads"},
		{`{"version":2,"kind":"sentencepiece","llama2c":{}}`, `kind "sentencepiece"`},
		{`{"version":2,"kind":"gguf"}`, "0 bodies"},
		{`{"version":2,"kind":"hf","hf":{"tokenizer":{"model":{"type":"WordPiece"}},"config":null}}`, `model.type "WordPiece"`},
		{`{"version":2,"kind":"gguf","gguf":{},"extra":1}`, `unknown field "extra"`},
	} {
		_, err := parseTokenizer([]byte(c.data), 4)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseTokenizer(%s): %v, want an error naming %q", c.data, err, c.want)
		}
	}
}
