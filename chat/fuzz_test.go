package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seamlm/seam/internal/testmodels"
)

// FuzzTemplate loads and renders fuzzer-made templates and messages. Any
// template or conversation must give a prompt or an error: never a panic, a
// hang, or memory without bound; and a prompt's Literal spans must be in
// order and inside the text.
func FuzzTemplate(f *testing.F) {
	seeds := []string{
		chatML,
		`{{ bos_token }}{% for m in messages %}{{ m.role|upper }}: {{ m.content|trim }}{{ eos_token }}{% endfor %}`,
		`{% set ns = namespace(i=0) %}{% for m in messages %}{% set ns.i = ns.i + 1 %}{% if loop.last %}{{ ns.i }}{% endif %}{% endfor %}`,
		`{% macro f(x) %}[{{ x }}]{% endmacro %}{% for m in messages[::-1] %}{{ f(m.content.split('\n')|join(',')) }}{% endfor %}`,
		`{% for i in range(3) %}{{ messages[i % messages|length].content[1:3] }}{% endfor %}`,
		`{{ messages|tojson }}{{ messages[0]|dictsort|list }}{{ "a" in messages[0].content }}`,
	}
	for _, fam := range []string{testmodels.Llama3, testmodels.Qwen3} {
		b, err := os.ReadFile(filepath.Join(testmodels.Root(), "..", "shared", "tokenizers", fam, ConfigFile))
		if err != nil {
			continue // the real templates are extra seeds when present
		}
		var cfg struct {
			ChatTemplate string `json:"chat_template"`
		}
		if json.Unmarshal(b, &cfg) == nil {
			seeds = append(seeds, cfg.ChatTemplate)
		}
	}
	for _, s := range seeds {
		f.Add(s, "user", " Hello <|im_start|> </think>\n", true)
		f.Add(s, "assistant", "<think>r</think>\n\nanswer", false)
	}
	f.Fuzz(func(t *testing.T, src, role, content string, agp bool) {
		start := time.Now()
		defer func() {
			// Seeds take milliseconds; far past that is a hang in the making.
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("took %v", d)
			}
		}()
		tmpl, err := New(src, Config{Name: "fuzz", BOS: "<s>", EOS: "</s>", Specials: chatMLSpecials})
		if err != nil {
			return
		}
		msgs := []Message{{"system", "sys"}, {role, content}, {"assistant", content + content}}
		r, err := tmpl.Render(msgs, Options{AddGenerationPrompt: agp})
		if err != nil {
			return
		}
		if len(r.Text) > MaxOutputBytes {
			t.Fatalf("%d bytes of output", len(r.Text))
		}
		prev := 0
		for _, s := range r.Literal {
			if s.Start < prev || s.End <= s.Start || s.End > len(r.Text) {
				t.Fatalf("bad literal spans %v for %d bytes", r.Literal, len(r.Text))
			}
			prev = s.End
		}
	})
}
