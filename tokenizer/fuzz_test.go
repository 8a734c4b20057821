package tokenizer

import (
	"strings"
	"testing"
)

// FuzzParseHF feeds arbitrary tokenizer.json and tokenizer_config.json bytes
// to the reader: it must never panic, and whatever it accepts must encode
// and decode text to ids inside its vocabulary.
func FuzzParseHF(f *testing.F) {
	tok, cfg := tinyHF()
	good, goodCfg := mustJSON(f, tok), mustJSON(f, cfg)
	f.Add(good, goodCfg)
	f.Add(good, []byte(nil))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`), []byte(`{}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"▁":0,"a":1,"▁a":2,"<0x41>":3},"merges":[["▁","a"]],"byte_fallback":true,"unk_token":"a"},`+
		`"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},`+
		`"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]}}`), []byte(`{"add_bos_token":false}`))
	f.Fuzz(func(t *testing.T, data, cfgData []byte) {
		if len(cfgData) == 0 {
			cfgData = nil
		}
		b, err := ParseHF(data, cfgData, "fuzz/tokenizer.json")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		for _, s := range []string{"", "hello world", " the in<|end|>x", "日本\xff\n\n  ", "<think>"} {
			ids := b.Encode(s, true, true)
			for _, id := range ids {
				if id < 0 || id >= b.VocabSize() {
					t.Fatalf("Encode(%q) = %v: id outside [0, %d)", s, ids, b.VocabSize())
				}
			}
			_ = b.DecodeAll(ids)
		}
	})
}

// FuzzEncodeBPE encodes arbitrary text with literal spans using a small
// byte-level vocabulary: ids stay in range, text encoded as all-literal
// decodes back exactly, and the streaming decoder emits the same text as
// ValidText(DecodeAll).
func FuzzEncodeBPE(f *testing.F) {
	tok, cfg := tinyHF()
	b, err := ParseHF(mustJSON(f, tok), mustJSON(f, cfg), "tiny")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range corpusBase[:60] {
		f.Add(s, 0, 3)
	}
	f.Add("in the<|end|><think>\xff\xe2\x82", 2, 9)
	f.Fuzz(func(t *testing.T, s string, a, e int) {
		ids := b.EncodeWith(s, EncodeOptions{BOS: true, EOS: true, Literal: []Span{{a, e}}})
		for _, id := range ids {
			if id < 0 || id >= b.VocabSize() {
				t.Fatalf("id %d outside [0, %d)", id, b.VocabSize())
			}
		}
		lit := b.EncodeWith(s, EncodeOptions{Literal: []Span{{0, len(s)}}})
		if got := b.DecodeAll(lit); got != s {
			t.Fatalf("DecodeAll(EncodeWith(%q, all literal)) = %q", s, got)
		}
		d := NewStreamDecoder(b)
		var sb strings.Builder
		for _, id := range ids {
			sb.WriteString(d.Next(id))
		}
		sb.WriteString(d.Flush())
		if want := ValidText(b.DecodeAll(ids)); sb.String() != want {
			t.Fatalf("stream %q, whole %q", sb.String(), want)
		}
	})
}

// FuzzNewFromGGUF builds GGUF vocabularies from arbitrary tokens and merges:
// construction must never panic, and an accepted vocabulary must encode.
func FuzzNewFromGGUF(f *testing.F) {
	tok, _ := tinyHF()
	good, err := ParseHF(mustJSON(f, tok), nil, "tiny")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(strings.Join(good.text, "\x00"), "Ġ t\x00h e\x00Ġt he", "llama-bpe", true)
	f.Add("<unk>\x00<s>\x00</s>\x00▁\x00a\x00▁a", "", "", false)
	f.Fuzz(func(t *testing.T, tokens, merges, pre string, gpt2 bool) {
		v := &GGUFVocab{Model: "llama", Pre: pre, Tokens: strings.Split(tokens, "\x00"), BOS: 1, EOS: 2, UNK: 0, EOT: -1, EOM: -1, AddSpacePrefix: true}
		if gpt2 {
			v.Model, v.BOS, v.EOS, v.UNK = "gpt2", -1, -1, -1
			v.Merges = strings.Split(merges, "\x00")
		}
		tk, err := NewFromGGUF(v, "fuzz.gguf")
		if err != nil {
			return
		}
		for _, id := range tk.Encode("the in ▁a <s>\xff", false, false) {
			if id < 0 || id >= tk.VocabSize() {
				t.Fatalf("id %d outside [0, %d)", id, tk.VocabSize())
			}
		}
	})
}
