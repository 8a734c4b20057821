// Package mapped opens files read-only through mmap, so that model readers hand
// out views into the page cache instead of copying weights into the heap.
package mapped

import (
	"fmt"
	"os"

	mmap "github.com/edsrzf/mmap-go"
)

// File is a read-only memory-mapped file. Slices from Bytes are valid until Close.
type File struct {
	path string
	m    mmap.MMap
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
	return &File{path: path, m: m}, nil
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
	err := f.m.Unmap()
	f.m = nil
	return err
}
