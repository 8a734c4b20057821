package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/stage"
)

// seam api --stages over three `seam serve` processes (TLS, as deployed):
// /health is ready, /v1/models lists the container's name, and a greedy
// completion is seam run's continuation of the prompt, token for token,
// with the prompt counted by Seam's tokenizer.
func TestAPIStages(t *testing.T) {
	ctr := importStories(t)
	m, err := loader.Open(ctr, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ranges, err := stage.EvenRanges(m.Weights.Config.NLayers, 3)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, r := range ranges {
		addr, _ := startStage(t, ctr, r[0], r[1])
		addrs = append(addrs, addr)
	}
	url := startAPI(t, append([]string{"--model", ctr, "--stages", strings.Join(addrs, ",")}, keyFlags(t)...)...)

	get := func(path string) (int, string) {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health"); code != 200 {
		t.Fatalf("/health: %d %s", code, body)
	}
	if code, body := get("/v1/models"); code != 200 || !strings.Contains(body, `"id":"stories"`) {
		t.Fatalf("/v1/models: %d %s", code, body)
	}

	const prompt, n = "Once upon a time", 40
	p := len(m.Tokenizer.Encode(prompt, m.Tokenizer.AddBOS(), false))
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(fmt.Sprintf(`{"model":"stories","prompt":%q,"max_tokens":%d,"temperature":0}`, prompt, n)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Choices []struct {
			Text         string
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 || len(c.Choices) != 1 {
		t.Fatalf("completion: %d %+v %v", resp.StatusCode, c, err)
	}
	run, err := seam(t, "run", "--model", ctr, "-n", fmt.Sprint(p+n-1), "--temperature", "0", prompt)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(strings.TrimPrefix(run, prompt), "\n")
	if got := c.Choices[0]; got.Text != want || got.FinishReason != "length" || c.Usage.PromptTokens != p || c.Usage.CompletionTokens != n {
		t.Fatalf("through 3 seam serve stages: %q %s %+v\nseam run: %q (prompt %d tokens)", got.Text, got.FinishReason, c.Usage, want, p)
	}
}
