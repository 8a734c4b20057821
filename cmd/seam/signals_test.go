package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seamlm/seam/internal/testmodels"
)

// The signals every long-running command handles, with the exit status
// each gives (128 + its number).
var stopSignals = []struct {
	sig  syscall.Signal
	name string
	code int
}{{syscall.SIGINT, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}}

// Ctrl-C or SIGTERM during `seam run` stops the generation, prints the
// speeds so far and exits 128 + the signal's number, naming it.
func TestRunInterrupted(t *testing.T) {
	ctr := importStories(t)
	a1, _ := startStage(t, ctr, 0, 2, "--link-latency-ms", "5")
	a2, _ := startStage(t, ctr, 2, 5, "--link-latency-ms", "5")
	want, _ := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	for _, s := range stopSignals {
		head := startProc(t, append([]string{"run", "--model", ctr, "--stages", a1 + "," + a2, "-n", "512", "--temperature", "0", "Once upon a time"}, keyFlags(t)...)...)
		head.until(func() bool { return head.stdout.Len() > 40 })
		head.cmd.Process.Signal(s.sig)
		code := head.wait(t, "run", 10*time.Second)
		msg := head.stderr.String()
		noFault(t, "run", msg)
		if code != s.code || !strings.Contains(msg, "(interrupted)") || !strings.Contains(msg, "seam: interrupted by "+s.name) || !strings.Contains(msg, "prefill: ") {
			t.Fatalf("%s: exit %d, stderr %q", s.name, code, msg)
		}
		if got := strings.TrimSuffix(head.stdout.String(), "\n"); !strings.HasPrefix(string(want), got) {
			t.Errorf("%s: printed %q, not a prefix of the true text", s.name, got)
		}
		t.Logf("%s: exit %d; stderr: %s", s.name, code, strings.TrimSpace(msg))
	}
}

// `seam pull` from a local Hugging Face-style host: SIGINT or SIGTERM
// mid-download keeps the partial file and says how to resume; the same
// command resumes it and checks the SHA-256 the host published.
func TestPullCommand(t *testing.T) {
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i*31 + i>>9)
	}
	sum := sha256.Sum256(data)
	published := hex.EncodeToString(sum[:])
	var slow atomic.Bool
	slow.Store(true)
	mux := http.NewServeMux()
	mux.HandleFunc("/owner/repo/resolve/main/m.gguf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Linked-Etag", `"`+published+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
		http.Redirect(w, r, "/blob/m.gguf", http.StatusFound)
	})
	mux.HandleFunc("/blob/m.gguf", func(w http.ResponseWriter, r *http.Request) {
		var from int
		fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &from)
		if from > 0 {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(data)-1, len(data)))
			w.Header().Set("Content-Length", fmt.Sprint(len(data)-from))
			w.WriteHeader(http.StatusPartialContent)
		} else {
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		}
		for off := from; off < len(data); off += 64 << 10 {
			if _, err := w.Write(data[off:min(off+64<<10, len(data))]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			if slow.Load() {
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, s := range stopSignals {
		slow.Store(true)
		pullInterrupted(t, srv.URL, s.sig, s.name, s.code, data, published, &slow)
	}
}

func pullInterrupted(t *testing.T, endpoint string, sig syscall.Signal, name string, want int, data []byte, published string, slow *atomic.Bool) {
	t.Helper()
	sum := sha256.Sum256(data)
	dir := t.TempDir()
	p := startProc(t, "pull", "owner/repo/m.gguf", "--dir", dir, "--endpoint", endpoint)
	partial := filepath.Join(dir, "m.gguf.partial")
	p.until(func() bool { st, err := os.Stat(partial); return err == nil && st.Size() > 1<<20 })
	p.cmd.Process.Signal(sig)
	code := p.wait(t, "pull", 10*time.Second)
	msg := p.stderr.String()
	if code != want || !strings.Contains(msg, "run the same command again to resume") || !strings.Contains(msg, "interrupted by "+name) {
		t.Fatalf("pull interrupted by %s: exit %d, %q", name, code, msg)
	}
	st, err := os.Stat(partial)
	if err != nil || st.Size() == 0 || st.Size() >= int64(len(data)) {
		t.Fatalf("partial file: %v, %v", st, err)
	}
	slow.Store(false)
	out, _, err := seamAll(t, "pull", "owner/repo/m.gguf", "--dir", dir, "--endpoint", endpoint)
	if err != nil || !strings.Contains(out, fmt.Sprintf("resumed from byte %d", st.Size())) || !strings.Contains(out, "sha256 checked against the host's ("+published+")") {
		t.Fatalf("resumed pull: %q, %v", out, err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "m.gguf"))
	if sha256.Sum256(got) != sum {
		t.Fatal("downloaded bytes differ")
	}
	if _, err := os.Stat(partial); err == nil {
		t.Error("the partial file is still there")
	}
	t.Logf("%s at %d bytes: exit %d, %s; then: %s", name, st.Size(), code, strings.TrimSpace(msg), strings.TrimSpace(out))
}

// SIGTERM during `seam import` stops it as Ctrl-C does (TestImportInterrupted):
// what it wrote is removed, and it exits 143 naming the signal. A trial
// whose import finished before the signal runs again, at most 3 times.
func TestImportTerminated(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "q8.gguf")
	mustSeam(t, "bench", "make-gguf", "--out", src, "--dim", "256", "--hidden", "768", "--heads", "8", "--kv-heads", "4",
		"--vocab", "1000", "--seq-len", "512", "--layers", "8", "--matrices", "q8_0", "--embedding", "q8_0")
	for attempt := range 3 {
		out := filepath.Join(dir, fmt.Sprintf("c%d.seam", attempt))
		p := startProc(t, "import", src, "--out", out)
		p.until(func() bool { return dirBytes(out) > 0 })
		p.cmd.Process.Signal(syscall.SIGTERM)
		code := p.wait(t, "import", 30*time.Second)
		msg := p.stderr.String()
		noFault(t, "import", msg)
		if code == 0 {
			t.Logf("attempt %d: the import finished before SIGTERM", attempt)
			continue
		}
		if code != 143 || !strings.Contains(msg, "what it wrote was removed") || !strings.Contains(msg, "seam: interrupted by SIGTERM") {
			t.Fatalf("import stopped by SIGTERM: exit %d, %q", code, msg)
		}
		if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
			t.Fatalf("SIGTERM left %d files in %s", len(entries), out)
		}
		t.Logf("exit %d: %s", code, strings.TrimSpace(msg))
		return
	}
	t.Fatal("every import finished before SIGTERM: the test checked nothing")
}
