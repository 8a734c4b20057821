package mapped

import (
	"fmt"

	mmap "github.com/edsrzf/mmap-go"
)

// Copy holds a copy of part of a mapped file in anonymous, page-aligned
// memory: for data that the kernels read faster from an aligned address
// than from where its file puts it. The memory is outside the Go heap, so
// the garbage collector neither scans it nor counts it when it paces
// itself (a heap copy of a model's weights would let garbage grow to the
// model's size before a collection).
type Copy struct {
	m mmap.MMap
}

// NewCopy copies b into new memory and releases b's pages (see Release), so
// that the process does not hold both.
func NewCopy(b []byte) (*Copy, error) {
	if len(b) == 0 {
		return &Copy{}, nil
	}
	m, err := mmap.MapRegion(nil, len(b), mmap.RDWR, mmap.ANON, 0)
	if err != nil {
		return nil, fmt.Errorf("anonymous mapping of %d bytes: %w", len(b), err)
	}
	copy(m, b)
	Release(b)
	return &Copy{m: m}, nil
}

// Bytes returns the copy, valid until Close.
func (c *Copy) Bytes() []byte { return c.m }

// Close frees the copy. Slices from Bytes must not be used afterwards.
func (c *Copy) Close() error {
	if c == nil || c.m == nil {
		return nil
	}
	err := c.m.Unmap()
	c.m = nil
	return err
}
