package chat

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The Jinja engine (github.com/ardanlabs/jinja) has no resource limits of its
// own: a 40-byte template can recurse until the Go stack overflows or repeat
// a string until memory runs out, both fatal to the whole process. Templates
// come from model files, so before compiling one Seam checks it and rewrites
// it so that every loop, macro call, stored value and output passes through a
// budget hook (see hooks in template.go):
//
//	{% for x in E %}      ->  {% for x in __seam_iter(E) %}
//	{% set t = E %}       ->  {% set t = __seam_cap(E) %}      (ns.attr: __seam_cap(E, ns))
//	{{ E }}               ->  {{ __seam_out(E) }}
//	{% macro m(...) %}    ->  {% macro m(...) %}{% set __seam_m = __seam_enter() %}
//
// The rewrites only edit text inside tags (and add one tag right after a macro
// tag, with the same trim flag), so whitespace control is unchanged. The
// scanner below finds tags exactly the way the engine's does (quotes skip
// closers, a '-' before the closer trims), so that what Seam checks is what
// the engine runs. Constructs that could amplify or recurse without passing a
// hook are refused by name.

// Limits on a template and one rendering. Every value is a cap on a resource
// that a model file or a request controls.
const (
	MaxTemplateBytes = 256 << 10 // template source
	MaxNesting       = 64        // brackets within a tag; blocks within blocks
	MaxRefsTimesAmp  = 64        // per tag: variable references x amplification of filters
	MaxMessages      = 1 << 14
	MaxContentBytes  = 4 << 20 // all message content together
	MaxIterations    = 1 << 18 // loop iterations over one rendering (about 0.5 s of empty loop)
	MaxMacroCalls    = 1 << 12 // macro calls over one rendering
	MaxRange         = 1 << 16 // items from one range()
	MaxWorkBytes     = 256 << 20
	MaxOutputBytes   = 4*MaxContentBytes + 4<<20
	maxValueBytes    = 2*MaxContentBytes + 1<<20 // any stored value
	maxValueDepth    = 32
)

// hookPrefix starts every name Seam adds; templates may not use it.
const hookPrefix = "__seam_"

type segKind int

const (
	segText segKind = iota
	segComment
	segExpr
	segStmt
)

// segment is one piece of a template: text or a tag. For tags, start and end
// delimit the text between the delimiters and trim flags.
type segment struct {
	kind       segKind
	start, end int  // content (inside the delimiters and trim marks)
	open, shut int  // the whole tag, delimiters included
	trimRight  bool // the tag ends with -%} / -}}
	line       int
}

// scanSegments splits src into text and tags the way the engine does.
func scanSegments(src string) ([]segment, error) {
	var segs []segment
	i, textStart, line := 0, 0, 1
	for i < len(src) {
		if src[i] != '{' || i+1 >= len(src) || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			if src[i] == '\n' {
				line++
			}
			i++
			continue
		}
		kind, closer := segExpr, "}}"
		switch src[i+1] {
		case '%':
			kind, closer = segStmt, "%}"
		case '#':
			kind, closer = segComment, "#}"
		}
		if i > textStart {
			segs = append(segs, segment{kind: segText, start: textStart, end: i, open: textStart, shut: i})
		}
		s := segment{kind: kind, open: i, line: line}
		i += 2
		if i < len(src) && src[i] == '-' {
			i++
		}
		s.start = i
		found := false
		for i < len(src) {
			c := src[i]
			if kind != segComment && (c == '\'' || c == '"') {
				i++
				for i < len(src) && src[i] != c {
					if src[i] == '\\' && i+1 < len(src) {
						i++
					}
					if src[i] == '\n' {
						line++
					}
					i++
				}
				if i < len(src) {
					i++
				}
				continue
			}
			if c == '-' && i+2 < len(src) && src[i+1] == closer[0] && src[i+2] == closer[1] {
				s.end, s.trimRight, s.shut = i, true, i+3
				i += 3
				found = true
				break
			}
			if i+1 < len(src) && c == closer[0] && src[i+1] == closer[1] {
				s.end, s.shut = i, i+2
				i += 2
				found = true
				break
			}
			if c == '\n' {
				line++
			}
			i++
		}
		if !found {
			return nil, fmt.Errorf("line %d: unclosed tag", s.line)
		}
		segs = append(segs, s)
		textStart = i
	}
	if textStart < len(src) {
		segs = append(segs, segment{kind: segText, start: textStart, end: len(src), open: textStart, shut: len(src)})
	}
	return segs, nil
}

type tokKind int

const (
	tokName tokKind = iota
	tokString
	tokNumber
	tokOp
)

// token is one lexical item of an expression, with its byte range in the
// template source. For strings, val is the decoded value.
type token struct {
	kind       tokKind
	text       string // source text (names, numbers, operators)
	val        string // decoded string literal
	start, end int
}

// lexTag splits the inside of a tag into tokens.
func lexTag(src string, start, end int) ([]token, error) {
	var toks []token
	i := start
	for i < end {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'' || c == '"':
			j := i + 1
			var b strings.Builder
			for j < end && src[j] != c {
				if src[j] == '\\' && j+1 < end {
					b.WriteString(unescape(src[j+1]))
					j += 2
					continue
				}
				b.WriteByte(src[j])
				j++
			}
			if j >= end {
				return nil, fmt.Errorf("unterminated string")
			}
			toks = append(toks, token{kind: tokString, text: src[i : j+1], val: b.String(), start: i, end: j + 1})
			i = j + 1
		case c == '_' || c < utf8.RuneSelf && unicode.IsLetter(rune(c)):
			j := i
			for j < end && (src[j] == '_' || src[j] < utf8.RuneSelf && (unicode.IsLetter(rune(src[j])) || unicode.IsDigit(rune(src[j])))) {
				j++
			}
			toks = append(toks, token{kind: tokName, text: src[i:j], start: i, end: j})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < end && (src[j] >= '0' && src[j] <= '9' || src[j] == '.' || src[j] == '_' || src[j] == 'e' || src[j] == 'E') {
				j++
			}
			toks = append(toks, token{kind: tokNumber, text: src[i:j], start: i, end: j})
			i = j
		default:
			n := 1
			if i+1 < end {
				switch src[i : i+2] {
				case "**", "//", "==", "!=", "<=", ">=":
					n = 2
				}
			}
			toks = append(toks, token{kind: tokOp, text: src[i : i+n], start: i, end: i + n})
			i += n
		}
	}
	return toks, nil
}

// unescape decodes the character after a backslash in a string literal the
// way chat templates use them; unknown escapes keep the character.
func unescape(c byte) string {
	switch c {
	case 'n':
		return "\n"
	case 't':
		return "\t"
	case 'r':
		return "\r"
	case 'b':
		return "\b"
	case 'f':
		return "\f"
	case 'v':
		return "\v"
	}
	return string(c)
}

// builtinNames are the engine's global functions and the names a template
// may call without counting as a variable reference.
var builtinNames = map[string]bool{
	"namespace": true, "raise_exception": true, "range": true, "joiner": true, "dict": true,
	"cycler": true, "strftime_now": true, "loop": true, "true": true, "false": true, "none": true,
	"True": true, "False": true, "None": true, "and": true, "or": true, "not": true, "in": true,
	"is": true, "if": true, "else": true,
}

// refused names the constructs a template may not use, with the reason.
var refusedStatements = map[string]string{
	"include": "templates cannot load other templates",
	"import":  "templates cannot load other templates",
	"from":    "templates cannot load other templates",
	"extends": "templates cannot load other templates",
	"call":    "call blocks (caller recursion) are not supported",
	"raw":     "raw blocks are not supported",
}

// refusedMethods mutate containers in place, which could build a cycle or
// grow a value without passing a budget hook.
var refusedMethods = map[string]bool{"append": true, "extend": true, "insert": true, "update": true, "setdefault": true}

// guarded is a template after the checks, rewritten with budget hooks, and
// the string literals it searches content for (see literal.go).
type guarded struct {
	src     string
	needles []string
}

// guard checks src and returns it rewritten with the budget hooks.
func guard(src string) (guarded, error) {
	if len(src) > MaxTemplateBytes {
		return guarded{}, fmt.Errorf("template is %d bytes, more than the %d allowed", len(src), MaxTemplateBytes)
	}
	if !utf8.ValidString(src) {
		return guarded{}, fmt.Errorf("template is not valid UTF-8")
	}
	segs, err := scanSegments(src)
	if err != nil {
		return guarded{}, err
	}
	var out strings.Builder
	var needles []string
	depth := 0
	for _, s := range segs {
		if s.kind == segText || s.kind == segComment {
			out.WriteString(src[s.open:s.shut])
			continue
		}
		toks, err := lexTag(src, s.start, s.end)
		if err != nil {
			return guarded{}, fmt.Errorf("line %d: %w", s.line, err)
		}
		if err := checkTokens(toks); err != nil {
			return guarded{}, fmt.Errorf("line %d: %w", s.line, err)
		}
		needles = append(needles, searchLiterals(toks)...)
		edits, inject, d, err := rewriteTag(s, toks)
		if err != nil {
			return guarded{}, fmt.Errorf("line %d: %w", s.line, err)
		}
		if depth += d; depth > MaxNesting {
			return guarded{}, fmt.Errorf("line %d: blocks nested more than %d deep", s.line, MaxNesting)
		}
		pos := s.open
		for _, e := range edits {
			out.WriteString(src[pos:e.at])
			out.WriteString(e.text)
			pos = e.at
		}
		out.WriteString(src[pos:s.shut])
		out.WriteString(inject)
	}
	return guarded{src: out.String(), needles: needles}, nil
}

// checkTokens refuses operators and calls that could amplify a value or
// recurse without passing a hook, and bounds the work of one expression.
func checkTokens(toks []token) error {
	nest, refs, amp := 0, 0, 1
	for i, t := range toks {
		switch t.kind {
		case tokName:
			if strings.HasPrefix(t.text, hookPrefix) {
				return fmt.Errorf("name %q is reserved", t.text)
			}
			afterDot := i > 0 && toks[i-1].text == "."
			afterPipe := i > 0 && toks[i-1].text == "|"
			called := i+1 < len(toks) && toks[i+1].text == "("
			if afterDot && called && refusedMethods[t.text] {
				return fmt.Errorf("method %s() is not supported (it mutates a value in place)", t.text)
			}
			if t.text == "recursive" {
				return fmt.Errorf("recursive loops are not supported")
			}
			if t.text == "caller" {
				return fmt.Errorf("caller() is not supported")
			}
			if afterDot || afterPipe {
				f, err := amplification(t.text, toks[i+1:])
				if err != nil {
					return err
				}
				amp *= f
			} else if !builtinNames[t.text] && (i == 0 || toks[i-1].text != "is") {
				refs++
			}
			if afterPipe && t.text == "batch" {
				return fmt.Errorf("filter batch is not supported")
			}
		case tokOp:
			switch t.text {
			case "*", "**":
				return fmt.Errorf("operator %s is not supported (it can repeat a value without bound)", t.text)
			case "(", "[", "{":
				if nest++; nest > MaxNesting {
					return fmt.Errorf("expression nested more than %d deep", MaxNesting)
				}
			case ")", "]", "}":
				nest--
			}
		}
		if amp > MaxRefsTimesAmp || refs*amp > MaxRefsTimesAmp {
			return fmt.Errorf("expression too expensive: %d variable references times amplification %d is more than %d", refs, amp, MaxRefsTimesAmp)
		}
	}
	return nil
}

// amplification returns how many times larger than its input a filter or
// method call can make a value, refusing calls whose growth an argument
// controls without bound. rest starts after the name.
func amplification(name string, rest []token) (int, error) {
	args := callArgs(rest)
	switch name {
	case "indent", "tojson":
		for _, a := range args {
			n, ok := intLiteral(a)
			if !ok || n > 16 {
				return 0, fmt.Errorf("%s: only literal widths up to 16 are supported", name)
			}
		}
		return 18, nil
	case "join":
		w := 1
		for _, a := range args {
			if len(a) != 1 || a[0].kind != tokString || len(a[0].val) > 16 {
				return 0, fmt.Errorf("join: only a literal separator up to 16 bytes is supported")
			}
			w += len(a[0].val)
		}
		return w, nil
	case "replace":
		if len(args) < 2 || len(args[0]) != 1 || len(args[1]) != 1 || args[0][0].kind != tokString || args[1][0].kind != tokString || args[0][0].val == "" {
			return 0, fmt.Errorf("replace: only literal strings (the first not empty) are supported")
		}
		return 1 + len(args[1][0].val)/len(args[0][0].val), nil
	case "escape", "e":
		return 6, nil
	case "format":
		return 2, nil
	}
	return 1, nil
}

// callArgs returns the top-level comma-separated arguments of a call whose
// '(' is rest[0], or nil when rest does not start a call.
func callArgs(rest []token) [][]token {
	if len(rest) == 0 || rest[0].text != "(" {
		return nil
	}
	var args [][]token
	var cur []token
	depth := 0
	for _, t := range rest[1:] {
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			if depth == 0 {
				if len(cur) > 0 {
					args = append(args, cur)
				}
				return args
			}
			depth--
		case ",":
			if depth == 0 {
				args = append(args, cur)
				cur = nil
				continue
			}
		}
		cur = append(cur, t)
	}
	return args
}

// intLiteral reads an argument that is an integer literal, or name=integer.
func intLiteral(a []token) (int, bool) {
	if len(a) == 3 && a[0].kind == tokName && a[1].text == "=" {
		a = a[2:]
	}
	if len(a) != 1 || a[0].kind != tokNumber {
		return 0, false
	}
	n, err := strconv.Atoi(a[0].text)
	return n, err == nil && n >= 0
}

// searchLiterals returns the string literals a tag looks for in other
// strings: arguments of split, startswith, strip and the like, and the left
// side of `in`. literal.go keeps their occurrences in content free of
// sentinels so that such searches behave as in the real rendering.
func searchLiterals(toks []token) []string {
	var out []string
	for i, t := range toks {
		if t.kind != tokString || t.val == "" {
			continue
		}
		if i+1 < len(toks) && (toks[i+1].text == "in" || toks[i+1].text == "not" && i+2 < len(toks) && toks[i+2].text == "in") {
			out = append(out, t.val)
			continue
		}
		// Inside the argument list of a method or filter call.
		depth := 0
		for j := i - 1; j >= 1; j-- {
			switch toks[j].text {
			case ")", "]", "}":
				depth++
				continue
			case "(", "[", "{":
				if depth > 0 {
					depth--
					continue
				}
			default:
				continue
			}
			if toks[j].text == "(" && toks[j-1].kind == tokName {
				switch toks[j-1].text {
				case "split", "rsplit", "startswith", "endswith", "strip", "lstrip", "rstrip",
					"find", "rfind", "index", "rindex", "count", "replace", "partition", "rpartition":
					out = append(out, t.val)
				}
			}
			break
		}
	}
	return out
}

// edit inserts text at a byte offset of the source.
type edit struct {
	at   int
	text string
}

// rewriteTag returns the insertions that route a tag through the budget
// hooks, a tag to add after it, and the change in block depth.
func rewriteTag(s segment, toks []token) (edits []edit, inject string, depth int, err error) {
	if s.kind == segExpr {
		if len(toks) == 0 {
			return nil, "", 0, nil
		}
		return wrap(toks, hookPrefix+"out("), "", 0, nil
	}
	if len(toks) == 0 || toks[0].kind != tokName {
		return nil, "", 0, nil
	}
	kw := toks[0].text
	if why, ok := refusedStatements[kw]; ok {
		return nil, "", 0, fmt.Errorf("statement %q: %s", kw, why)
	}
	switch kw {
	case "for":
		depth = 1
		in := -1
		for i, t := range toks {
			if t.kind == tokName && t.text == "in" {
				in = i
				break
			}
		}
		if in < 0 || in+1 >= len(toks) {
			return nil, "", 0, nil // the engine reports the syntax error
		}
		iter := toks[in+1:]
		if k := topLevel(iter, "if"); k >= 0 {
			iter = iter[:k]
		}
		return wrap(iter, hookPrefix+"iter("), "", depth, nil
	case "set":
		eq := topLevel(toks, "=")
		if eq < 0 {
			return nil, "", 1, nil // a block set; its outputs pass __seam_out
		}
		if eq+1 >= len(toks) {
			return nil, "", 0, nil
		}
		target := toks[1:eq]
		if len(target) == 3 && target[1].text == "." && target[0].kind == tokName {
			// ns.attr = E: also refuse a value that contains ns itself.
			rhs := toks[eq+1:]
			return []edit{{rhs[0].start, hookPrefix + "cap("}, {rhs[len(rhs)-1].end, ", " + target[0].text + ")"}}, "", 0, nil
		}
		return wrap(toks[eq+1:], hookPrefix+"cap("), "", 0, nil
	case "macro":
		closer := "%}"
		if s.trimRight {
			closer = "-%}"
		}
		return nil, "{% set " + hookPrefix + "m = " + hookPrefix + "enter() " + closer, 1, nil
	case "if", "filter":
		return nil, "", 1, nil
	case "endfor", "endif", "endmacro", "endset", "endfilter":
		return nil, "", -1, nil
	}
	return nil, "", 0, nil
}

// wrap encloses the source range of toks in a call.
func wrap(toks []token, call string) []edit {
	return []edit{{toks[0].start, call}, {toks[len(toks)-1].end, ")"}}
}

// topLevel returns the index of the first token with text s outside
// brackets, or -1.
func topLevel(toks []token, s string) int {
	depth := 0
	for i, t := range toks {
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			depth--
		default:
			if depth == 0 && t.text == s && t.kind != tokString {
				return i
			}
		}
	}
	return -1
}
