package main

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
)

// seamAll runs the command line in-process and returns stdout, stderr and
// the error.
func seamAll(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func stories(t *testing.T) []string {
	dir := testmodels.Dir(t)
	return []string{"--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", filepath.Join(dir, testmodels.Tok512)}
}

// Every flag value that cannot be honoured is refused, saying why, before
// anything is printed.
func TestRunRefusals(t *testing.T) {
	m := stories(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "1", "Once upon a time"}, "-n/--steps 1: the prompt alone is 5 tokens (BOS included, when the vocabulary adds one) and steps count its positions, so 1 steps generate nothing: give at least 5"},
		{[]string{"-n", "0", "hi"}, "-n/--steps 0: want at least 1"},
		{[]string{"-n", "600", "hi"}, "-n/--steps 600: the model's context length is 512 positions, prompt included: give at most -n 512"},
		{[]string{"--split", "2", "-n", "513", "hi"}, "-n/--steps 513: the model's context length is 512 positions"},
		{[]string{"--split", "-2", "hi"}, "--split -2: want the number of in-process stages, 1 or more"},
		{[]string{"--split", "0", "hi"}, "--split 0: want the number of in-process stages"},
		{[]string{"--wire", "q8", "hi"}, "--wire applies between pipeline stages: add --stages or --split"},
		{[]string{"--link-mbps", "100", "hi"}, "--link-mbps applies between pipeline stages"},
		{[]string{"--stages", "127.0.0.1:1,127.0.0.1:2,", "hi"}, `--stages "127.0.0.1:1,127.0.0.1:2,": stage 3, replica 1 has no address (a stray ',' or '|'?)`},
		{[]string{"--stages", "localhost", "hi"}, `stage 1, replica 1 address "localhost": want host:port`},
		{[]string{"--split", "2", "--wire", "q3", "hi"}, `--wire "q3": want one of`},
	} {
		out, _, err := seamAll(t, append(append([]string{"run"}, m...), c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
		if out != "" {
			t.Errorf("%v: printed %q before refusing", c.args, out)
		}
	}
}

// Short runs report their speeds too; an unquoted prompt is the quoted one.
func TestRunSpeedsAndUnquotedPrompt(t *testing.T) {
	m := stories(t)
	out, stderr, err := seamAll(t, append(append([]string{"run"}, m...), "-n", "5", "--temperature", "0", "Once upon a time")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "prefill: 5 tokens in") || !strings.Contains(stderr, "tok/s") || !strings.Contains(stderr, "decode: no steps") || !strings.Contains(stderr, "1 generated") {
		t.Errorf("-n equal to the prompt: stdout %q, stderr %q", out, stderr)
	}
	quoted, stderr, err := seamAll(t, append(append([]string{"run"}, m...), "-n", "40", "--temperature", "0", "Once upon a time")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "decode: 35 tokens in") {
		t.Errorf("speeds: %q", stderr)
	}
	unquoted, _, err := seamAll(t, append(append([]string{"run"}, m...), "-n", "40", "--temperature", "0", "Once", "upon", "a", "time")...)
	if err != nil || unquoted != quoted {
		t.Errorf("unquoted prompt: %q, %v; quoted: %q", unquoted, err, quoted)
	}
}

// Left out, -n (256) stops at a shorter context; given beyond it, it is
// refused, in run and demo alike.
func TestStepsAndContext(t *testing.T) {
	src := filepath.Join(t.TempDir(), "ctx64.gguf")
	mustSeam(t, "bench", "make-gguf", "--out", src, "--dim", "64", "--hidden", "128", "--heads", "4", "--kv-heads", "4",
		"--vocab", "300", "--seq-len", "64", "--layers", "2", "--matrices", "f32", "--embedding", "f32")
	// Random weights may end the text early; a run of the default length
	// would end by "length", beyond the context.
	_, stderr, err := seamAll(t, "run", "--model", src, "--temperature", "0", "hi")
	if err != nil || !(strings.Contains(stderr, "stop: context") || strings.Contains(stderr, "stop: eos") || strings.Contains(stderr, "stop: bos")) {
		t.Fatalf("default -n on a context of 64: %v, %q", err, stderr)
	}
	for _, c := range []struct {
		n    string
		args []string
	}{
		{"65", []string{"run", "--model", src, "hi"}},
		{"100", []string{"demo", "--model", src, "--split", "0"}},
	} {
		out, _, err := seamAll(t, append(c.args, "-n", c.n)...)
		want := "-n/--steps " + c.n + ": the model's context length is 64 positions, prompt included: give at most -n 64"
		if err == nil || err.Error() != want || out != "" {
			t.Errorf("%v -n %s: %v, printed %q; want %q", c.args, c.n, err, out, want)
		}
	}
	if _, _, err := seamAll(t, "run", "--model", src, "-n", "64", "--temperature", "0", "hi"); err != nil {
		t.Errorf("-n equal to the context: %v", err)
	}
}

// Help, version and mistyped commands.
func TestHelpVersionSuggestions(t *testing.T) {
	out, _, _ := seamAll(t, "run", "--help")
	if !strings.Contains(out, "lowrank") {
		t.Error("run --help does not mention lowrank")
	}
	out, _, _ = seamAll(t, "capture", "--help")
	if strings.Contains(out, ".go") {
		t.Errorf("capture --help points at a source file: %s", out)
	}
	out, _, err := seamAll(t, "version")
	if err != nil || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, "kernels: ") || !strings.HasPrefix(out, "seam ") || !strings.Contains(out, "commit: ") {
		t.Errorf("version: %q, %v", out, err)
	}
	t.Logf("seam version:\n%s", out)
	for typo, want := range map[string]string{"rn": "run", "serv": "serve", "pul": "pull", "verfy": "verify"} {
		_, _, err := seamAll(t, typo)
		if err == nil || !strings.Contains(err.Error(), "Did you mean this?") || !strings.Contains(err.Error(), want) {
			t.Errorf("seam %s: %v", typo, err)
		}
	}
	for _, args := range [][]string{{"bench", "splt"}, {"codec", "ad"}} {
		if _, _, err := seamAll(t, args...); err == nil || !strings.Contains(err.Error(), "Did you mean this?") {
			t.Errorf("seam %v: %v", args, err)
		}
	}
}

// A file of the wrong kind for a flag is named as what it is.
func TestWrongKindOfFile(t *testing.T) {
	dir := testmodels.Dir(t)
	safetensors := filepath.Join(t.TempDir(), "model.safetensors")
	st := binary.LittleEndian.AppendUint64(nil, 2)
	os.WriteFile(safetensors, append(st, '{', '}'), 0o644)
	random := filepath.Join(t.TempDir(), "random.bin")
	b := make([]byte, 1<<14)
	for i := range b {
		b[i] = byte(i*7919 + i>>3)
	}
	os.WriteFile(random, b, 0o644)
	gg := filepath.Join(dir, testmodels.Stories260KGGUF)
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"--model", safetensors}, []string{"is a safetensors file", "Seam reads GGUF files, llama2.c checkpoints", "convert_hf_to_gguf.py"}},
		{[]string{"--model", random}, []string{"in no format Seam recognises", "Seam reads GGUF files"}},
		{[]string{"--model", filepath.Join(dir, testmodels.Tok512)}, []string{"is a llama2.c tokenizer", "give it as --tokenizer"}},
		{[]string{"--model", gg, "--tokenizer", filepath.Join(dir, testmodels.Stories260K)}, []string{"is a model (llama2c), given as --tokenizer: give it as --model"}},
	} {
		_, _, err := seamAll(t, append(append([]string{"run"}, c.args...), "hi")...)
		for _, w := range c.wants {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %v, want %q", c.args, err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: not one line: %q", c.args, err)
		}
	}
}

// A head pointed at an HTTP server says so.
func TestRunAgainstHTTPServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			c.Close()
		}
	}()
	dir := testmodels.Dir(t)
	_, _, err = seamAll(t, append([]string{"run", "--model", filepath.Join(dir, testmodels.Stories260KGGUF), "--stages", ln.Addr().String(), "hi"}, keyFlags(t)...)...)
	if err == nil || !strings.Contains(err.Error(), "that address answers HTTP, not the Seam stage protocol") {
		t.Fatalf("%v", err)
	}
}

// import --force, and a partial container (a stage's folder with only its
// own segments) that verify --layers checks and a stage serves.
func TestImportForceAndPartialContainer(t *testing.T) {
	ctr := importStories(t)
	dir := testmodels.Dir(t)
	src, tok := filepath.Join(dir, testmodels.Stories260K), filepath.Join(dir, testmodels.Tok512)
	if _, _, err := seamAll(t, "import", src, "--tokenizer", tok, "--out", ctr); err == nil || !strings.Contains(err.Error(), "use --force") {
		t.Fatalf("import over a container: %v", err)
	}
	if _, stderr, err := seamAll(t, "import", src, "--tokenizer", tok, "--out", ctr, "--force"); err != nil || !strings.Contains(stderr, "removing the container") {
		t.Fatalf("import --force: %v, %s", err, stderr)
	}
	// stories260K ties its classifier: the last stage maps embed.seg too.
	part := filepath.Join(t.TempDir(), "stage2")
	os.Mkdir(part, 0o755)
	for _, f := range []string{"index.json", "layer-002.seg", "layer-003.seg", "layer-004.seg", "head.seg", "embed.seg"} {
		b, err := os.ReadFile(filepath.Join(ctr, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(part, f), b, 0o644)
	}
	out, _, err := seamAll(t, "verify", part, "--layers", "2:5")
	if err != nil || !strings.Contains(out, "OK") || !strings.Contains(out, "not needed: 2 absent") {
		t.Fatalf("verify --layers: %q, %v", out, err)
	}
	if _, _, err := seamAll(t, "verify", part); err == nil {
		t.Error("whole verify passed a partial container")
	}
	if _, _, err := seamAll(t, "verify", part, "--layers", "0:2"); err == nil || !strings.Contains(err.Error(), "is missing") {
		t.Errorf("verify --layers of a range it does not hold: %v", err)
	}
	a1, _ := startStage(t, ctr, 0, 2)
	a2, _ := startStage(t, part, 2, 5)
	want, _ := os.ReadFile(filepath.Join(dir, testmodels.GreedyOnceUpon))
	text, err := seam(t, append([]string{"run", "--model", ctr, "--stages", a1 + "," + a2, "-n", "256", "--temperature", "0", "Once upon a time"}, keyFlags(t)...)...)
	if err != nil || text != string(want) {
		t.Fatalf("through a partial container's stage: %v\n%s", err, text)
	}
}
