package chat

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
	"github.com/seamlm/seam/tokenizer"
)

// How Render finds the bytes of a prompt that came from message content
// (documented for users in docs/chat.md).
//
// The template is rendered twice: once as is (the prompt), and once with every
// message's content marked by two sentinel characters, S before and E after
// each piece of content. Removing the sentinels from the marked rendering must
// give the prompt byte for byte; the text between each S and the next E is
// then content, and becomes a Literal span. Any other outcome (the texts
// differ, an E without an S, an S inside a span, a span left open) means the
// template did something to content that the marks cannot follow, and Render
// refuses the conversation rather than guess.
//
// Templates transform content, so the marks are placed where the usual
// transformations leave them intact:
//   - whitespace at the ends of a piece stays outside the marks, so trim and
//     strip remove the same characters with or without them;
//   - occurrences of the strings the template searches for (the arguments of
//     split, startswith, strip(...) and the like, and the left side of `in`;
//     see searchLiterals) stay outside the marks too, and each run of content
//     between them is marked on its own, so that content.split('</think>')
//     splits where it would and each part keeps both of its marks.
//
// Content left outside the marks is whitespace or such a searched-for string.
// A searched-for string is only used this way when it cannot form a control
// token: it contains none, is contained in none, and no end of it overlaps an
// end of one. So no control token of the vocabulary can be spelled by content
// outside a Literal span; a tokenizer that matches control tokens only outside
// those spans never turns content into one.
//
// The sentinels are two private-use characters that occur nowhere in the
// template, the messages or the BOS and EOS text, so content cannot forge them.

// ErrAttribution is wrapped by Render's refusal when it cannot tell which
// bytes of a prompt came from message content.
var ErrAttribution = errors.New("cannot tell which parts of the prompt came from message content")

// attribute renders the marked conversation and derives the Literal spans of
// text, the prompt rendered from the same messages and variables.
func (t *Template) attribute(msgs []Message, vars map[string]jinja.Value, text string) (Rendered, error) {
	if !hasContent(msgs) {
		return Rendered{Text: text}, nil
	}
	s, e, ok := t.sentinels(msgs, vars)
	if !ok {
		return Rendered{}, fmt.Errorf("%s: %w: no free private-use characters for the marks", t.name, ErrAttribution)
	}
	needles := t.needles
	marked := make([]Message, len(msgs))
	for i, m := range msgs {
		marked[i] = Message{Role: m.Role, Content: mark(m.Content, needles, s, e)}
	}
	mtext, err := t.execute(marked, vars)
	if err != nil {
		return Rendered{}, fmt.Errorf("%w (while marking content: %w)", ErrAttribution, err)
	}
	lit, err := spans(mtext, text, s, e)
	if err != nil {
		return Rendered{}, fmt.Errorf("%s: %w: %w", t.name, ErrAttribution, err)
	}
	return Rendered{Text: text, Literal: lit}, nil
}

func hasContent(msgs []Message) bool {
	for _, m := range msgs {
		if m.Content != "" {
			return true
		}
	}
	return false
}

// sentinels picks two private-use characters absent from everything that
// reaches the output.
func (t *Template) sentinels(msgs []Message, vars map[string]jinja.Value) (s, e rune, ok bool) {
	used := map[rune]bool{}
	note := func(str string) {
		for _, r := range str {
			if r >= 0xE000 && r <= 0xF8FF {
				used[r] = true
			}
		}
	}
	for r := range t.pua {
		used[r] = true
	}
	for _, m := range msgs {
		note(m.Role)
		note(m.Content)
	}
	for _, v := range vars {
		if v.IsString() {
			note(v.AsString())
		}
	}
	var free []rune
	for r := rune(0xE000); r <= 0xF8FF && len(free) < 2; r++ {
		if !used[r] {
			free = append(free, r)
		}
	}
	if len(free) < 2 {
		return 0, 0, false
	}
	return free[0], free[1], true
}

// safeNeedles returns the searched-for strings that cannot take part in a
// control token, longest first.
func safeNeedles(needles, specials []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range needles {
		if seen[n] || n == "" {
			continue
		}
		seen[n] = true
		if !touchesSpecial(n, specials) {
			out = append(out, n)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// touchesSpecial reports whether n contains a special, is contained in one,
// or overlaps one at an end.
func touchesSpecial(n string, specials []string) bool {
	for _, sp := range specials {
		if strings.Contains(n, sp) || strings.Contains(sp, n) {
			return true
		}
		for k := 1; k < len(n) && k < len(sp); k++ {
			if n[len(n)-k:] == sp[:k] || n[:k] == sp[len(sp)-k:] {
				return true
			}
		}
	}
	return false
}

// privateUse returns the private-use characters of s.
func privateUse(s string) map[rune]bool {
	m := map[rune]bool{}
	for _, r := range s {
		if r >= 0xE000 && r <= 0xF8FF {
			m[r] = true
		}
	}
	return m
}

// isSpace covers the whitespace that Python's str.strip, JavaScript's trim
// and Go's strings.TrimSpace remove, so that the marks sit inside whatever
// any of them strips.
func isSpace(r rune) bool {
	return unicode.IsSpace(r) || r == '\ufeff' || (r >= 0x1c && r <= 0x1f)
}

// mark wraps the pieces of content between needle occurrences in s and e,
// leaving whitespace at the ends of each piece outside the marks.
func mark(content string, needles []string, s, e rune) string {
	var b strings.Builder
	b.Grow(len(content) + 16)
	piece := 0 // start of the pending piece
	flush := func(end int) {
		p := content[piece:end]
		core := strings.TrimFunc(p, isSpace)
		if core == "" {
			b.WriteString(p)
			return
		}
		lead := strings.IndexFunc(p, func(r rune) bool { return !isSpace(r) })
		b.WriteString(p[:lead])
		b.WriteRune(s)
		b.WriteString(core)
		b.WriteRune(e)
		b.WriteString(p[lead+len(core):])
	}
	for i := 0; i < len(content); {
		n := needleAt(content[i:], needles)
		if n == "" {
			_, size := utf8.DecodeRuneInString(content[i:])
			i += size
			continue
		}
		flush(i)
		b.WriteString(n)
		i += len(n)
		piece = i
	}
	flush(len(content))
	return b.String()
}

func needleAt(s string, needles []string) string {
	for _, n := range needles {
		if strings.HasPrefix(s, n) {
			return n
		}
	}
	return ""
}

// spans reads the marks in marked and returns the Literal spans of text, which
// must equal marked without its marks.
func spans(marked, text string, s, e rune) ([]tokenizer.Span, error) {
	var lit []tokenizer.Span
	pos, start := 0, -1 // pos: offset in text; start: open span or -1
	for i := 0; i < len(marked); {
		r, size := utf8.DecodeRuneInString(marked[i:])
		switch r {
		case s:
			if start >= 0 {
				return nil, fmt.Errorf("content marks nest at byte %d of the prompt", pos)
			}
			start = pos
		case e:
			if start < 0 {
				return nil, fmt.Errorf("content at byte %d of the prompt has lost its start", pos)
			}
			if pos > start {
				// Join spans separated only by whitespace: such a gap holds no
				// control token, and one span keeps the content in one piece for
				// the tokenizer.
				if n := len(lit); n > 0 && strings.TrimFunc(text[lit[n-1].End:start], isSpace) == "" {
					lit[n-1].End = pos
				} else {
					lit = append(lit, tokenizer.Span{Start: start, End: pos})
				}
			}
			start = -1
		default:
			if pos+size > len(text) || text[pos:pos+size] != marked[i:i+size] {
				return nil, fmt.Errorf("the template renders marked content differently (first difference at byte %d)", pos)
			}
			pos += size
		}
		i += size
	}
	if start >= 0 {
		return nil, fmt.Errorf("content starting at byte %d of the prompt has lost its end", start)
	}
	if pos != len(text) {
		return nil, fmt.Errorf("the template renders marked content differently (%d bytes instead of %d)", pos, len(text))
	}
	return lit, nil
}

// sortedSpecials returns the non-empty specials, longest first, without
// duplicates.
func sortedSpecials(sp []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range sp {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
