package pull

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var quiet = slog.New(slog.DiscardHandler)

// hub is a local stand-in for a Hugging Face-style host: the resolve URL
// answers with a redirect to the storage URL, carrying X-Linked-Etag (the
// SHA-256), X-Linked-Size and X-Repo-Commit, as the real host does for LFS
// files; the storage URL serves the bytes with net/http's own Range support.
// It can cut the connection after a given number of body bytes, and serve
// bytes other than those it publishes the checksum of.
type hub struct {
	t         *testing.T
	files     map[string][]byte // "owner/repo/path" -> content served
	published map[string]string // "owner/repo/path" -> X-Linked-Etag value; default the content's SHA-256
	gitFiles  map[string]bool   // served as a file kept in git: a plain ETag with the blob SHA-1, no redirect

	mu     sync.Mutex
	cuts   []int64  // per GET of the bytes, in order: cut after this many body bytes (-1: none)
	ranges []string // the Range header of each GET of the bytes
	gets   int
}

func newHub(t *testing.T) (*hub, *httptest.Server) {
	h := &hub{t: t, files: map[string][]byte{}, published: map[string]string{}, gitFiles: map[string]bool{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if key, ok := strings.CutPrefix(r.URL.Path, "/storage/"); ok {
		h.serveBytes(w, r, key)
		return
	}
	// /OWNER/REPO/resolve/REV/PATH
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "" && r.Header.Get("Authorization") != "Bearer secret" {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	key := parts[0] + "/" + parts[1] + "/" + parts[4]
	data, ok := h.files[key]
	if !ok || parts[3] != "main" {
		http.NotFound(w, r)
		return
	}
	if parts[0] == "gated" && r.Header.Get("Authorization") == "" {
		http.Error(w, "gated", http.StatusUnauthorized)
		return
	}
	w.Header().Set("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567")
	if h.gitFiles[key] {
		blob := sha1.New()
		fmt.Fprintf(blob, "blob %d\x00", len(data))
		blob.Write(data)
		w.Header().Set("ETag", `"`+hex.EncodeToString(blob.Sum(nil))+`"`)
		h.serveBytes(w, r, key)
		return
	}
	etag, ok := h.published[key]
	if !ok {
		sum := sha256.Sum256(data)
		etag = hex.EncodeToString(sum[:])
	}
	w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
	w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
	http.Redirect(w, r, "/storage/"+key+"?signature=xyz", http.StatusFound)
}

func (h *hub) serveBytes(w http.ResponseWriter, r *http.Request, key string) {
	data := h.files[key]
	cut := int64(-1)
	if r.Method == http.MethodGet {
		h.mu.Lock()
		if h.gets < len(h.cuts) {
			cut = h.cuts[h.gets]
		}
		h.gets++
		h.ranges = append(h.ranges, r.Header.Get("Range"))
		h.mu.Unlock()
	}
	if cut >= 0 {
		w = &cutter{ResponseWriter: w, left: cut}
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// cutter drops the connection after left body bytes, as a failing network
// or a restarted server would, mid-body.
type cutter struct {
	http.ResponseWriter
	left int64
}

func (c *cutter) Write(p []byte) (int, error) {
	if int64(len(p)) <= c.left {
		c.left -= int64(len(p))
		return c.ResponseWriter.Write(p)
	}
	n, _ := c.ResponseWriter.Write(p[:c.left])
	c.ResponseWriter.(http.Flusher).Flush()
	_ = n
	panic(http.ErrAbortHandler) // net/http closes the connection without a response end
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func opts(t *testing.T, srv *httptest.Server) Options {
	return Options{Dir: t.TempDir(), Endpoint: srv.URL, RetryWait: time.Millisecond, Logger: quiet}
}

func TestResolve(t *testing.T) {
	for _, c := range []struct{ ref, url, name string }{
		{"owner/repo/model.gguf", "https://huggingface.co/owner/repo/resolve/main/model.gguf", "model.gguf"},
		{"owner/repo/sub/dir/m.gguf", "https://huggingface.co/owner/repo/resolve/main/sub/dir/m.gguf", "m.gguf"},
		{"https://huggingface.co/owner/repo/blob/main/m.gguf", "https://huggingface.co/owner/repo/resolve/main/m.gguf", "m.gguf"},
		{"https://example.com/files/m.gguf?x=1", "https://example.com/files/m.gguf?x=1", "m.gguf"},
	} {
		src, err := Resolve(c.ref, "", "")
		if err != nil || src.URL != c.url || src.Name != c.name {
			t.Errorf("Resolve(%q) = %+v, %v; want %s, %s", c.ref, src, err, c.url, c.name)
		}
	}
	if src, _ := Resolve("o/r/f.gguf", "http://127.0.0.1:9/mirror/", "v2"); src.URL != "http://127.0.0.1:9/mirror/o/r/resolve/v2/f.gguf" {
		t.Errorf("endpoint and revision: %s", src.URL)
	}
	for _, bad := range []string{"model.gguf", "owner/repo", "owner//f.gguf", "o/r/../f.gguf", "https://"} {
		if _, err := Resolve(bad, "", ""); err == nil {
			t.Errorf("Resolve(%q) accepted", bad)
		}
	}
}

// A download whose connection is cut at random points resumes each time
// with a Range request from exactly where the file ends, within one run, and
// ends with the published checksum; nothing but the final file is left.
func TestPullResumesAfterCuts(t *testing.T) {
	h, srv := newHub(t)
	data := randomBytes(1, 3<<20+12345)
	h.files["owner/repo/model.gguf"] = data
	r := rand.New(rand.NewPCG(2, 2))
	var cutAt []int64 // absolute positions where the connection drops
	pos := int64(0)
	for range 8 {
		step := 1 + r.Int64N(int64(len(data))/8)
		h.cuts = append(h.cuts, step)
		pos += step
		cutAt = append(cutAt, pos)
	}
	o := opts(t, srv)
	o.Retries = 10
	var last int64
	o.Progress = func(done, total int64) {
		if done < last || total != int64(len(data)) {
			t.Errorf("progress went from %d to %d of %d", last, done, total)
		}
		last = done
	}
	res, err := Pull(context.Background(), "owner/repo/model.gguf", o)
	if err != nil {
		t.Fatal(err)
	}
	if res.SHA256 != sha(data) || res.Published != sha(data) || res.Size != int64(len(data)) || res.Reconnects != len(h.cuts) {
		t.Fatalf("result %+v; want sha %s, %d bytes, %d reconnects", res, sha(data), len(data), len(h.cuts))
	}
	got, _ := os.ReadFile(filepath.Join(o.Dir, "model.gguf"))
	if !bytes.Equal(got, data) {
		t.Fatal("file content differs")
	}
	if len(h.ranges) != len(h.cuts)+1 || h.ranges[0] != "" {
		t.Fatalf("range requests %q", h.ranges)
	}
	for i, at := range cutAt {
		if want := fmt.Sprintf("bytes=%d-", at); h.ranges[i+1] != want {
			t.Errorf("request %d after a cut at %d asked %q, want %q", i+2, at, h.ranges[i+1], want)
		}
	}
	entries, _ := os.ReadDir(o.Dir)
	if len(entries) != 1 {
		t.Errorf("folder holds %d entries, want only the model", len(entries))
	}
	if last != int64(len(data)) {
		t.Errorf("progress ended at %d", last)
	}
}

// Interrupted runs (no retries) leave a partial file that the next run
// resumes, at 20 random cut points, each ending with the right checksum.
func TestPullResumesAcrossRuns(t *testing.T) {
	h, srv := newHub(t)
	data := randomBytes(3, 200_000)
	h.files["owner/repo/m.gguf"] = data
	r := rand.New(rand.NewPCG(4, 4))
	for i := range 20 {
		cut := 1 + r.Int64N(int64(len(data))-1)
		h.mu.Lock()
		h.cuts, h.gets, h.ranges = []int64{cut}, 0, nil
		h.mu.Unlock()
		o := opts(t, srv)
		_, err := Pull(context.Background(), "owner/repo/m.gguf", o)
		if err == nil || !strings.Contains(err.Error(), "run the same command again to resume") {
			t.Fatalf("run %d, cut at %d: %v", i, cut, err)
		}
		st, err := os.Stat(filepath.Join(o.Dir, "m.gguf"+PartialSuffix))
		if err != nil || st.Size() != cut {
			t.Fatalf("run %d: partial file after a cut at %d: %v, %v", i, cut, st, err)
		}
		res, err := Pull(context.Background(), "owner/repo/m.gguf", o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Resumed != cut || res.SHA256 != sha(data) || h.ranges[1] != fmt.Sprintf("bytes=%d-", cut) {
			t.Fatalf("run %d: resumed %d (cut %d), sha %s, ranges %q", i, res.Resumed, cut, res.SHA256, h.ranges)
		}
	}
}

// One corrupted byte, on the host or in a partial file left on disk, is
// refused with both hashes named, and the download is removed.
func TestPullRefusesCorruption(t *testing.T) {
	h, srv := newHub(t)
	data := randomBytes(5, 100_000)
	bad := bytes.Clone(data)
	bad[54321] ^= 0x10
	h.files["owner/repo/bad.gguf"] = bad
	h.published["owner/repo/bad.gguf"] = sha(data)
	o := opts(t, srv)
	_, err := Pull(context.Background(), "owner/repo/bad.gguf", o)
	var ce *ChecksumError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), sha(data)) || !strings.Contains(err.Error(), sha(bad)) {
		t.Fatalf("corrupted download: %v", err)
	}
	t.Logf("message: %v", err)
	if entries, _ := os.ReadDir(o.Dir); len(entries) != 0 {
		t.Errorf("corrupted download left %d files", len(entries))
	}

	// A partial file with a flipped byte: the resumed download's hash
	// covers it too.
	h.files["owner/repo/good.gguf"] = data
	partial := filepath.Join(o.Dir, "good.gguf"+PartialSuffix)
	prefix := bytes.Clone(data[:60000])
	prefix[100] ^= 1
	os.WriteFile(partial, prefix, 0o644)
	_, err = Pull(context.Background(), "owner/repo/good.gguf", o)
	if !errors.As(err, &ce) || ce.Want != sha(data) {
		t.Fatalf("corrupted partial file: %v", err)
	}
	res, err := Pull(context.Background(), "owner/repo/good.gguf", o)
	if err != nil || res.SHA256 != sha(data) || res.Resumed != 0 {
		t.Fatalf("download after the refused one: %+v, %v", res, err)
	}
	// The complete file is not downloaded again.
	before := h.gets
	res, err = Pull(context.Background(), "owner/repo/good.gguf", o)
	if err != nil || !res.Existing || h.gets != before {
		t.Fatalf("second pull of a complete file: %+v, %v, %d GETs", res, err, h.gets-before)
	}
	// --sha256 is checked too.
	o2 := opts(t, srv)
	o2.SHA256 = strings.Repeat("ab", 32)
	if _, err := Pull(context.Background(), "owner/repo/good.gguf", o2); !errors.As(err, &ce) || ce.Source != "--sha256" {
		t.Fatalf("--sha256 mismatch: %v", err)
	}
}

// A cancelled context (a signal) stops the download and keeps the partial
// file, saying how to resume.
func TestPullInterrupted(t *testing.T) {
	h, srv := newHub(t)
	data := randomBytes(6, 4<<20)
	h.files["owner/repo/m.gguf"] = data
	o := opts(t, srv)
	ctx, cancel := context.WithCancelCause(context.Background())
	o.Progress = func(done, total int64) {
		if done > 1<<20 {
			cancel(errors.New("interrupted by SIGINT"))
		}
	}
	_, err := Pull(ctx, "owner/repo/m.gguf", o)
	var ie *InterruptedError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "SIGINT") || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("interrupted pull: %v", err)
	}
	if st, err := os.Stat(ie.Partial); err != nil || st.Size() != ie.Have || ie.Have == 0 {
		t.Fatalf("partial file: %v, %v (have %d)", st, err, ie.Have)
	}
	o.Progress = nil
	res, err := Pull(context.Background(), "owner/repo/m.gguf", o)
	if err != nil || res.SHA256 != sha(data) || res.Resumed != ie.Have {
		t.Fatalf("resume after the interruption: %+v, %v", res, err)
	}
}

// Errors say what to do: a missing file, a gated repository.
func TestPullErrors(t *testing.T) {
	h, srv := newHub(t)
	h.files["gated/repo/m.gguf"] = []byte("x")
	o := opts(t, srv)
	if _, err := Pull(context.Background(), "owner/repo/missing.gguf", o); err == nil || !strings.Contains(err.Error(), "no such repository, revision or file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Pull(context.Background(), "gated/repo/m.gguf", o); err == nil || !strings.Contains(err.Error(), TokenEnv) {
		t.Errorf("gated repository: %v", err)
	}
	o.Token = "secret"
	if _, err := Pull(context.Background(), "gated/repo/m.gguf", o); err != nil {
		t.Errorf("gated repository with a token: %v", err)
	}
}

// A file kept in git (not LFS) publishes its git blob SHA-1 as a plain
// ETag, which is checked instead.
func TestPullGitBlob(t *testing.T) {
	h, srv := newHub(t)
	h.files["owner/repo/config.json"] = []byte(`{"a": 1}`)
	h.gitFiles["owner/repo/config.json"] = true
	o := opts(t, srv)
	res, err := Pull(context.Background(), "owner/repo/config.json", o)
	if err != nil || res.Algorithm != "git-sha1" {
		t.Fatalf("%+v, %v", res, err)
	}
	h.files["owner/repo/other.json"] = []byte(`{"a": 2}`)
	h.gitFiles["owner/repo/other.json"] = true
	// A stale partial file with other leading bytes: the blob id over the
	// whole file no longer matches.
	o2 := opts(t, srv)
	os.WriteFile(filepath.Join(o2.Dir, "other.json"+PartialSuffix), []byte(`{"b"`), 0o644)
	if _, err := Pull(context.Background(), "owner/repo/other.json", o2); err == nil || !strings.Contains(err.Error(), "git blob SHA-1") {
		t.Fatalf("corrupted git blob: %v", err)
	}
}
