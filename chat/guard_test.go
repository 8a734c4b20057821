package chat

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestGuardRefuses: constructs that could recurse or amplify without passing
// a budget hook are refused by name when the template is loaded.
func TestGuardRefuses(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`{{ 'a' * 100000000000 }}`, "operator *"},
		{`{{ 2 ** 64 }}`, "operator **"},
		{`{% for x in messages recursive %}{{ loop(x) }}{% endfor %}`, "recursive"},
		{`{% include 'x' %}`, `"include"`},
		{`{% import 'x' as y %}`, `"import"`},
		{`{% extends 'x' %}`, `"extends"`},
		{`{% call f() %}x{% endcall %}`, `"call"`},
		{`{% raw %}{{ x }}{% endraw %}`, `"raw"`},
		{`{% set l = [] %}{{ l.append(l) }}`, "append"},
		{`{% set d = {} %}{{ d.update({'a': d}) }}`, "update"},
		{`{{ 'a'|indent(1000000000) }}`, "indent"},
		{`{{ messages|tojson(indent=99999999) }}`, "tojson"},
		{`{{ messages|join(messages[0].content) }}`, "join"},
		{`{{ messages[0].content.replace('', messages[0].content) }}`, "replace"},
		{`{{ [1]|batch(1000000000, 'x') }}`, "batch"},
		{`{{ __seam_out }}`, "reserved"},
		{`{{ ` + strings.Repeat("(", 100) + `1` + strings.Repeat(")", 100) + ` }}`, "nested"},
		{strings.Repeat(`{% if true %}`, 100) + strings.Repeat(`{% endif %}`, 100), "nested"},
		{`{{ ` + strings.Repeat("a ~ ", 100) + `a }}`, "too expensive"},
		{`{{ x`, "unclosed"},
		{strings.Repeat(" ", MaxTemplateBytes+1), "bytes"},
	} {
		_, err := New(tc.src, Config{Name: "t"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: err = %v, want one naming %q", tc.src, err, tc.want)
		}
	}
}

// TestGuardBudgets: templates that pass the load checks but would run away
// stop with an error naming the limit.
func TestGuardBudgets(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		src     string
		content string
		want    string
	}{
		{`{% for i in range(1000000000) %}{% endfor %}`, "", "range"},
		{`{% for i in range(60000) %}{% for j in range(60000) %}{% endfor %}{% endfor %}`, "", "loop iterations"},
		{`{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}`, "", "macro calls"},
		{`{% macro f(n) %}{{ g(n) }}{% endmacro %}{% set g = f %}{{ f(1) }}`, "", "macro calls"},
		{`{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}`, "", "bytes"},
		{`{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}`, "", "bytes"},
		{`{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}`, "", "itself"},
		{`{% set a = namespace() %}{% set b = namespace(x=a) %}{% set a.y = b %}{{ a }}`, "", "itself"},
		{`{% for i in range(65536) %}{{ messages[0].content }}{% endfor %}`, big, "bytes"},
		{`{% for c in messages[0].content %}{% for d in messages[0].content %}{% endfor %}{% endfor %}`, big, "loop iterations"},
	} {
		tmpl, err := New(tc.src, Config{Name: "t"})
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		start := time.Now()
		_, err = tmpl.Render([]Message{{"user", tc.content}}, Options{})
		t.Logf("%.50s: %v", tc.src, time.Since(start)) // each measured under 0.5 s
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.70s: err = %v, want one naming %q", tc.src, err, tc.want)
		}
	}
}

// TestGuardKeepsSemantics: the rewrite keeps whitespace control and loop
// filters as the engine would run them unguarded.
func TestGuardKeepsSemantics(t *testing.T) {
	msgs := []Message{{"system", "s"}, {"user", "u1"}, {"assistant", "a"}, {"user", "u2"}}
	for _, tc := range []struct{ src, want string }{
		{"{% for m in messages if m.role == 'user' -%}\n  [{{ m.content }}]\n{%- endfor %}", "[u1][u2]"},
		{"{% macro f(x) -%}\n  <{{ x }}>\n{%- endmacro %}{{ f('a') }}{{ f('b') }}", "<a><b>"},
		{"{% macro f(x) %}\n<{{ x }}>{% endmacro %}{{ f('a') }}", "<a>"},
		{"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "4"},
		{"{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}|{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}", "012|135|321"},
		{"{{ '%}' }}{{ \"}}\" }}", "%}}}"},
	} {
		tmpl, err := New(tc.src, Config{Name: "t"})
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		r, err := tmpl.Render(msgs, Options{})
		if err != nil && !errors.Is(err, ErrAttribution) {
			t.Fatalf("%q: %v", tc.src, err)
		}
		text, _ := tmpl.execute(msgs, tmpl.variables(Options{}))
		if text != tc.want {
			t.Errorf("%q: rendered %q, want %q (%v)", tc.src, text, tc.want, r)
		}
	}
}
