package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/internal/testmodels"
)

func TestKeygen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.key")
	out, err := seam(t, "keygen", "--out", path)
	if err != nil {
		t.Fatal(err)
	}
	key, err := auth.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out != auth.Public(key)+"\n" {
		t.Fatalf("stdout %q, want the fingerprint alone on a line (%s)", out, auth.Public(key))
	}
	if _, err := seam(t, "keygen", "--out", path); err == nil {
		t.Fatal("keygen overwrote a key")
	}
}

func TestPlanCommand(t *testing.T) {
	model := testmodels.Path(t, "stories260K.bin")
	dir := t.TempDir()
	file := `model = "` + model + `"
insecure = true
[[host]]
name = "big"
addr = "198.18.0.1:7070"
memory = "100MiB"
decode_ms = 0.02
prefill_ms = 0.01
head_ms = 0.03
[[host]]
name = "small"
addr = "198.18.1.2:7070"
memory = "70MiB"
decode_ms = 0.02
prefill_ms = 0.01
head_ms = 0.03
[[link]]
a = "head"
b = "big"
mbps = 1000
rtt_ms = 0.1
[[link]]
a = "head"
b = "small"
mbps = 20
rtt_ms = 30
[[link]]
a = "big"
b = "small"
mbps = 20
rtt_ms = 30
`
	path := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := seam(t, "plan", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stage 1: big", "layers [0, 5)", "small unused", "even split [[0 2] [2 5]]", "predicted: decode"} {
		if !strings.Contains(out, want) {
			t.Fatalf("plan output lacks %q:\n%s", want, out)
		}
	}
	if _, err := seam(t, "plan", "--sessions", "1000", path); err == nil || !strings.Contains(err.Error(), "short by") {
		t.Fatalf("oversized plan: %v", err)
	}
	if err := os.WriteFile(path, []byte(file+"colour = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := seam(t, "plan", path); err == nil || !strings.Contains(err.Error(), "unknown keys") {
		t.Fatalf("unknown key: %v", err)
	}
}

var testKeyFlags struct {
	sync.Once
	flags []string
	err   error
}

// keyFlags returns --key and --trust flags for a key that every test
// process shares and trusts (made once per test binary), so that process
// tests run over TLS as real deployments do.
func keyFlags(t *testing.T) []string {
	t.Helper()
	testKeyFlags.Do(func() {
		dir, err := os.MkdirTemp("", "seam-test-keys-")
		if err != nil {
			testKeyFlags.err = err
			return
		}
		key := filepath.Join(dir, "node.key")
		k, err := auth.GenerateKey(nil)
		if err == nil {
			err = auth.WriteKeyFile(key, k)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "trust"), []byte(auth.Public(k)+" tests\n"), 0o644)
		}
		testKeyFlags.flags, testKeyFlags.err = []string{"--key", key, "--trust", filepath.Join(dir, "trust")}, err
	})
	if testKeyFlags.err != nil {
		t.Fatal(testKeyFlags.err)
	}
	return testKeyFlags.flags
}

// testAuth is the authentication of keyFlags, for heads run in the test.
func testAuth(t *testing.T) *auth.Config {
	t.Helper()
	f := keyFlags(t)
	a := authFlags{key: f[1], trust: f[3]}
	c, err := a.config("test head", "head")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startMember runs `seam serve` without --layers (a pool member) on a free
// loopback port and returns its address.
func startMember(t *testing.T, ctr string, extra ...string) string {
	t.Helper()
	args := append([]string{"serve", "--model", ctr, "--listen", "127.0.0.1:0"}, append(keyFlags(t), extra...)...)
	_, stdout, stderr := seamProcess(t, args...)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "pool member") {
		t.Fatalf("pool member did not start: %q %v; stderr: %s", line, err, stderr)
	}
	// pool member "name" on ADDR: ...
	_, rest, _ := strings.Cut(line, " on ")
	addr, _, _ := strings.Cut(rest, ":")
	port, _, _ := strings.Cut(strings.TrimPrefix(rest, addr+":"), ":")
	return addr + ":" + port
}

// Three pool member processes, none able to hold the model with its
// budget, are planned by `seam run --pool` over TLS; the greedy text is
// the reference text; a second run reuses the assignment.
func TestRunPool(t *testing.T) {
	ctr := importStories(t)
	want, err := os.ReadFile(filepath.Join(testmodels.Dir(t), testmodels.GreedyOnceUpon))
	if err != nil {
		t.Fatal(err)
	}
	var pool []string
	for range 3 {
		pool = append(pool, startMember(t, ctr, "--memory", "65MiB"))
	}
	// seam plan --pool measures and plans without assigning anything.
	out, err := seam(t, append([]string{"plan", "--model", ctr, "--pool", strings.Join(pool, ","), "--sessions", "1"}, keyFlags(t)...)...)
	if err != nil || !strings.Contains(out, "predicted: decode") || !strings.Contains(out, "stage 2:") || !strings.Contains(out, "even split") {
		t.Fatalf("plan --pool: %v\n%s", err, out)
	}
	args := append([]string{"run", "--model", ctr, "--pool", strings.Join(pool, ","), "--sessions", "1", "-n", "256", "--temperature", "0", "Once upon a time"}, keyFlags(t)...)
	for run := range 2 {
		text, err := seam(t, args...)
		if err != nil || text != string(want) {
			t.Fatalf("run %d through the pool: %v\n%s", run+1, err, text)
		}
	}
	if _, err := seam(t, append(args, "--wire", "q8")...); err == nil || !strings.Contains(err.Error(), "--wire q8 with --pool") {
		t.Fatalf("--wire with --pool: %v", err)
	}
	if _, err := seam(t, append(args, "--max-kl", "0.01")...); err == nil || !strings.Contains(err.Error(), "--measure-kl") {
		t.Fatalf("--max-kl without measurements: %v", err)
	}
}

// seam up: one file names the model, the keys, the pool and the API's
// address; the head plans the pool over TLS and serves the API, whose
// greedy completion continues the reference text.
func TestUp(t *testing.T) {
	ctr := importStories(t)
	want, err := os.ReadFile(filepath.Join(testmodels.Dir(t), testmodels.GreedyOnceUpon))
	if err != nil {
		t.Fatal(err)
	}
	keys := keyFlags(t)
	file := fmt.Sprintf("model = %q\nkey = %q\ntrust = %q\nlisten = \"127.0.0.1:0\"\nsessions = 2\n", ctr, keys[1], keys[3])
	for i := range 2 {
		file += fmt.Sprintf("[[host]]\nname = \"m%d\"\naddr = %q\n", i+1, startMember(t, ctr, "--memory", "66MiB", "--name", fmt.Sprintf("m%d", i+1)))
	}
	path := filepath.Join(t.TempDir(), "cluster.toml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCmd()
	pr, pw := io.Pipe()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"up", path})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	url, err := servingURL(pr)
	if err != nil {
		cancel()
		t.Fatalf("seam up: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("seam up exited with %v", err)
		}
	}()
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"stories","prompt":"Once upon a time","max_tokens":40,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 || len(body.Choices) != 1 {
		t.Fatalf("status %d, %+v, %v", resp.StatusCode, body, err)
	}
	if got := "Once upon a time" + body.Choices[0].Text; !strings.HasPrefix(string(want), got) || len(body.Choices[0].Text) < 40 {
		t.Fatalf("completion %q does not continue the reference text %q", got, want[:200])
	}
}
