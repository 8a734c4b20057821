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
	// The real templates are extra seeds. They are found like every other
	// reference ($SEAM_TOKENIZERS or ../shared/tokenizers); when they are
	// absent the target runs on the seeds above, unless SEAM_REQUIRE_REFERENCES
	// is set, when it fails: CI must not lose them silently.
	st := &seedTB{TB: f}
	if dir := testmodels.TokenizersDir(st); !st.skipped {
		for _, fam := range []string{testmodels.Llama3, testmodels.Qwen3} {
			b, err := os.ReadFile(filepath.Join(dir, fam, ConfigFile))
			if err != nil {
				f.Fatal(err)
			}
			var cfg struct {
				ChatTemplate string `json:"chat_template"`
			}
			if err := json.Unmarshal(b, &cfg); err != nil || cfg.ChatTemplate == "" {
				f.Fatalf("%s: no chat_template (%v)", fam, err)
			}
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

// seedTB passes everything to the fuzz target's F except a skip, which it
// records: a missing optional seed source must not skip the whole target.
// testmodels' skipOrFail still fails through it when references are required.
type seedTB struct {
	testing.TB
	skipped bool
}

func (s *seedTB) Skipf(format string, args ...any) {
	s.skipped = true
	s.TB.Logf("real templates not added as seeds: "+format, args...)
}
