package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/llama2c"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tokenizer"
)

// seam runs the command line in-process and returns stdout and the error.
func seam(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestGreedyMatchesReferenceText(t *testing.T) {
	dir := testmodels.Dir(t)
	want, err := os.ReadFile(filepath.Join(dir, testmodels.GreedyOnceUpon))
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, testmodels.Tok512)
	ctr := filepath.Join(t.TempDir(), "c")
	if _, err := seam(t, "import", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", tok, "--out", ctr); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", tok},
		{"--model", filepath.Join(dir, testmodels.Stories260KGGUF)},
		{"--model", ctr},
		{"--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", tok, "--mmap"},
		{"--model", filepath.Join(dir, testmodels.Stories260KGGUF), "--mmap"},
		{"--model", ctr, "--mmap"},
	} {
		got, err := seam(t, append(append([]string{"run"}, args...), "-n", "256", "--temperature", "0", "Once upon a time")...)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%v: output differs from %s:\n got: %q\nwant: %q", args, testmodels.GreedyOnceUpon, got, want)
		}
	}
}

// --mmap reaches the loader's options of a model that runs.
func TestMmapFlag(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"version", "--mmap"}} {
		if _, err := seam(t, args...); err != nil {
			t.Fatal(err)
		}
		want := len(args) == 2
		if got := modelOpts(loader.Options{}).Mapped; got != want {
			t.Errorf("seam %v: Mapped %v, want %v", args, got, want)
		}
	}
}

// --threads sets the kernels' worker count of a command that runs a model
// (the text does not change: every thread count gives the same bits), and a
// count out of range is refused by name.
func TestThreadsFlag(t *testing.T) {
	prev := kernels.Threads()
	t.Cleanup(func() { kernels.SetThreads(prev) })
	dir := testmodels.Dir(t)
	want, err := os.ReadFile(filepath.Join(dir, testmodels.GreedyOnceUpon))
	if err != nil {
		t.Fatal(err)
	}
	kernels.SetThreads(2)
	got, err := seam(t, "run", "--model", filepath.Join(dir, testmodels.Stories260KGGUF), "--threads", "1", "-n", "256", "--temperature", "0", "Once upon a time")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("--threads 1: output differs from %s:\n got: %q\nwant: %q", testmodels.GreedyOnceUpon, got, want)
	}
	if n := kernels.Threads(); n != 1 {
		t.Errorf("after --threads 1 the kernels use %d threads", n)
	}
	for _, args := range [][]string{
		{"run", "--model", "x.gguf", "--threads", "-1", "hi"},
		{"serve", "--model", "x.gguf", "--layers", "0:1", "--threads", "2000"},
		{"api", "--model", "x.gguf", "--threads", "-3"},
		{"score", "--model", "x.gguf", "--text", "hi", "--threads", "-1"},
		{"bench", "serve", "--model", "x.gguf", "--threads", "-1"},
		{"bench", "decode", "--model", "x.gguf", "--threads", "-1"},
	} {
		_, err := seam(t, args...)
		if err == nil || !strings.Contains(err.Error(), "--threads") {
			t.Errorf("seam %v: %v, want a refusal naming --threads", args, err)
		}
	}
}

// The Q8 export must tell the same story as the f32 model for at least its
// first 40 tokens.
func TestQ8AgreesWithF32(t *testing.T) {
	dir := testmodels.Dir(t)
	tokPath := filepath.Join(dir, testmodels.Tok512)
	want, _ := os.ReadFile(filepath.Join(dir, testmodels.GreedyOnceUpon))
	got, err := seam(t, "run", "--model", filepath.Join(dir, testmodels.Stories260KQ8), "--tokenizer", tokPath, "-n", "256", "--temperature", "0", "Once upon a time")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	tok, err := tokenizer.LoadLlama2c(tokPath, 512)
	if err != nil {
		t.Fatal(err)
	}
	agree := len(tok.Encode(string(want[:n]), false, false))
	t.Logf("q8 and f32 agree for %d bytes, about %d tokens; q8 text:\n%s", n, agree, got)
	if agree < 40 {
		t.Fatalf("q8 agrees with f32 for only %d tokens", agree)
	}
}

// score --json reports the token counts of the text and the mean NLL of the
// model's predictions, checked against a teacher-forced run of the model
// with the NLL computed here in float64.
func TestScoreJSON(t *testing.T) {
	dir := testmodels.Dir(t)
	const text = "Once upon a time, there was a little girl named Lily."
	out, err := seam(t, "score", "--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", filepath.Join(dir, testmodels.Tok512),
		"--text", text, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tokens     *int     `json:"tokens"`
		Predicted  *int     `json:"predicted"`
		MeanNLL    *float64 `json:"mean_nll"`
		Perplexity *float64 `json:"perplexity"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Tokens == nil || got.Predicted == nil || got.MeanNLL == nil || got.Perplexity == nil {
		t.Fatalf("score --json output %q: %v, or a key is missing", out, err)
	}
	tok, err := tokenizer.LoadLlama2c(filepath.Join(dir, testmodels.Tok512), 512)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(text, true, false)
	ck, err := llama2c.Open(filepath.Join(dir, testmodels.Stories260K))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := model.New(ck.Weights)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.NewState(0, ck.Weights.Config.NLayers)
	x := make([]float32, ck.Weights.Config.Dim)
	logits := make([]float32, ck.Weights.Config.VocabSize)
	var sum float64
	for pos, id := range ids[:len(ids)-1] {
		if err := m.Embed(id, x); err != nil {
			t.Fatal(err)
		}
		if err := m.Layers(s, x, pos); err != nil {
			t.Fatal(err)
		}
		if err := m.Head(x, logits); err != nil {
			t.Fatal(err)
		}
		// -log softmax(logits)[next], in float64.
		maxv := math.Inf(-1)
		for _, v := range logits {
			maxv = math.Max(maxv, float64(v))
		}
		var z float64
		for _, v := range logits {
			z += math.Exp(float64(v) - maxv)
		}
		sum += maxv + math.Log(z) - float64(logits[ids[pos+1]])
	}
	want := sum / float64(len(ids)-1)
	if *got.Tokens != len(ids) || *got.Predicted != len(ids)-1 {
		t.Errorf("tokens %d, predicted %d; the text is %d tokens with BOS", *got.Tokens, *got.Predicted, len(ids))
	}
	// The same float32 logits either way; only the float64 sums may differ
	// in their last bits.
	if math.Abs(*got.MeanNLL-want) > 1e-9*want {
		t.Errorf("mean_nll %v, teacher-forced run gives %v", *got.MeanNLL, want)
	}
	if math.Abs(*got.Perplexity-math.Exp(want)) > 1e-9*math.Exp(want) {
		t.Errorf("perplexity %v, want exp(mean_nll) = %v", *got.Perplexity, math.Exp(want))
	}
	// stories260K knows this sentence, its own greedy output: measured 0.100
	// nats per token.
	if !(want > 0.05 && want < 0.2) {
		t.Errorf("mean NLL %v of the model's own greedy text is implausible", want)
	}
}

func TestDemoRunsWithoutModels(t *testing.T) {
	out, err := seam(t, "demo", "-n", "20")
	if err != nil {
		t.Fatal(err)
	}
	// Two runs, whole and split into 3 stages; demo itself fails if they differ.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || lines[0] != lines[1] || !strings.HasPrefix(lines[0], "Once upon a time") {
		t.Fatalf("demo output %q is not the same generation twice", out)
	}
}

// patch copies the shared file named name into a temp dir with f applied.
func patch(t *testing.T, name string, f func([]byte) []byte) string {
	t.Helper()
	b, err := os.ReadFile(testmodels.Path(t, name))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every bad input ends in a one-line error that names the file and the
// problem, and never in a panic.
func TestBadInputErrors(t *testing.T) {
	dir := testmodels.Dir(t)
	tok := filepath.Join(dir, testmodels.Tok512)
	truncated := patch(t, testmodels.Stories260K, func(b []byte) []byte { return b[:len(b)/2] })
	badArch := patch(t, testmodels.Stories260KGGUF, func(b []byte) []byte {
		i := bytes.Index(b, []byte("llama"))
		copy(b[i:], "mamba")
		return b
	})
	badType := patch(t, testmodels.Stories260KGGUF, func(b []byte) []byte {
		// GGUF v1 tensor info: name, n_dims u32, dims u32 each, type u32.
		i := bytes.Index(b, []byte("token_embd.weight")) + len("token_embd.weight")
		nd := int(binary.LittleEndian.Uint32(b[i:]))
		binary.LittleEndian.PutUint32(b[i+4+4*nd:], 99)
		return b
	})
	smallTok := patch(t, testmodels.Tok512, func(b []byte) []byte { return b })
	bigTok := filepath.Join(t.TempDir(), "tok1000.bin")
	synthTok, _ := synth.Tokenizer(1000)
	if err := writeFile(bigTok, func(f *os.File) error { return synth.WriteLlama2cTokenizer(f, synthTok) }); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		args  []string
		wants []string
	}{
		{"truncated model", []string{"run", "--model", truncated, "--tokenizer", tok, "hi"}, []string{truncated, "truncated"}},
		{"vocabulary mismatch", []string{"run", "--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", bigTok, "hi"}, []string{bigTok, "512"}},
		{"model file as tokenizer", []string{"run", "--model", filepath.Join(dir, testmodels.Stories260KGGUF), "--tokenizer", filepath.Join(dir, testmodels.Stories260K), "hi"}, []string{testmodels.Stories260K}},
		{"unknown architecture", []string{"run", "--model", badArch, "hi"}, []string{badArch, "mamba"}},
		{"unknown tensor type", []string{"run", "--model", badType, "hi"}, []string{badType, "token_embd.weight", "99"}},
		{"prompt beyond context", []string{"run", "--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", smallTok, strings.Repeat("a b ", 600)}, []string{"longer than the context of 512"}},
		{"missing tokenizer", []string{"run", "--model", filepath.Join(dir, testmodels.Stories260K), "hi"}, []string{"--tokenizer"}},
		{"not a container", []string{"verify", t.TempDir()}, []string{"not a Seam container"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := seam(t, c.args...)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range c.wants {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}
