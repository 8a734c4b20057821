package tokenizer

import "fmt"

// Spec kinds.
const (
	SpecLlama2c = "llama2c" // a llama2.c tokenizer.bin's vocabulary
	SpecGGUF    = "gguf"    // a GGUF file's tokenizer.ggml.* vocabulary
	SpecHF      = "hf"      // a Hugging Face tokenizer.json (+ tokenizer_config.json)
)

// Spec is what a tokenizer was built from: enough to rebuild it exactly, for
// containers to store.
type Spec struct {
	Kind        string
	Llama2c     *Vocab     // SpecLlama2c
	GGUF        *GGUFVocab // SpecGGUF
	HFTokenizer []byte     // SpecHF: tokenizer.json
	HFConfig    []byte     // SpecHF: tokenizer_config.json, nil when absent
}

// SpecOf returns what t was built from.
func SpecOf(t Tokenizer) (Spec, error) {
	switch t := t.(type) {
	case *SentencePiece:
		if t.ggufVocab != nil {
			return Spec{Kind: SpecGGUF, GGUF: t.ggufVocab}, nil
		}
		v := t.Vocab()
		return Spec{Kind: SpecLlama2c, Llama2c: &v}, nil
	case *BPE:
		return t.src, nil
	}
	return Spec{}, fmt.Errorf("tokenizer of type %T has no spec", t)
}

// FromSpec rebuilds a tokenizer; name is used in errors.
func FromSpec(s Spec, name string) (Tokenizer, error) {
	switch {
	case s.Kind == SpecLlama2c && s.Llama2c != nil:
		t, err := New(*s.Llama2c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return t, nil
	case s.Kind == SpecGGUF && s.GGUF != nil:
		return NewFromGGUF(s.GGUF, name)
	case s.Kind == SpecHF && s.HFTokenizer != nil:
		return ParseHF(s.HFTokenizer, s.HFConfig, name)
	}
	return nil, fmt.Errorf("%s: tokenizer spec of kind %q is incomplete or unknown", name, s.Kind)
}

// ChatTemplate returns the chat template a tokenizer's files carry
// (tokenizer.chat_template in GGUF, chat_template in tokenizer_config.json),
// or "" when they carry none.
func ChatTemplate(t Tokenizer) string {
	s, err := SpecOf(t)
	if err != nil {
		return ""
	}
	switch s.Kind {
	case SpecGGUF:
		return s.GGUF.ChatTemplate
	case SpecHF:
		if b, ok := t.(*BPE); ok {
			return b.chatTemplate
		}
	}
	return ""
}
