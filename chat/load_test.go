package chat

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/gguf"
)

const tinyTemplate = `{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeGGUF(t *testing.T, kv map[string]any) string {
	t.Helper()
	var b bytes.Buffer
	w, err := gguf.NewWriter(&b, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{KeyChatTemplate, keyTokens, keyTokenTypes, keyBOS, keyEOS} {
		if v, ok := kv[k]; ok {
			if err := w.Add(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadGGUF(t *testing.T) {
	p := writeGGUF(t, map[string]any{
		KeyChatTemplate: tinyTemplate,
		keyTokens:       []string{"<s>", "</s>", "<|im_start|>", "<|im_end|>", "a"},
		keyTokenTypes:   []int32{3, 3, 3, 3, 1},
		keyBOS:          uint32(0),
		keyEOS:          uint32(1),
	})
	tmpl, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tmpl.Render([]Message{{"user", "<|im_end|>"}}, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<s><|im_start|>user\n<|im_end|><|im_end|>\n<|im_start|>assistant\n"
	if r.Text != want || len(r.Literal) != 1 || r.Text[r.Literal[0].Start:r.Literal[0].End] != "<|im_end|>" {
		t.Fatalf("got %q %v, want %q with the content literal", r.Text, r.Literal, want)
	}
	if !strings.Contains(strings.Join(tmpl.specials, " "), "<|im_start|>") || tmpl.eos != "</s>" {
		t.Fatalf("specials %q, eos %q", tmpl.specials, tmpl.eos)
	}

	// No template: the fallback.
	tmpl, err = Load(writeGGUF(t, map[string]any{keyTokens: []string{"a"}}))
	if err != nil || tmpl.HasTemplate() {
		t.Fatalf("template-less GGUF: %v, HasTemplate %v", err, tmpl != nil && tmpl.HasTemplate())
	}
	// A BOS id outside the vocabulary is refused by name.
	_, err = Load(writeGGUF(t, map[string]any{keyTokens: []string{"a"}, keyBOS: uint32(7)}))
	if err == nil || !strings.Contains(err.Error(), keyBOS) {
		t.Fatalf("bad BOS id: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	quoted := strings.ReplaceAll(strings.ReplaceAll(tinyTemplate, "\n", `\n`), `"`, `\"`)
	cases := []struct {
		name, body, wantErr, wantBOS string
	}{
		{"string", `{"chat_template": "` + quoted + `", "bos_token": "<s>"}`, "", "<s>"},
		{"added token", `{"chat_template": "` + quoted + `", "bos_token": {"__type": "AddedToken", "content": "<B>", "special": true}}`, "", "<B>"},
		{"named list", `{"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "` + quoted + `"}], "bos_token": null}`, "", ""},
		{"no default", `{"chat_template": [{"name": "tool_use", "template": "x"}, {"name": "rag", "template": "y"}]}`, `no template is named "default"`, ""},
		{"two defaults", `{"chat_template": [{"name": "default", "template": "x"}, {"name": "default", "template": "y"}]}`, `two templates are named "default"`, ""},
		{"bad bos", `{"chat_template": "x", "bos_token": 3}`, "bos_token", ""},
		{"bad template", `{"chat_template": 3}`, "chat_template", ""},
		{"not json", `GGUX`, "not a GGUF file nor a tokenizer_config.json", ""},
		{"refused template", `{"chat_template": "{{ 'a' * 3 }}"}`, "operator *", ""},
	}
	for _, c := range cases {
		p := writeFile(t, dir, "tokenizer_config.json", c.body)
		tmpl, err := Load(p)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: err = %v, want one naming %s and %q", c.name, err, p, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r, err := tmpl.Render([]Message{{"user", "hi"}}, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if want := c.wantBOS + "<|im_start|>user\nhi<|im_end|>\n"; r.Text != want {
			t.Errorf("%s: %q, want %q", c.name, r.Text, want)
		}
	}
}

// TestLoadDir: a folder's chat_template.jinja takes precedence over the
// config's chat_template; tokenizer.json's special added tokens count as
// control tokens; a tokenizer.json path reads the config beside it.
func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, ConfigFile, `{"chat_template": "config", "eos_token": "</s>"}`)
	writeFile(t, dir, TokenizerFile, `{"added_tokens": [{"id": 5, "content": "<|x|>", "special": true}, {"id": 6, "content": "<y>", "special": false}]}`)
	for _, p := range []string{dir, filepath.Join(dir, TokenizerFile)} {
		tmpl, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.Source() != "config" || len(tmpl.specials) != 1 || tmpl.specials[0] != "<|x|>" {
			t.Fatalf("%s: source %q specials %q", p, tmpl.Source(), tmpl.specials)
		}
	}
	writeFile(t, dir, TemplateFile, "{{ eos_token }}")
	tmpl, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tmpl.Render(nil, Options{})
	if err != nil || r.Text != "</s>" {
		t.Fatalf("jinja file: %q, %v", r.Text, err)
	}
	// Options override the file's tokens.
	if r, _ := tmpl.Render(nil, Options{EOS: "<E>"}); r.Text != "<E>" {
		t.Fatalf("EOS override: %q", r.Text)
	}
	// An empty folder: the fallback.
	tmpl, err = Load(t.TempDir())
	if err != nil || tmpl.HasTemplate() {
		t.Fatalf("empty folder: %v", err)
	}
}

func TestParseMessages(t *testing.T) {
	for _, c := range []struct{ in, wantErr string }{
		{`[{"role": "user", "content": "hi"}]`, ""},
		{`{"messages": [{"role": "user", "content": null}]}`, ""},
		{`{"messages": [], "tools": []}`, `"tools"`},
		{`[{"role": "user", "content": "x", "tool_calls": []}]`, `"tool_calls"`},
		{`[{"role": "user", "content": [{"type": "text", "text": "x"}]}]`, "content parts"},
		{`[{"content": "x"}]`, `"role"`},
		{`{"a": 1`, "messages"},
	} {
		_, err := ParseMessages([]byte(c.in))
		if (c.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.wantErr)
		}
	}
}
