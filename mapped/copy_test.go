package mapped

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// A Copy holds the bytes of the mapped slice it was made from, page
// aligned, after those pages are released; an empty slice copies to an
// empty Copy.
func TestCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 3*os.Getpagesize()+100)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := NewCopy(f.Bytes()[28:])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.Bytes(), data[28:]) {
		t.Fatal("the copy differs from the file")
	}
	if a := uintptr(unsafe.Pointer(&c.Bytes()[0])) % uintptr(os.Getpagesize()); a != 0 {
		t.Fatalf("the copy starts %d bytes past a page", a)
	}
	if !bytes.Equal(f.Bytes(), data) {
		t.Fatal("the mapping reads differently after its pages were released")
	}
	if err := c.Close(); err != nil || c.Bytes() != nil {
		t.Fatalf("Close: %v, bytes %d", err, len(c.Bytes()))
	}
	e, err := NewCopy(nil)
	if err != nil || len(e.Bytes()) != 0 || e.Close() != nil {
		t.Fatalf("empty copy: %v", err)
	}
}
