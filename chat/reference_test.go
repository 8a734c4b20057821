package chat

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/tokenizer"
)

// conversation is one entry of testdata/conversations.json.
type conversation struct {
	Name     string    `json:"name"`
	Special  bool      `json:"special"` // content spells control tokens
	Messages []Message `json:"messages"`
}

func loadConversations(t *testing.T) []conversation {
	t.Helper()
	b, err := os.ReadFile("testdata/conversations.json")
	if err != nil {
		t.Fatal(err)
	}
	var convs []conversation
	if err := json.Unmarshal(b, &convs); err != nil {
		t.Fatal(err)
	}
	return convs
}

// refCase is one rendering request for reference/jinja.mjs.
type refCase struct {
	Messages            []Message `json:"messages"`
	AddGenerationPrompt bool      `json:"add_generation_prompt"`
	BOS                 string    `json:"bos_token,omitempty"`
	EOS                 string    `json:"eos_token,omitempty"`
}

type refResult struct {
	Text  *string `json:"text"`
	Error string  `json:"error"`
	IDs   []int   `json:"ids"`
}

// referenceRender renders cases with @huggingface/jinja (and tokenizes the
// results with @lenml/tokenizers when tokDir is set).
func referenceRender(t *testing.T, source string, cases []refCase, tokDir string) []refResult {
	t.Helper()
	in, err := json.Marshal(map[string]any{"template": source, "cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	if tokDir != "" {
		args = append(args, tokDir)
	}
	out := testmodels.RunNode(t, 2*time.Minute, in, "jinja.mjs", args...)
	var res struct{ Results []refResult }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("jinja.mjs output: %v", err)
	}
	if len(res.Results) != len(cases) {
		t.Fatalf("jinja.mjs returned %d results for %d cases", len(res.Results), len(cases))
	}
	return res.Results
}

// TestTemplateParity renders every conversation of testdata with and without
// the generation prompt, for the real llama3 and qwen3 templates, and
// requires Seam's text to equal @huggingface/jinja 0.5.11's byte for byte.
// It then tokenizes each rendering with Seam's tokenizer (control tokens
// recognised outside the Literal spans) and requires the ids of
// @lenml/tokenizers' encode(text, {add_special_tokens: false}) for every
// conversation whose content spells no control token; for the others, that
// no control token comes from content.
func TestTemplateParity(t *testing.T) {
	convs := loadConversations(t)
	for _, family := range []string{testmodels.Llama3, testmodels.Qwen3} {
		t.Run(family, func(t *testing.T) {
			t.Parallel() // most of the time is loading tokenizers, here and in node
			dir := testmodels.TokenizerDir(t, family)
			tmpl, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := tokenizer.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !tmpl.HasTemplate() {
				t.Fatalf("%s: no chat template loaded", family)
			}
			var cases []refCase
			for _, c := range convs {
				for _, agp := range []bool{true, false} {
					cases = append(cases, refCase{Messages: c.Messages, AddGenerationPrompt: agp, BOS: tmpl.bos, EOS: tmpl.eos})
				}
			}
			want := referenceRender(t, tmpl.Source(), cases, dir)
			compared := 0
			for i, c := range cases {
				name := convs[i/2].Name
				if want[i].Text == nil {
					t.Fatalf("%s (generation prompt %v): reference failed: %s", name, c.AddGenerationPrompt, want[i].Error)
				}
				got, err := tmpl.Render(c.Messages, Options{AddGenerationPrompt: c.AddGenerationPrompt})
				if err != nil {
					t.Fatalf("%s (generation prompt %v): %v", name, c.AddGenerationPrompt, err)
				}
				if got.Text != *want[i].Text {
					t.Fatalf("%s (generation prompt %v):\n got %q\nwant %q", name, c.AddGenerationPrompt, got.Text, *want[i].Text)
				}
				checkSpansValid(t, name, got)
				checkNoContentSpecials(t, name, tmpl, c.Messages, got, c.AddGenerationPrompt)

				ids := tok.EncodeWith(got.Text, tokenizer.EncodeOptions{Literal: got.Literal})
				if convs[i/2].Special {
					checkNoContentControlIDs(t, name, tok, tmpl, c, ids)
					continue
				}
				if !sameInts(ids, want[i].IDs) {
					t.Fatalf("%s (generation prompt %v): ids\n got %v\nwant %v", name, c.AddGenerationPrompt, ids, want[i].IDs)
				}
				compared++
			}
			t.Logf("%s: %d renderings identical to @huggingface/jinja, %d tokenizations identical to @lenml/tokenizers", family, len(cases), compared)
		})
	}
}

// checkSpansValid requires Literal spans to be in order, not overlapping,
// non-empty and inside the text.
func checkSpansValid(t *testing.T, name string, r Rendered) {
	t.Helper()
	prev := 0
	for _, s := range r.Literal {
		if s.Start < prev || s.End <= s.Start || s.End > len(r.Text) {
			t.Fatalf("%s: bad literal spans %v for %d bytes of text", name, r.Literal, len(r.Text))
		}
		prev = s.End
	}
}

// outsideSpecials counts the control-token texts in r.Text that lie entirely
// outside its Literal spans (what a tokenizer would turn into control tokens).
func outsideSpecials(r Rendered, specials []string) int {
	n := 0
	for i := 0; i < len(r.Text); {
		hit := ""
		for _, s := range specials {
			if strings.HasPrefix(r.Text[i:], s) {
				hit = s
				break
			}
		}
		if hit == "" {
			i++
			continue
		}
		inside := false
		for _, sp := range r.Literal {
			if i < sp.End && i+len(hit) > sp.Start {
				inside = true
			}
		}
		if !inside {
			n++
		}
		i += len(hit)
	}
	return n
}

// checkNoContentSpecials checks that content never yields a control token:
// the control tokens outside Literal spans must be exactly as many as when
// the same conversation is rendered with the control-token text deleted from
// its content (for these templates, the template's own markers do not depend
// on such text).
func checkNoContentSpecials(t *testing.T, name string, tmpl *Template, msgs []Message, got Rendered, agp bool) {
	t.Helper()
	clean := make([]Message, len(msgs))
	for i, m := range msgs {
		c := m.Content
		for _, s := range tmpl.specials {
			c = strings.ReplaceAll(c, s, "")
		}
		clean[i] = Message{Role: m.Role, Content: c}
	}
	ref, err := tmpl.Render(clean, Options{AddGenerationPrompt: agp})
	if err != nil {
		t.Fatalf("%s without control-token text: %v", name, err)
	}
	if a, b := outsideSpecials(got, tmpl.specials), outsideSpecials(ref, tmpl.specials); a != b {
		t.Fatalf("%s: %d control tokens outside literal spans, want %d (the template's own)\ntext %q\nspans %v", name, a, b, got.Text, got.Literal)
	}
}

// TestLlama3Spans checks the Literal spans of the llama3 template against
// spans computed by hand from its structure: each message's content, trimmed,
// between the header and <|eot_id|>.
func TestLlama3Spans(t *testing.T) {
	tmpl, err := Load(testmodels.TokenizerDir(t, testmodels.Llama3))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range loadConversations(t) {
		got, err := tmpl.Render(c.Messages, Options{AddGenerationPrompt: true})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		var want []tokenizer.Span
		var b strings.Builder
		b.WriteString("<|begin_of_text|>")
		for _, m := range c.Messages {
			b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n")
			content := strings.TrimFunc(m.Content, isSpace)
			if content != "" {
				want = append(want, tokenizer.Span{Start: b.Len(), End: b.Len() + len(content)})
			}
			b.WriteString(content + "<|eot_id|>")
		}
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
		if got.Text != b.String() {
			t.Fatalf("%s: text %q, want %q", c.Name, got.Text, b.String())
		}
		if !sameSpans(got.Literal, want) {
			t.Fatalf("%s: spans %v, want %v", c.Name, got.Literal, want)
		}
	}
}

func sameSpans(a, b []tokenizer.Span) bool {
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

// checkNoContentControlIDs requires as many control-token ids as the same
// conversation has with the control-token text deleted from its content.
func checkNoContentControlIDs(t *testing.T, name string, tok tokenizer.Tokenizer, tmpl *Template, c refCase, ids []int) {
	t.Helper()
	clean := make([]Message, len(c.Messages))
	for i, m := range c.Messages {
		content := m.Content
		for _, s := range tmpl.specials {
			content = strings.ReplaceAll(content, s, "")
		}
		clean[i] = Message{Role: m.Role, Content: content}
	}
	r, err := tmpl.Render(clean, Options{AddGenerationPrompt: c.AddGenerationPrompt})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := countControl(tok, tmpl, ids), countControl(tok, tmpl, tok.EncodeWith(r.Text, tokenizer.EncodeOptions{Literal: r.Literal})); got != want {
		t.Fatalf("%s: %d control tokens, want %d (the template's own)", name, got, want)
	}
}

func countControl(tok tokenizer.Tokenizer, tmpl *Template, ids []int) int {
	special := map[string]bool{}
	for _, s := range tmpl.specials {
		special[s] = true
	}
	n := 0
	for _, id := range ids {
		if special[tok.Piece(id)] {
			n++
		}
	}
	return n
}

func sameInts(a, b []int) bool {
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
