package chat

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// Template renders conversations for one model: with its Jinja chat template,
// or with Fallback when the model has none.
type Template struct {
	name     string // where the template came from, for errors
	source   string // the Jinja source as the file carries it; "" for Fallback
	prog     *jinja.Template
	needles  []string      // literals the template searches content for, safe to leave unmarked (literal.go)
	pua      map[rune]bool // private-use characters of the source (literal.go)
	bos, eos string
	specials []string // control-token texts of the vocabulary, longest first
}

// Config describes the vocabulary a template renders for.
type Config struct {
	Name     string   // where the template came from (a file path), for errors
	BOS, EOS string   // token text for bos_token and eos_token; "" leaves them undefined
	Specials []string // the vocabulary's control-token texts (see Rendered.Literal)
}

// New compiles a Jinja chat template. An empty source gives a Template that
// renders with Fallback.
func New(source string, c Config) (*Template, error) {
	t := &Template{name: c.Name, source: source, bos: c.BOS, eos: c.EOS, specials: sortedSpecials(c.Specials)}
	if t.name == "" {
		t.name = "chat template"
	}
	if source == "" {
		return t, nil
	}
	g, err := guard(source)
	if err != nil {
		return nil, fmt.Errorf("%s: chat template refused: %w", t.name, err)
	}
	prog, err := compile(g.src)
	if err != nil {
		return nil, fmt.Errorf("%s: chat template does not parse: %w", t.name, err)
	}
	t.prog, t.needles, t.pua = prog, safeNeedles(g.needles, t.specials), privateUse(source)
	return t, nil
}

// compile parses a guarded template. The engine is not known to panic on any
// input the guard admits, but a panic there must not take the process down.
func compile(src string) (prog *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			prog, err = nil, fmt.Errorf("template engine failed: %v", r)
		}
	}()
	return jinja.Compile(src)
}

// HasTemplate reports whether the model carries its own chat template (false:
// Render uses Fallback).
func (t *Template) HasTemplate() bool { return t.source != "" }

// Source returns the Jinja source ("" for Fallback).
func (t *Template) Source() string { return t.source }

// Render renders a conversation. The result's Literal spans cover every byte
// that came from message content; see literal.go for how and for when Render
// refuses instead.
func (t *Template) Render(msgs []Message, opt Options) (Rendered, error) {
	if err := checkMessages(msgs); err != nil {
		return Rendered{}, fmt.Errorf("%s: %w", t.name, err)
	}
	if err := t.checkRoles(msgs); err != nil {
		return Rendered{}, fmt.Errorf("%s: %w", t.name, err)
	}
	if t.prog == nil {
		return Fallback(msgs, opt), nil
	}
	vars := t.variables(opt)
	text, err := t.execute(msgs, vars)
	if err != nil {
		return Rendered{}, err
	}
	return t.attribute(msgs, vars, text)
}

// variables returns the template variables besides messages.
func (t *Template) variables(opt Options) map[string]jinja.Value {
	vars := map[string]jinja.Value{"add_generation_prompt": jinja.NewBool(opt.AddGenerationPrompt)}
	bos, eos := t.bos, t.eos
	if opt.BOS != "" {
		bos = opt.BOS
	}
	if opt.EOS != "" {
		eos = opt.EOS
	}
	if bos != "" {
		vars["bos_token"] = jinja.NewString(bos)
	}
	if eos != "" {
		vars["eos_token"] = jinja.NewString(eos)
	}
	return vars
}

// execute renders msgs with the engine under a fresh budget.
func (t *Template) execute(msgs []Message, vars map[string]jinja.Value) (string, error) {
	b := &budget{}
	data := make(map[string]jinja.Value, len(vars)+8)
	for k, v := range vars {
		data[k] = v
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		d.AsDict().Set("content", jinja.NewString(m.Content))
		list[i] = d
	}
	data["messages"] = jinja.NewList(list)
	b.install(data)
	out, err := run(t.prog, data)
	if err != nil {
		return "", fmt.Errorf("%s: rendering the chat template: %w", t.name, err)
	}
	if len(out) > MaxOutputBytes {
		return "", fmt.Errorf("%s: rendered prompt is %d bytes, more than the %d allowed", t.name, len(out), MaxOutputBytes)
	}
	return out, nil
}

// run renders with the engine, turning a panic in it into an error.
func run(prog *jinja.Template, data map[string]jinja.Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("template engine failed: %v", r)
		}
	}()
	return prog.RenderValues(data)
}

// checkMessages bounds a conversation before it reaches the template.
func checkMessages(msgs []Message) error {
	if len(msgs) > MaxMessages {
		return fmt.Errorf("%d messages, more than the %d allowed", len(msgs), MaxMessages)
	}
	total := 0
	for i, m := range msgs {
		if !utf8.ValidString(m.Role) || !utf8.ValidString(m.Content) {
			return fmt.Errorf("message %d is not valid UTF-8", i)
		}
		total += len(m.Content) + len(m.Role)
		if total > MaxContentBytes {
			return fmt.Errorf("messages hold more than %d bytes", MaxContentBytes)
		}
	}
	return nil
}

// checkRoles refuses a role that spells a control token: templates write
// roles as their own text, outside Literal spans, so such a role would become
// a control token.
func (t *Template) checkRoles(msgs []Message) error {
	for i, m := range msgs {
		for _, sp := range t.specials {
			if strings.Contains(m.Role, sp) {
				return fmt.Errorf("message %d: role %q contains the control token %q", i, m.Role, sp)
			}
		}
	}
	return nil
}

// budget counts the resources one rendering uses; the hooks that guard()
// routes loops, macros, stored values and outputs through charge it.
type budget struct {
	iterations, macroCalls int
	work, output           int
}

// ErrBudget is wrapped by errors of a rendering that exceeds a resource
// limit (loop iterations, macro calls, value or output size).
var ErrBudget = errors.New("chat template exceeds a resource limit")

func (b *budget) install(data map[string]jinja.Value) {
	data[hookPrefix+"iter"] = jinja.NewCallable(hookPrefix+"iter", b.iter)
	data[hookPrefix+"cap"] = jinja.NewCallable(hookPrefix+"cap", b.cap)
	data[hookPrefix+"out"] = jinja.NewCallable(hookPrefix+"out", b.out)
	data[hookPrefix+"enter"] = jinja.NewCallable(hookPrefix+"enter", b.enter)
	data["range"] = jinja.NewCallable("range", b.rangeFn)
}

func oneArg(name string, args []jinja.Value) (jinja.Value, error) {
	if len(args) < 1 {
		return jinja.Undefined(), fmt.Errorf("%s: no argument", name)
	}
	return args[0], nil
}

// iter charges the items a for loop will visit.
func (b *budget) iter(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	v, err := oneArg("for", args)
	if err != nil {
		return v, err
	}
	n := 0
	switch {
	case v.IsList():
		n = v.AsList().Len()
	case v.IsDict():
		n = v.AsDict().Len()
	case v.IsString():
		n = utf8.RuneCountInString(v.AsString())
	}
	if b.iterations += n; b.iterations > MaxIterations {
		return jinja.Undefined(), fmt.Errorf("%w: more than %d loop iterations", ErrBudget, MaxIterations)
	}
	return v, nil
}

// cap bounds a value about to be stored by set; with a second argument (the
// namespace of `set ns.attr = ...`) it also refuses a value that contains
// that namespace, which would make a cycle.
func (b *budget) cap(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	v, err := oneArg("set", args)
	if err != nil {
		return v, err
	}
	var into *jinja.Dict
	if len(args) > 1 && args[1].IsDict() {
		into = args[1].AsDict()
	}
	n, err := measure(v, into, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if n > maxValueBytes {
		return jinja.Undefined(), fmt.Errorf("%w: a value of %d bytes, more than %d", ErrBudget, n, maxValueBytes)
	}
	if b.work += n; b.work > MaxWorkBytes {
		return jinja.Undefined(), fmt.Errorf("%w: more than %d bytes of values built", ErrBudget, MaxWorkBytes)
	}
	return v, nil
}

// out charges a value about to be written to the output.
func (b *budget) out(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	v, err := oneArg("output", args)
	if err != nil {
		return v, err
	}
	n, err := measure(v, nil, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	b.output += n
	b.work += n
	if b.output > MaxOutputBytes || b.work > MaxWorkBytes {
		return jinja.Undefined(), fmt.Errorf("%w: more than %d bytes of output", ErrBudget, MaxOutputBytes)
	}
	return v, nil
}

// enter counts a macro call.
func (b *budget) enter([]jinja.Value, map[string]jinja.Value) (jinja.Value, error) {
	if b.macroCalls++; b.macroCalls > MaxMacroCalls {
		return jinja.Undefined(), fmt.Errorf("%w: more than %d macro calls", ErrBudget, MaxMacroCalls)
	}
	return jinja.NewString(""), nil
}

// rangeFn is range() with a bound on the number of items.
func (b *budget) rangeFn(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	var p [3]int64
	for i, a := range args {
		if i > 2 || !a.IsInt() {
			return jinja.Undefined(), fmt.Errorf("range: want 1 to 3 integers")
		}
		p[i] = a.AsInt()
	}
	start, stop, step := int64(0), p[0], int64(1)
	switch len(args) {
	case 0:
		return jinja.Undefined(), fmt.Errorf("range: want 1 to 3 integers")
	case 2:
		start, stop = p[0], p[1]
	case 3:
		start, stop, step = p[0], p[1], p[2]
	}
	if step == 0 {
		return jinja.Undefined(), fmt.Errorf("range: step is zero")
	}
	n := rangeLen(start, stop, step)
	if n > MaxRange {
		return jinja.Undefined(), fmt.Errorf("%w: range of more than %d items", ErrBudget, MaxRange)
	}
	items := make([]jinja.Value, n)
	for i := range items {
		items[i] = jinja.NewInt(start + int64(i)*step)
	}
	return jinja.NewList(items), nil
}

// rangeLen is the number of items of range(start, stop, step), computed in
// uint64 so that no bound overflows; step is not zero.
func rangeLen(start, stop, step int64) uint64 {
	if step > 0 && start < stop {
		return (uint64(stop)-uint64(start)-1)/uint64(step) + 1
	}
	if step < 0 && start > stop {
		return (uint64(start)-uint64(stop)-1)/(uint64(-(step+1))+1) + 1
	}
	return 0
}

// measure returns about how many bytes v prints as, refusing values nested
// deeper than maxValueDepth (which includes cycles) and, when into is set,
// values that contain that dict.
func measure(v jinja.Value, into *jinja.Dict, depth int) (int, error) {
	if depth > maxValueDepth {
		return 0, fmt.Errorf("%w: a value nested more than %d deep", ErrBudget, maxValueDepth)
	}
	switch {
	case v.IsString():
		return len(v.AsString()), nil
	case v.IsList():
		n := 2
		for _, x := range v.AsList().Items {
			m, err := measure(x, into, depth+1)
			if err != nil {
				return 0, err
			}
			if n += m + 2; n > maxValueBytes {
				return n, nil
			}
		}
		return n, nil
	case v.IsDict():
		d := v.AsDict()
		if into != nil && d == into {
			return 0, fmt.Errorf("a namespace cannot hold itself")
		}
		n := 2
		for _, k := range d.Keys {
			x, _ := d.Get(k)
			m, err := measure(x, into, depth+1)
			if err != nil {
				return 0, err
			}
			if n += len(k) + m + 6; n > maxValueBytes {
				return n, nil
			}
		}
		return n, nil
	}
	return 24, nil
}
