package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// hub is a local stand-in for huggingface.co: GET or HEAD on
// /OWNER/REPO/resolve/main/PATH answers 302 to /lfs/OWNER/REPO/PATH with
// the headers the real host sends for an LFS file (X-Linked-Etag, the
// SHA-256 of the bytes; X-Linked-Size; X-Repo-Commit), and the bytes are
// served with Range support.
type hub struct {
	files map[string][]byte // "OWNER/REPO/PATH" -> content
	mu    sync.Mutex
	gets  []string // the paths of every GET, in order
}

// newHub serves the local files: "OWNER/REPO/PATH" -> file on disk.
func newHub(t *testing.T, files map[string]string) (*hub, *httptest.Server) {
	t.Helper()
	h := &hub{files: map[string][]byte{}}
	for key, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h.files[key] = b
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		h.mu.Lock()
		h.gets = append(h.gets, r.URL.Path)
		h.mu.Unlock()
	}
	if key, ok := strings.CutPrefix(r.URL.Path, "/lfs/"); ok {
		data, found := h.files[key]
		if !found {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		return
	}
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" || parts[3] != "main" {
		http.NotFound(w, r)
		return
	}
	key := parts[0] + "/" + parts[1] + "/" + parts[4]
	data, ok := h.files[key]
	if !ok {
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	sum := sha256.Sum256(data)
	w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(sum[:])+`"`)
	w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
	w.Header().Set("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567")
	http.Redirect(w, r, "/lfs/"+key, http.StatusFound)
}

// fetched returns the paths of the GETs so far.
func (h *hub) fetched() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.gets...)
}
