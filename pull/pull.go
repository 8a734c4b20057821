// Package pull downloads a model file from a Hugging Face-style host into a
// local folder: resumable (an interrupted download continues with an HTTP
// Range request, in the same run after a dropped connection or in the next
// run), written under a temporary name and renamed only once complete, and
// checked against the checksum the host publishes for the file (the LFS
// object id, a SHA-256, which Hugging Face sends as X-Linked-Etag).
//
// The URL scheme is Hugging Face's: ENDPOINT/OWNER/REPO/resolve/REVISION/PATH.
// The resolve URL answers with a redirect to the file's storage, carrying the
// file's metadata in headers:
//
//	X-Linked-Etag  "<sha256 hex>"  the LFS object id (a plain ETag for files
//	                               kept in git: the git blob SHA-1)
//	X-Linked-Size  <bytes>         the file's size (else Content-Length)
//	X-Repo-Commit  <commit>        the revision resolved
package pull

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seamlm/seam/internal/lockfile"
)

// DefaultEndpoint is the host REPO/FILE references resolve against.
const DefaultEndpoint = "https://huggingface.co"

// EndpointEnv names the environment variable that overrides DefaultEndpoint,
// as for Hugging Face's own tools (a mirror, or a test server).
const EndpointEnv = "HF_ENDPOINT"

// TokenEnv names the environment variable holding an access token for gated
// or private repositories; it is sent only to the endpoint's host.
const TokenEnv = "HF_TOKEN"

// PartialSuffix is appended to the file name while it downloads.
const PartialSuffix = ".partial"

// Options control a download.
type Options struct {
	Dir      string // folder to write into (created if missing); default "."
	Endpoint string // default $HF_ENDPOINT, else DefaultEndpoint
	Revision string // branch, tag or commit for REPO/FILE references; default "main"
	Token    string // bearer token for the endpoint's host; default $HF_TOKEN
	// SHA256, when set, is the checksum the file must have, whatever the
	// host publishes (both are checked when both exist).
	SHA256 string
	Client *http.Client // default: http.DefaultClient's transport, no overall timeout
	// Retries is how many times a dropped connection is resumed within this
	// run before giving up (the partial file stays for the next run).
	Retries int
	// RetryWait is the pause before the first retry; it doubles each time.
	RetryWait time.Duration
	// Progress, when set, is called as bytes arrive with the bytes on disk
	// and the file's size (-1 when the host did not say).
	Progress func(done, total int64)
	Logger   *slog.Logger
}

// Source is a resolved reference.
type Source struct {
	URL  string // what is requested
	Name string // the local file name: the reference's last path element
}

// Result describes a finished download.
type Result struct {
	Path       string
	Size       int64
	SHA256     string // hex, computed over the whole file
	Published  string // the checksum the host published ("" when none)
	Algorithm  string // of Published: "sha256", or "git-sha1" for a file kept in git
	Resumed    int64  // bytes that were already on disk when this run started
	Reconnects int    // dropped connections resumed within this run
	Existing   bool   // the file was already complete; nothing was downloaded
}

// Resolve turns a reference into a URL: an http(s) URL is used as given (a
// Hugging Face page URL, .../blob/REV/FILE, becomes its .../resolve/REV/FILE
// download URL), and OWNER/REPO/PATH becomes ENDPOINT/OWNER/REPO/resolve/REVISION/PATH.
func Resolve(ref, endpoint, revision string) (Source, error) {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	if revision == "" {
		revision = "main"
	}
	if strings.HasPrefix(ref, "http://") || strings.HasPrefix(ref, "https://") {
		u, err := url.Parse(ref)
		if err != nil || u.Host == "" {
			return Source{}, fmt.Errorf("%q is not a usable URL: %v", ref, err)
		}
		if parts := strings.SplitN(strings.TrimPrefix(u.Path, "/"), "/", 4); len(parts) == 4 && parts[2] == "blob" {
			u.Path = "/" + strings.Join([]string{parts[0], parts[1], "resolve", parts[3]}, "/")
		}
		name := path.Base(u.Path)
		if name == "/" || name == "." || name == "" {
			return Source{}, fmt.Errorf("%q names no file", ref)
		}
		return Source{URL: u.String(), Name: name}, nil
	}
	parts := strings.Split(ref, "/")
	if len(parts) < 3 {
		return Source{}, fmt.Errorf("%q: want a URL, or OWNER/REPO/FILE such as ggml-org/tiny-llamas/stories260K.gguf", ref)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return Source{}, fmt.Errorf("%q: empty, . or .. path element", ref)
		}
	}
	base, err := url.Parse(strings.TrimSuffix(endpoint, "/"))
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") {
		return Source{}, fmt.Errorf("endpoint %q is not an http(s) URL", endpoint)
	}
	u := *base
	u.Path = base.Path + "/" + parts[0] + "/" + parts[1] + "/resolve/" + revision + "/" + strings.Join(parts[2:], "/")
	return Source{URL: u.String(), Name: parts[len(parts)-1]}, nil
}

// ChecksumError reports a download whose bytes do not hash to what was
// published. The partial file has been removed.
type ChecksumError struct {
	File      string
	Algorithm string
	Want, Got string
	Source    string // who published Want: the host's header, or --sha256
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s: checksum mismatch: %s of the downloaded bytes is %s, but %s publishes %s; the download was removed (run again to download afresh)",
		e.File, e.Algorithm, e.Got, e.Source, e.Want)
}

// Pull downloads ref into opts.Dir. Cancelling ctx stops it, keeping the
// partial file for a later run to resume.
func Pull(ctx context.Context, ref string, opts Options) (*Result, error) {
	opts = withDefaults(opts)
	src, err := Resolve(ref, opts.Endpoint, opts.Revision)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	d := &download{opts: opts, src: src, log: opts.Logger.With("stage", "pull", "session", 0, "file", src.Name),
		final: filepath.Join(opts.Dir, src.Name)}
	d.partial = d.final + PartialSuffix
	return d.run(ctx)
}

func withDefaults(o Options) Options {
	if o.Dir == "" {
		o.Dir = "."
	}
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv(EndpointEnv)
	}
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	if o.Token == "" {
		o.Token = os.Getenv(TokenEnv)
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.RetryWait <= 0 {
		o.RetryWait = time.Second
	}
	if o.Retries < 0 {
		o.Retries = 0
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.SHA256 = strings.ToLower(strings.TrimSpace(o.SHA256))
	return o
}

// meta is what the host says about the file before sending it.
type meta struct {
	location  string // where the bytes are (the redirect target, or the URL)
	size      int64  // -1 when unknown
	published string // checksum hex from X-Linked-Etag / ETag
	algorithm string // "sha256" or "git-sha1"
	commit    string
}

type download struct {
	opts           Options
	src            Source
	log            *slog.Logger
	final, partial string
	meta           meta
}

func (d *download) run(ctx context.Context) (*Result, error) {
	if err := d.head(ctx); err != nil {
		return nil, err
	}
	if d.opts.SHA256 != "" && !isHex(d.opts.SHA256, 64) {
		return nil, fmt.Errorf("--sha256 %q: want 64 hexadecimal digits", d.opts.SHA256)
	}
	if _, err := os.Stat(d.final); err == nil {
		return d.existing()
	}
	f, err := os.OpenFile(d.partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := lockfile.Lock(f); err != nil {
		return nil, fmt.Errorf("%s: another seam pull is writing it: %w", d.partial, err)
	}
	res := &Result{Path: d.final, Published: d.meta.published, Algorithm: d.meta.algorithm}
	sha, git, err := d.rehash(f, res)
	if err != nil {
		return nil, err
	}
	if err := d.fetch(ctx, f, sha, git, res); err != nil {
		return nil, err
	}
	if err := d.check(sha, git, res); err != nil {
		f.Close()
		os.Remove(d.partial)
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(d.partial, d.final); err != nil {
		return nil, err
	}
	d.log.Info("downloaded", "path", d.final, "bytes", res.Size, "sha256", res.SHA256, "resumed_from", res.Resumed, "reconnects", res.Reconnects)
	return res, nil
}

// head asks for the file's metadata without following the redirect, whose
// headers carry the LFS object id.
func (d *download) head(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, d.src.URL, nil)
	if err != nil {
		return err
	}
	d.authorize(req)
	c := *d.opts.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", d.src.URL, err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: %s: the repository is gated or private: accept its terms on the model page and set %s to an access token", d.src.URL, resp.Status, TokenEnv)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %s: no such repository, revision or file (check the spelling; file names are case-sensitive)", d.src.URL, resp.Status)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		loc, err := resp.Location()
		if err != nil {
			return fmt.Errorf("%s: %s without a usable Location: %v", d.src.URL, resp.Status, err)
		}
		d.meta.location = loc.String()
	case resp.StatusCode == http.StatusOK:
		d.meta.location = d.src.URL
	default:
		return fmt.Errorf("%s: %s", d.src.URL, resp.Status)
	}
	h := resp.Header
	d.meta.size = -1
	for _, k := range []string{"X-Linked-Size", "Content-Length"} {
		if v := h.Get(k); v != "" {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				d.meta.size = n
				break
			}
		}
	}
	if resp.StatusCode != http.StatusOK && h.Get("X-Linked-Size") == "" {
		d.meta.size = -1 // a redirect's Content-Length is its own body's
	}
	etag := h.Get("X-Linked-Etag")
	if etag == "" {
		etag = h.Get("ETag")
	}
	switch v := strings.ToLower(strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)); {
	case isHex(v, 64):
		d.meta.published, d.meta.algorithm = v, "sha256"
	case isHex(v, 40):
		d.meta.published, d.meta.algorithm = v, "git-sha1"
	}
	d.meta.commit = h.Get("X-Repo-Commit")
	d.log.Info("resolved", "url", d.src.URL, "location", d.meta.location, "size", d.meta.size,
		"checksum", d.meta.published, "algorithm", d.meta.algorithm, "commit", d.meta.commit)
	return nil
}

func (d *download) authorize(req *http.Request) {
	if d.opts.Token == "" {
		return
	}
	if u, err := url.Parse(d.src.URL); err == nil && u.Host == req.URL.Host {
		req.Header.Set("Authorization", "Bearer "+d.opts.Token)
	}
}

// existing checks a file already in place instead of downloading it again.
func (d *download) existing() (*Result, error) {
	f, err := os.Open(d.final)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := &Result{Path: d.final, Published: d.meta.published, Algorithm: d.meta.algorithm, Existing: true}
	sha, git, err := d.rehash(f, res)
	if err != nil {
		return nil, err
	}
	if err := d.check(sha, git, res); err != nil {
		var ce *ChecksumError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("%s exists but does not match: %s of it is %s, %s publishes %s; remove it to download again",
				d.final, ce.Algorithm, ce.Got, ce.Source, ce.Want)
		}
		return nil, err
	}
	return res, nil
}

// rehash hashes what is already on disk, so that a resumed download is
// checked over all its bytes, and positions f at its end.
func (d *download) rehash(f *os.File, res *Result) (hash.Hash, hash.Hash, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	n := st.Size()
	if d.meta.size >= 0 && n > d.meta.size {
		// Longer than the file: not a prefix of it. Start over.
		if err := f.Truncate(0); err != nil {
			return nil, nil, err
		}
		n = 0
	}
	sha := sha256.New()
	var git hash.Hash
	if d.meta.algorithm == "git-sha1" && d.meta.size >= 0 {
		git = sha1.New()
		fmt.Fprintf(git, "blob %d\x00", d.meta.size)
	}
	w := io.Writer(sha)
	if git != nil {
		w = io.MultiWriter(sha, git)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	if _, err := io.CopyN(w, f, n); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	res.Resumed, res.Size = n, n
	if n > 0 {
		d.log.Info("resuming", "path", f.Name(), "have", n, "of", d.meta.size)
	}
	return sha, git, nil
}

// fetch appends the rest of the file to f, resuming after dropped
// connections up to Retries times.
func (d *download) fetch(ctx context.Context, f *os.File, sha, git hash.Hash, res *Result) error {
	wait := d.opts.RetryWait
	for attempt := 0; ; attempt++ {
		if d.meta.size >= 0 && res.Size == d.meta.size {
			return nil
		}
		done, err := d.fetchOnce(ctx, f, sha, git, res)
		if err == nil && done {
			return nil
		}
		if ctx.Err() != nil {
			return &InterruptedError{Partial: d.partial, Have: res.Size, Size: d.meta.size, Cause: context.Cause(ctx)}
		}
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		var perm *permanentError
		if errors.As(err, &perm) || attempt >= d.opts.Retries {
			return fmt.Errorf("%w (kept %d bytes in %s: run the same command again to resume)", err, res.Size, d.partial)
		}
		d.log.Warn("download interrupted; resuming", "have", res.Size, "of", d.meta.size, "attempt", attempt+1, "of_attempts", d.opts.Retries, "err", err)
		res.Reconnects++
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return &InterruptedError{Partial: d.partial, Have: res.Size, Size: d.meta.size, Cause: context.Cause(ctx)}
		}
		wait *= 2
	}
}

// permanentError is a failure that retrying will not fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// InterruptedError reports a download stopped by its context (a signal).
type InterruptedError struct {
	Partial    string
	Have, Size int64
	Cause      error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("download stopped (%v): kept %d of %d bytes in %s; run the same command again to resume", e.Cause, e.Have, e.Size, e.Partial)
}

func (e *InterruptedError) Unwrap() error { return e.Cause }

// fetchOnce makes one GET from res.Size on and appends what arrives. It
// reports done when the body ended where the file ends.
func (d *download) fetchOnce(ctx context.Context, f *os.File, sha, git hash.Hash, res *Result) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.meta.location, nil)
	if err != nil {
		return false, &permanentError{err}
	}
	d.authorize(req)
	if res.Size > 0 {
		// No If-Range: the storage a resolve URL redirects to has ETags of
		// its own. A changed file shows in Content-Range's size, and any
		// other difference in the checksum over all the bytes.
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", res.Size))
	}
	resp, err := d.opts.Client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if res.Size > 0 { // the host ignored the range, or the file changed: start over
			d.log.Warn("host sent the whole file instead of the rest; starting over", "had", res.Size)
			if err := restart(f, sha, git, d.meta.size); err != nil {
				return false, &permanentError{err}
			}
			res.Size, res.Resumed = 0, 0
		}
	case http.StatusPartialContent:
		if err := checkContentRange(resp.Header.Get("Content-Range"), res.Size, d.meta.size); err != nil {
			return false, &permanentError{fmt.Errorf("%s: %w", d.meta.location, err)}
		}
	case http.StatusRequestedRangeNotSatisfiable:
		return false, &permanentError{fmt.Errorf("%s: the host refuses the range from byte %d (%s): remove %s to start over", d.meta.location, res.Size, resp.Status, d.partial)}
	default:
		err := fmt.Errorf("%s: %s", d.meta.location, resp.Status)
		if resp.StatusCode < 500 {
			return false, &permanentError{err}
		}
		return false, err
	}
	if d.meta.size < 0 && resp.ContentLength >= 0 && resp.StatusCode == http.StatusOK {
		d.meta.size = resp.ContentLength
	}
	w := io.Writer(sha)
	if git != nil {
		w = io.MultiWriter(sha, git)
	}
	buf := make([]byte, 256<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if d.meta.size >= 0 && res.Size+int64(n) > d.meta.size {
				return false, &permanentError{fmt.Errorf("%s: the host sent more than the %d bytes it announced", d.meta.location, d.meta.size)}
			}
			if _, err := f.Write(buf[:n]); err != nil {
				return false, &permanentError{fmt.Errorf("writing %s: %w", d.partial, err)}
			}
			w.Write(buf[:n])
			res.Size += int64(n)
			if d.opts.Progress != nil {
				d.opts.Progress(res.Size, d.meta.size)
			}
			// A body already buffered keeps reading after the context is
			// cancelled; stop at the chunk boundary so that an interrupt
			// stops the download at once, whatever the link's speed.
			if err := ctx.Err(); err != nil {
				return false, err
			}
		}
		if rerr == io.EOF {
			return d.meta.size < 0 || res.Size == d.meta.size, nil
		}
		if rerr != nil {
			return false, rerr
		}
	}
}

// restart empties the partial file and the hashes.
func restart(f *os.File, sha, git hash.Hash, size int64) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	sha.Reset()
	if git != nil {
		git.Reset()
		fmt.Fprintf(git, "blob %d\x00", size)
	}
	return nil
}

// checkContentRange requires a 206 to continue exactly where the file ends.
func checkContentRange(v string, from, size int64) error {
	var a, b int64
	var total string
	if _, err := fmt.Sscanf(v, "bytes %d-%d/%s", &a, &b, &total); err != nil {
		return fmt.Errorf("Content-Range %q is not bytes A-B/N", v)
	}
	if a != from {
		return fmt.Errorf("asked for the bytes from %d, the host sent them from %d (Content-Range %q)", from, a, v)
	}
	if size >= 0 && total != "*" && total != strconv.FormatInt(size, 10) {
		return fmt.Errorf("Content-Range %q gives a size other than the announced %d: the file changed; remove the partial file to start over", v, size)
	}
	return nil
}

// check compares the finished bytes with the published checksum and --sha256.
func (d *download) check(sha, git hash.Hash, res *Result) error {
	if d.meta.size >= 0 && res.Size != d.meta.size {
		return fmt.Errorf("%s: %d bytes, the host announced %d", d.partial, res.Size, d.meta.size)
	}
	res.SHA256 = hex.EncodeToString(sha.Sum(nil))
	if d.opts.SHA256 != "" && res.SHA256 != d.opts.SHA256 {
		return &ChecksumError{File: d.src.Name, Algorithm: "sha256", Want: d.opts.SHA256, Got: res.SHA256, Source: "--sha256"}
	}
	switch d.meta.algorithm {
	case "sha256":
		if res.SHA256 != d.meta.published {
			return &ChecksumError{File: d.src.Name, Algorithm: "sha256", Want: d.meta.published, Got: res.SHA256, Source: "the host (X-Linked-Etag)"}
		}
	case "git-sha1":
		if git == nil {
			return fmt.Errorf("%s: the host published a git blob id but no size to check it with", d.src.Name)
		}
		if got := hex.EncodeToString(git.Sum(nil)); got != d.meta.published {
			return &ChecksumError{File: d.src.Name, Algorithm: "git blob SHA-1", Want: d.meta.published, Got: got, Source: "the host (ETag)"}
		}
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
