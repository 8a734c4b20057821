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

// Ctrl-C during `seam run` stops the generation, prints the speeds so far
// and exits 130 with the signal named.
func TestRunInterrupted(t *testing.T) {
	ctr := importStories(t)
	a1, _ := startStage(t, ctr, 0, 2, "--link-latency-ms", "5")
	a2, _ := startStage(t, ctr, 2, 5, "--link-latency-ms", "5")
	head := startProc(t, append([]string{"run", "--model", ctr, "--stages", a1 + "," + a2, "-n", "512", "--temperature", "0", "Once upon a time"}, keyFlags(t)...)...)
	head.until(func() bool { return head.stdout.Len() > 40 })
	head.cmd.Process.Signal(syscall.SIGINT)
	code := head.wait(t, "run", 10*time.Second)
	msg := head.stderr.String()
	noFault(t, "run", msg)
	if code != 130 || !strings.Contains(msg, "(interrupted)") || !strings.Contains(msg, "seam: interrupted by SIGINT") || !strings.Contains(msg, "prefill: ") {
		t.Fatalf("exit %d, stderr %q", code, msg)
	}
	want, _ := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	if got := strings.TrimSuffix(head.stdout.String(), "\n"); !strings.HasPrefix(string(want), got) {
		t.Errorf("printed %q, not a prefix of the true text", got)
	}
}

// `seam pull` from a local Hugging Face-style host: SIGINT mid-download
// keeps the partial file and says how to resume; the same command resumes
// it and checks the SHA-256 the host published.
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
	dir := t.TempDir()
	p := startProc(t, "pull", "owner/repo/m.gguf", "--dir", dir, "--endpoint", srv.URL)
	partial := filepath.Join(dir, "m.gguf.partial")
	p.until(func() bool { st, err := os.Stat(partial); return err == nil && st.Size() > 1<<20 })
	p.cmd.Process.Signal(syscall.SIGINT)
	code := p.wait(t, "pull", 10*time.Second)
	msg := p.stderr.String()
	if code != 130 || !strings.Contains(msg, "run the same command again to resume") || !strings.Contains(msg, "interrupted by SIGINT") {
		t.Fatalf("interrupted pull: exit %d, %q", code, msg)
	}
	st, err := os.Stat(partial)
	if err != nil || st.Size() == 0 || st.Size() >= int64(len(data)) {
		t.Fatalf("partial file: %v, %v", st, err)
	}
	slow.Store(false)
	out, _, err := seamAll(t, "pull", "owner/repo/m.gguf", "--dir", dir, "--endpoint", srv.URL)
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
	t.Logf("interrupted at %d bytes: %s; then: %s", st.Size(), strings.TrimSpace(msg), strings.TrimSpace(out))
}
