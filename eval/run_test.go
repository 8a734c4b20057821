package eval_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/synth"
)

// The evaluation 'seam eval' runs, reached from a package test: f32 is
// exact, the lossy encodings are not, fitted budgets are added by name, and
// contradictory settings are refused.
func TestEvaluationRun(t *testing.T) {
	m := eval.SmallTestModel(t, 300)
	tok, err := synth.Tokenizer(m.Config().VocabSize)
	if err != nil {
		t.Fatal(err)
	}
	lm := &loader.Model{Path: "(synthetic)", Format: loader.FormatLlama2c, Weights: m.W, Tokenizer: tok}
	e := &eval.Evaluation{Model: lm, Forward: m, Boundary: 1, Wires: []string{"f32", "q4"}, Budgets: []int{8}, Truncation: true,
		CalibTokens: 256, CalibSeed: 1, Data: eval.Data{SampleTokens: 128, Seed: 2, Temperature: 1}}
	rep, desc, err := e.Run()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Results {
		names = append(names, r.Wire)
	}
	if strings.Join(names, ",") != "f32,q4,lowrank@8,rank@8" || rep.Results[0].KL != 0 || !(rep.Results[1].KL > 0) || rep.Positions != 128 {
		t.Fatalf("%v: %+v", names, rep)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table, desc); err != nil || !strings.Contains(table.String(), "lowrank@8") {
		t.Errorf("table: %q, %v", table.String(), err)
	}
	for _, c := range []struct {
		edit func(*eval.Evaluation)
		want string
	}{
		{func(e *eval.Evaluation) { e.Boundary = 0 }, "--boundary 0"},
		{func(e *eval.Evaluation) { e.CalibSeed = 2 }, "equals --seed"},
		{func(e *eval.Evaluation) { e.Wires = []string{"q8", "q8"} }, "lists q8 twice"},
		{func(e *eval.Evaluation) { e.Wires = []string{"q3"} }, `unknown encoding "q3"`},
		{func(e *eval.Evaluation) { e.Wires = []string{"lowrank"} }, "codecs are attached to containers"},
		{func(e *eval.Evaluation) { e.Budgets = nil }, "--truncation needs --budgets"},
	} {
		bad := *e
		c.edit(&bad)
		if _, _, err := bad.Run(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}
