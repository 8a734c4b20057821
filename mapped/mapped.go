// Package mapped opens files read-only through mmap, so that model readers hand
// out views into the page cache instead of copying weights into the heap.
package mapped

import (
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	mmap "github.com/edsrzf/mmap-go"
)

// File is a read-only memory-mapped file. Slices from Bytes are valid until Close.
type File struct {
	path string
	m    mmap.MMap
	st   os.FileInfo // at Open: Changed compares the file with it
}

// Open maps the whole of path read-only. An empty file maps to an empty slice.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, not a file", path)
	}
	if st.Size() == 0 {
		return &File{path: path}, nil
	}
	m, err := mmap.Map(f, mmap.RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	mf := &File{path: path, m: m, st: st}
	live.add(mf)
	return mf, nil
}

// Bytes returns the mapped contents.
func (f *File) Bytes() []byte { return f.m }

// Path is the file name given to Open.
func (f *File) Path() string { return f.path }

// Close unmaps the file. Slices obtained from Bytes must not be used afterwards.
func (f *File) Close() error {
	if f == nil || f.m == nil {
		return nil
	}
	live.remove(f)
	err := f.m.Unmap()
	f.m = nil
	return err
}

// Changed returns an error naming the file when the file at the mapping's
// path is no longer the one mapped as it was: removed, replaced by another
// file, grown or shrunk, or written to (its modification time moved), nil
// while it is unchanged. A write that keeps the length faults nothing and
// changes the weights in place; this is how it is noticed.
func (f *File) Changed() error {
	if f == nil || f.st == nil {
		return nil
	}
	now, err := os.Stat(f.path)
	switch {
	case err != nil:
		return fmt.Errorf("%s, mapped, is gone: %w", f.path, err)
	case !os.SameFile(f.st, now):
		return fmt.Errorf("%s was replaced by another file while mapped", f.path)
	case now.Size() != f.st.Size():
		return fmt.Errorf("%s changed size while mapped: %d bytes, was %d", f.path, now.Size(), f.st.Size())
	case !now.ModTime().Equal(f.st.ModTime()):
		return fmt.Errorf("%s was written to while mapped (modified %s, was %s)", f.path, now.ModTime().Format(time.RFC3339Nano), f.st.ModTime().Format(time.RFC3339Nano))
	}
	return nil
}

// Changed checks every file this process has mapped (File.Changed) and
// returns the first change, nil when none changed. A stage maps only its
// own range's files, so this watches exactly its weights.
func Changed() error {
	live.mu.Lock()
	files := make([]*File, 0, len(live.files))
	for f := range live.files {
		files = append(files, f)
	}
	live.mu.Unlock()
	for _, f := range files {
		if err := f.Changed(); err != nil {
			return err
		}
	}
	return nil
}

// live is every open mapping, so that a fault address can be named by its
// file and offset (see Guard).
var live = mappings{files: map[*File]struct{}{}}

type mappings struct {
	mu    sync.Mutex
	files map[*File]struct{}
}

func (l *mappings) add(f *File) {
	l.mu.Lock()
	l.files[f] = struct{}{}
	l.mu.Unlock()
}

func (l *mappings) remove(f *File) {
	l.mu.Lock()
	delete(l.files, f)
	l.mu.Unlock()
}

// at returns the file mapped at addr and the offset of addr in it.
func (l *mappings) at(addr uintptr) (path string, off int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for f := range l.files {
		start := uintptr(unsafe.Pointer(unsafe.SliceData(f.m)))
		if addr >= start && addr-start < uintptr(len(f.m)) {
			return f.path, int64(addr - start), true
		}
	}
	return "", 0, false
}
