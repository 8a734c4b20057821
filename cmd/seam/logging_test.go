package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seamlm/seam/internal/testmodels"
)

// logLines checks every JSON log line in stderr: one stage and one session
// key on each (a head's and a command's lines name theirs too: "head",
// "import", "pull", "bench"), no text-format line among them. It returns
// how often each message was logged.
func logLines(t *testing.T, what, stderr string) map[string]int {
	t.Helper()
	msgs := map[string]int{}
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(line, "{") {
			if strings.Contains(line, "level=") {
				t.Errorf("%s: a text log line with --log-format json: %s", what, line)
			}
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("%s: not JSON: %q", what, line)
			continue
		}
		if st, ok := rec["stage"]; !ok || st == "" || strings.Count(line, `"stage":`) != 1 {
			t.Errorf("%s: a line without one stage: %s", what, line)
		}
		if _, ok := rec["session"]; !ok || strings.Count(line, `"session":`) != 1 {
			t.Errorf("%s: a line without one session: %s", what, line)
		}
		msg, _ := rec["msg"].(string)
		if strings.HasPrefix(msg, "plan: ") {
			msg = "plan: …"
		}
		msgs[msg]++
	}
	return msgs
}

// wantLogs fails unless every message in want was logged.
func wantLogs(t *testing.T, what string, msgs map[string]int, want ...string) {
	t.Helper()
	for _, w := range want {
		if msgs[w] == 0 {
			t.Errorf("%s: no %q line; saw %v", what, w, msgs)
		}
	}
}

// -v logs what happens at Info (-vv every frame), structured, as JSON when
// asked, with the stage and the session on every line; without -v nothing
// but warnings and errors. Covered: run through in-process and remote
// stages (the head, and the stages' own processes), serve, import, pull,
// bench split and plan --pool.
func TestLogging(t *testing.T) {
	m := stories(t)
	jsonV := []string{"-v", "--log-format", "json"}
	args := append(append([]string{"run"}, m...), "-n", "8", "--split", "2", "hi")
	_, stderr, err := seamAll(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stderr, "level=INFO") {
		t.Errorf("Info lines without -v: %s", stderr)
	}
	_, stderr, err = seamAll(t, append([]string{"-vv", "--log-format", "json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	wantLogs(t, "run --split", logLines(t, "run --split", stderr), "listening", "connection accepted", "handshake accepted", "pipeline ready",
		"session opened", "session closed", "frame to stage", "frame from stage", "frame from head")

	// Stage processes over TLS (at -vv: serveProc gives one -v), and a head
	// dialling them.
	ctr := importStories(t)
	var stages []*proc
	var addrs []string
	for _, r := range []string{"0:2", "2:5"} {
		p, addr := serveProc(t, ctr, r, "s"+r, "-v", "--log-format", "json")
		stages, addrs = append(stages, p), append(addrs, addr)
	}
	_, stderr, err = seamAll(t, append(append(jsonV, "run", "--model", ctr, "--stages", strings.Join(addrs, ","), "-n", "8", "hi"), keyFlags(t)...)...)
	if err != nil {
		t.Fatal(err)
	}
	wantLogs(t, "run --stages", logLines(t, "run --stages", stderr), "authenticating connections", "connected", "handshake accepted", "routed",
		"pipeline ready", "session opened", "session closed")
	for i, p := range stages {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(t, "stage", 15*time.Second); code != 0 {
			t.Fatalf("stage exited %d: %s", code, p.stderr)
		}
		msgs := logLines(t, "serve", p.stderr.String())
		// The head's Close frame and its hanging up race: a stage that sees
		// the disconnect first closes the session with the longer message.
		msgs["session closed"] += msgs["session closed: its head disconnected"]
		wantLogs(t, "serve", msgs, "authenticating connections", "listening", "peer authenticated", "connection accepted", "handshake accepted",
			"session opened", "session closed", "shutting down")
		if i == 0 {
			wantLogs(t, "serve", msgs, "routed downstream")
		}
	}

	// import, and again over the container with --force.
	dir := testmodels.Dir(t)
	out := filepath.Join(t.TempDir(), "c.seam")
	imp := []string{"import", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", filepath.Join(dir, testmodels.Tok512), "--out", out}
	for i, extra := range [][]string{nil, {"--force"}} {
		_, stderr, err = seamAll(t, append(append(jsonV, imp...), extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		msgs := logLines(t, "import", stderr)
		wantLogs(t, "import", msgs, "import started", "import finished")
		if i == 1 {
			wantLogs(t, "import --force", msgs, "removing the container from "+out+" before importing")
		}
	}

	// pull from a local host.
	_, srv := newHub(t, map[string]string{"karpathy/tinyllamas/stories260K/tok512.bin": filepath.Join(dir, testmodels.Tok512)})
	_, stderr, err = seamAll(t, append(jsonV, "pull", "karpathy/tinyllamas/stories260K/tok512.bin", "--dir", t.TempDir(), "--endpoint", srv.URL)...)
	if err != nil {
		t.Fatal(err)
	}
	wantLogs(t, "pull", logLines(t, "pull", stderr), "resolved", "downloaded")

	// bench split: a line per run at Info, and progress lines on a
	// stderr that is not a terminal.
	_, stderr, err = seamAll(t, append(append(jsonV, "bench", "split"), append(m, "--split", "2", "--wire", "f32", "--links", "1000@0ms",
		"--prompt-tokens", "8", "--decode-tokens", "4", "--rounds", "1")...)...)
	if err != nil {
		t.Fatal(err)
	}
	if msgs := logLines(t, "bench split", stderr); msgs["bench split"] != 2 {
		t.Errorf("bench split: %d lines for 2 runs: %s", msgs["bench split"], stderr)
	}
	if !strings.Contains(stderr, "bench split: 1 of 2 (50%)\n") || !strings.Contains(stderr, "bench split: 2 of 2 (100%)\n") {
		t.Errorf("bench split: no progress lines: %s", stderr)
	}

	// plan --pool: the head's measurements and plan.
	pool := []string{startMember(t, ctr), startMember(t, ctr)}
	_, stderr, err = seamAll(t, append(append(jsonV, "plan", "--model", ctr, "--pool", strings.Join(pool, ","), "--sessions", "1"), keyFlags(t)...)...)
	if err != nil {
		t.Fatal(err)
	}
	wantLogs(t, "plan --pool", logLines(t, "plan --pool", stderr), "authenticating connections", "measured link", "plan: …")

	if _, _, err := seamAll(t, "--log-format", "yaml", "version"); err == nil || !strings.Contains(err.Error(), "want text or json") {
		t.Errorf("--log-format yaml: %v", err)
	}
}
