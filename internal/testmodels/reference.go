package testmodels

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// RequireEnv names the variable that .ci/run sets so that a missing
// reference (shared files, node, the npm packages) fails a test instead of
// skipping it: a reference skipped in CI would hide a regression.
const RequireEnv = "SEAM_REQUIRE_REFERENCES"

// skipOrFail skips the test with msg, or fails it when references are required.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("reference missing and %s is set: "+format, append([]any{RequireEnv}, args...)...)
	}
	t.Skipf(format, args...)
}

// Tokenizer folder names under TokenizersDir.
const (
	Llama3 = "llama3"
	Qwen3  = "qwen3"
	Llama2 = "llama2"
)

// TokenizersDir returns the shared real tokenizers folder
// (../shared/tokenizers, or $SEAM_TOKENIZERS), skipping when it is absent.
func TokenizersDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SEAM_TOKENIZERS")
	if dir == "" {
		dir = filepath.Join(Root(), "..", "shared", "tokenizers")
	}
	if _, err := os.Stat(filepath.Join(dir, Llama3, "tokenizer.json")); err != nil {
		skipOrFail(t, "shared tokenizers not found at %s (set SEAM_TOKENIZERS or provide ../shared/tokenizers): %v", dir, err)
	}
	return dir
}

// TokenizerDir returns one family's folder (Llama3, Qwen3 or Llama2).
func TokenizerDir(t testing.TB, family string) string {
	t.Helper()
	return filepath.Join(TokenizersDir(t), family)
}

// ReferenceDir returns the repository's reference/ folder with its npm
// packages installed (cd reference && npm ci), skipping when node or the
// packages are absent.
func ReferenceDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(Root(), "reference")
	if _, err := exec.LookPath("node"); err != nil {
		skipOrFail(t, "node not found on PATH; the reference engines run under Node.js: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		skipOrFail(t, "reference npm packages not installed (run: cd reference && npm ci): %v", err)
	}
	return dir
}

// RunNode runs `node script args...` in the reference folder with stdin as
// input and returns its standard output. It fails the test, quoting standard
// error, when the script exits non-zero or runs past timeout.
func RunNode(t testing.TB, timeout time.Duration, stdin []byte, script string, args ...string) []byte {
	t.Helper()
	dir := ReferenceDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s %v in %s: %v\nstderr:\n%s", script, args, dir, err, stderr.String())
	}
	return stdout.Bytes()
}
