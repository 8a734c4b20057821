package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/internal/testmodels"
)

// readmeCommands returns the lines of the sh blocks in README.md's section
// titled heading (up to the next "## "), continuation lines joined.
func readmeCommands(t *testing.T, readme, heading string) []string {
	t.Helper()
	var cmds []string
	in, block := false, false
	sc := bufio.NewScanner(strings.NewReader(readme))
	var cont string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == heading
		case in && !block && strings.TrimSpace(line) == "```sh":
			block = true
		case block && strings.TrimSpace(line) == "```":
			block = false
		case in && block && strings.TrimSpace(line) != "":
			if l, ok := strings.CutSuffix(line, `\`); ok {
				cont += l
				continue
			}
			cmds = append(cmds, strings.TrimSpace(cont+line))
			cont = ""
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("README.md: no sh block under %q", heading)
	}
	return cmds
}

// Acceptance: README's "Get a model" and "Run it" work as written,
// copy-pasted, in an empty folder. The commands are read from README.md
// itself and run by sh; ./seam is this test binary acting as the seam
// command (it stands in for `go build ./cmd/seam`), and HF_ENDPOINT points
// `seam pull` at a local host that serves the shared stories260K files as
// huggingface.co does, so nothing touches the internet. Every command must
// exit 0, and every greedy run must print the reference text.
func TestREADMECommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := testmodels.Dir(t)
	want, err := os.ReadFile(filepath.Join(dir, testmodels.GreedyOnceUpon))
	if err != nil {
		t.Fatal(err)
	}
	h, srv := newHub(t, map[string]string{
		"karpathy/tinyllamas/stories260K/stories260K.bin": filepath.Join(dir, testmodels.Stories260K),
		"karpathy/tinyllamas/stories260K/tok512.bin":      filepath.Join(dir, testmodels.Tok512),
	})
	work := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"SEAM_TEST_MAIN=1", "HF_ENDPOINT=" + srv.URL}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HF_") && !strings.HasPrefix(kv, "SEAM_TEST_MAIN=") {
			env = append(env, kv)
		}
	}
	var built, greedy int
	cmds := append(readmeCommands(t, string(readme), "## Get a model"), readmeCommands(t, string(readme), "## Run it")...)
	for _, line := range cmds {
		if line == "go build ./cmd/seam" {
			if err := os.Symlink(self, filepath.Join(work, "seam")); err != nil {
				t.Fatal(err)
			}
			built++
			continue
		}
		if !strings.HasPrefix(line, "./seam ") {
			t.Fatalf("README command %q: neither ./seam nor go build ./cmd/seam, so this test cannot run it", line)
		}
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = work, env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", line, err, stdout.String(), stderr.String())
		}
		t.Logf("%s: exit 0 in %v; stderr: %s", line, time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
		args := strings.Fields(line)
		switch args[1] {
		case "run":
			if !strings.Contains(line, "--temperature 0") {
				t.Fatalf("%s: a run the test cannot check (not greedy)", line)
			}
			if stdout.String() != string(want) {
				t.Errorf("%s: output differs from %s:\n got: %q\nwant: %q", line, testmodels.GreedyOnceUpon, stdout.String(), want)
			}
			greedy++
		case "score":
			var got struct{ Tokens, Predicted int }
			if err := json.Unmarshal([]byte(stdout.String()), &got); err != nil || got.Tokens < 2 || got.Predicted != got.Tokens-1 {
				t.Errorf("%s: %q, %v", line, stdout.String(), err)
			}
		case "pull":
			name := filepath.Base(args[2])
			got, _ := os.ReadFile(filepath.Join(work, "models", name))
			src, _ := os.ReadFile(filepath.Join(dir, name))
			if len(got) == 0 || string(got) != string(src) {
				t.Errorf("%s: models/%s (%d bytes) is not the host's file (%d bytes)", line, name, len(got), len(src))
			}
		case "import":
			if _, err := os.Stat(filepath.Join(work, "models", "stories.seam", "index.json")); err != nil {
				t.Errorf("%s: no container: %v", line, err)
			}
		}
	}
	if built != 1 || greedy < 2 {
		t.Errorf("README: %d build lines and %d greedy runs; want the build and the runs of the whole model and of the container", built, greedy)
	}
	fetched := strings.Join(h.fetched(), " ")
	for _, f := range []string{"stories260K.bin", "tok512.bin"} {
		if !strings.Contains(fetched, "/lfs/karpathy/tinyllamas/stories260K/"+f) {
			t.Errorf("the local host never served %s: %v", f, fetched)
		}
	}
	t.Logf("%d README commands run in %s", len(cmds), work)
}
