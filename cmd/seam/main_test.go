package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
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

func TestScoreJSON(t *testing.T) {
	dir := testmodels.Dir(t)
	out, err := seam(t, "score", "--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", filepath.Join(dir, testmodels.Tok512),
		"--text", "Once upon a time, there was a little girl named Lily.", "--json")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"tokens":`, `"predicted":`, `"mean_nll":`, `"perplexity":`} {
		if !strings.Contains(out, key) {
			t.Errorf("score --json output %q lacks %s", out, key)
		}
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
