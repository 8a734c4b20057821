package api_test

import (
	"strings"
	"testing"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/scheduler"
)

// Under a KV budget, a request whose prompt and max_tokens do not fit is
// refused whole with 429 before it generates anything (never an answer cut
// short), and one that fits is served.
func TestKVBudgetAnswers429(t *testing.T) {
	m := stories(t)
	mod, err := model.New(m.Weights)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Weights.Config
	perBlock := int64(c.NLayers) * 2 * int64(model.DefaultKVBlock) * int64(c.KVDim()) * 4
	e, err := scheduler.NewLocalWith(mod, scheduler.LocalOptions{KVBudget: 4 * perBlock}) // 64 positions
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, url := serve(t, m, e)
	resp, body := httpPost(t, url+"/v1/completions", `{"model":"stories260K","prompt":"Once upon a time","max_tokens":200,"temperature":0}`)
	if resp.StatusCode != 429 || !strings.Contains(body, "kv_budget_exceeded") || !strings.Contains(body, "KV cache budget") {
		t.Fatalf("a request past the KV budget: %d %s", resp.StatusCode, body)
	}
	t.Logf("refused: %s", strings.TrimSpace(body))
	resp, body = httpPost(t, url+"/v1/completions", `{"model":"stories260K","prompt":"Once upon a time","max_tokens":20,"temperature":0}`)
	if resp.StatusCode != 200 {
		t.Fatalf("a request within the budget: %d %s", resp.StatusCode, body)
	}
	if used := e.KVPool().Used(); used != 0 {
		t.Errorf("%d bytes of KV held after the requests ended", used)
	}
}
