package main

import (
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
