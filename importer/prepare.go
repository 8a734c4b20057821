package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/internal/lockfile"
)

// ExistsError refuses an output folder that already holds a complete
// container: replacing it takes Options.Force (--force).
type ExistsError struct{ Dir string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("%s already holds a Seam container: use --force to replace it, or choose another --out", e.Dir)
}

// outDir is the output folder, locked for the import's duration so that two
// imports into one folder refuse each other, and so that what a killed
// import left can be told from a running import's files.
type outDir struct {
	path    string
	lock    *os.File // the folder, held open with an exclusive lock
	emptied bool     // this import removed leftovers: the folder was not the user's empty one
}

// prepare checks and locks dir before an import: a missing or empty folder
// is used as it is; a folder holding only what an interrupted import leaves
// (segments, temporary files, no index) is cleared, saying so; a complete
// container is replaced only with force; a folder holding any other file is
// refused, force or not, naming the file.
func prepare(dir string, force bool, log *slog.Logger) (*outDir, error) {
	o := &outDir{path: dir}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return o, nil // the builder creates it; lockCreated locks it
	}
	if err != nil {
		return nil, fmt.Errorf("--out %s: %w", dir, err)
	}
	if err := o.takeLock(); err != nil {
		return nil, err
	}
	var complete bool
	for _, e := range entries {
		name := e.Name()
		if !ownedName(name) || e.IsDir() {
			o.release()
			return nil, fmt.Errorf("--out %s is not empty and holds %s, which is not a container's file: choose a new or empty folder (--force replaces only a container or an interrupted import)", dir, name)
		}
		complete = complete || name == container.IndexFile
	}
	if complete && !force {
		o.release()
		return nil, &ExistsError{Dir: dir}
	}
	what := "an interrupted import's files"
	if complete {
		what = "the container"
	}
	log.Warn(fmt.Sprintf("removing %s from %s before importing", what, dir), "files", len(entries))
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			o.release()
			return nil, fmt.Errorf("clearing %s: %w", dir, err)
		}
	}
	o.emptied = true
	return o, nil
}

// ownedName reports whether a file name is one a container or its import
// writes: the index, the tokenizer, segments, codecs, and their temporary
// files.
func ownedName(name string) bool {
	name = strings.TrimSuffix(name, ".tmp")
	switch {
	case name == container.IndexFile, name == container.TokenizerFile:
		return true
	case strings.HasSuffix(name, ".seg"):
		return true
	case strings.HasPrefix(name, "codec-") && strings.HasSuffix(name, ".bin"):
		return true
	}
	return false
}

func (o *outDir) takeLock() error {
	f, err := os.Open(o.path)
	if err != nil {
		return fmt.Errorf("--out %s: %w", o.path, err)
	}
	if err := lockfile.Lock(f); err != nil {
		f.Close()
		if errors.Is(err, lockfile.ErrLocked) {
			return fmt.Errorf("--out %s: another seam import is writing into it", o.path)
		}
		return fmt.Errorf("--out %s: lock: %w", o.path, err)
	}
	o.lock = f
	return nil
}

// lockCreated locks a folder the builder has just made or found empty.
func (o *outDir) lockCreated() error {
	if o.lock != nil {
		return nil
	}
	return o.takeLock()
}

func (o *outDir) release() {
	if o.lock != nil {
		o.lock.Close()
		o.lock = nil
	}
}

// failed runs after an aborted import: a folder this import emptied is
// removed when nothing is left in it, so that an interrupted import leaves
// no trace.
func (o *outDir) failed() {
	o.release()
	if o.emptied {
		os.Remove(o.path) // only succeeds when empty
	}
}

// ctxReader stops a tensor's copy as soon as ctx is cancelled: the builder
// reads through it in bounded chunks, so an import stops within one chunk.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(p)
}
