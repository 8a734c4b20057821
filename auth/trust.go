package auth

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Trust is the set of keys a node accepts as peers, each with the name the
// trust file gives it (the text after the fingerprint, for logs).
type Trust struct {
	names map[string]string
	path  string
}

// Limits on a trust file: it is read from disk, but may be written by a
// tool or copied from elsewhere, so it is parsed like any untrusted input.
const (
	maxTrustFile    = 1 << 20
	maxTrustEntries = 4096
	maxTrustLine    = 1024
)

// NewTrust returns a trust set of the given fingerprints (no names).
func NewTrust(fingerprints ...string) (*Trust, error) {
	t := &Trust{names: map[string]string{}, path: "(built in)"}
	for _, fp := range fingerprints {
		if _, err := ParseFingerprint(fp); err != nil {
			return nil, err
		}
		t.names[fp] = ""
	}
	return t, nil
}

// LoadTrustFile reads a trust file.
func LoadTrustFile(path string) (*Trust, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTrustFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return ParseTrust(data, path)
}

// ParseTrust reads a trust file's contents. Each line is blank, a comment
// starting with '#', or a fingerprint optionally followed by whitespace and
// a name. Anything else is an error naming the line: a typo must not
// silently leave a peer locked out (or, worse, be mistaken for a key).
func ParseTrust(data []byte, path string) (*Trust, error) {
	if len(data) > maxTrustFile {
		return nil, fmt.Errorf("trust file %s is over %d bytes", path, maxTrustFile)
	}
	t := &Trust{names: map[string]string{}, path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 256), maxTrustLine)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fp, name := line, ""
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			fp, name = line[:i], line[i:]
		}
		if _, err := ParseFingerprint(fp); err != nil {
			return nil, fmt.Errorf("trust file %s line %d: %w", path, n, err)
		}
		if _, dup := t.names[fp]; dup {
			return nil, fmt.Errorf("trust file %s line %d: %s is listed twice", path, n, fp)
		}
		if len(t.names) >= maxTrustEntries {
			return nil, fmt.Errorf("trust file %s: more than %d keys", path, maxTrustEntries)
		}
		t.names[fp] = strings.TrimSpace(name)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trust file %s: %w (lines are at most %d bytes)", path, err, maxTrustLine)
	}
	return t, nil
}

// Allows reports whether fp is trusted, and the name the file gives it.
func (t *Trust) Allows(fp string) (name string, ok bool) {
	name, ok = t.names[fp]
	return name, ok
}

// Len is the number of trusted keys.
func (t *Trust) Len() int { return len(t.names) }

// Path is the file the set was read from, for messages.
func (t *Trust) Path() string { return t.path }

// Fingerprints lists the trusted keys, sorted.
func (t *Trust) Fingerprints() []string {
	out := make([]string, 0, len(t.names))
	for fp := range t.names {
		out = append(out, fp)
	}
	sort.Strings(out)
	return out
}
