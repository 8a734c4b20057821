package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/sample"
)

type perTokenJSON struct {
	Tokens    int     `json:"tokens"`
	Predicted int     `json:"predicted"`
	MeanNLL   float64 `json:"mean_nll"`
	PerToken  []struct {
		ID      int      `json:"id"`
		Argmax  int      `json:"argmax"`
		LogProb *float64 `json:"logprob"`
	} `json:"per_token"`
}

// checkPerToken runs `seam score --json --per-token` and checks every
// position against the model run one position at a time (testmodels.Logits,
// a separate code path from score's batch): the ids are the tokenizer's
// encoding (BOS first when the vocabulary adds one), argmax and log-probability
// agree, the last log-probability is null, and mean_nll is their mean.
func checkPerToken(t *testing.T, text string, args ...string) perTokenJSON {
	t.Helper()
	out, err := seam(t, append([]string{"score", "--text", text, "--json", "--per-token"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var got perTokenJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(out, `"logprob":null}]`) {
		t.Errorf("output does not end its per_token with a null logprob: %s", out[max(0, len(out)-80):])
	}
	var path, tok string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--model":
			path = args[i+1]
		case "--tokenizer":
			tok = args[i+1]
		}
	}
	m, err := loader.Open(path, loader.Options{TokenizerPath: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := m.Tokenizer.Encode(text, m.Tokenizer.AddBOS(), false)
	if len(got.PerToken) != len(ids) || got.Tokens != len(ids) || got.Predicted != len(ids)-1 {
		t.Fatalf("%d per-token entries, tokens %d, predicted %d; the text is %d tokens", len(got.PerToken), got.Tokens, got.Predicted, len(ids))
	}
	logits := testmodels.Logits(t, m.Weights, ids)
	var sum float64
	for i, p := range got.PerToken {
		if p.ID != ids[i] || p.Argmax != sample.Argmax(logits[i]) {
			t.Errorf("position %d: id %d argmax %d, want %d %d", i, p.ID, p.Argmax, ids[i], sample.Argmax(logits[i]))
		}
		if i == len(ids)-1 {
			if p.LogProb != nil {
				t.Errorf("last position: logprob %v, want null", *p.LogProb)
			}
			break
		}
		want := -generate.NLL(logits[i], ids[i+1])
		if p.LogProb == nil || math.Abs(*p.LogProb-want) > 1e-9 {
			t.Errorf("position %d: logprob %v, want %v", i, p.LogProb, want)
			continue
		}
		sum -= *p.LogProb
	}
	if n := float64(len(ids) - 1); math.Abs(got.MeanNLL-sum/n) > 1e-9 {
		t.Errorf("mean_nll %v, per-token mean %v", got.MeanNLL, sum/n)
	}
	return got
}

func TestScorePerTokenStories(t *testing.T) {
	dir := testmodels.Dir(t)
	got := checkPerToken(t, "Once upon a time, there was a little girl named Lily.",
		"--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", filepath.Join(dir, testmodels.Tok512))
	if got.PerToken[0].ID != 1 {
		t.Errorf("first id %d, want BOS 1", got.PerToken[0].ID)
	}
	if _, err := seam(t, "score", "--model", filepath.Join(dir, testmodels.Stories260KGGUF), "--text", "x", "--per-token"); err == nil ||
		!strings.Contains(err.Error(), "--per-token needs --json") {
		t.Errorf("--per-token without --json: %v", err)
	}
}

// A synthetic Qwen 3 GGUF with Qwen 3's real vocabulary, from `seam synth`:
// the vocabulary adds no BOS, so the first entry is the text's first token.
func TestSynthArchScorePerToken(t *testing.T) {
	vocab := testmodels.TokenizerDir(t, testmodels.Qwen3)
	path := filepath.Join(t.TempDir(), "qwen3.gguf")
	out, err := seam(t, "synth", "--arch", "qwen3", "--vocab", vocab, "--out", path, "--dtype", "q4_k", "--layers", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "vocab 151669") || !strings.Contains(out, "head dim 128") || !strings.Contains(out, "q/k norm") {
		t.Errorf("synth says %q", out)
	}
	text := "Hello, world! 你好"
	got := checkPerToken(t, text, "--model", path)
	if got.PerToken[0].ID != 9707 { // "Hello" in Qwen's vocabulary
		t.Errorf("first id %d, want 9707 (Hello)", got.PerToken[0].ID)
	}
	if _, err := seam(t, "synth", "--arch", "qwen4", "--out", path); err == nil || !strings.Contains(err.Error(), `"qwen4"`) {
		t.Errorf("unknown arch: %v", err)
	}
	if _, err := seam(t, "synth", "--arch", "qwen3", "--shape", "demo", "--out", path); err == nil {
		t.Error("--arch with --shape accepted")
	}
}
