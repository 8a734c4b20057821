package main

import (
	"bufio"
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
	c, err := a.config("test head")
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
