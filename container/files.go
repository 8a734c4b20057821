package container

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// Segment header: the first SegmentHeaderLen bytes of every segment file.
//
//	0   8  magic "SEAM-SEG"
//	8   4  generation, u32 little-endian
//	12  4  header length (64), u32 little-endian
//	16 16  import id (the index's import_id)
//	32 32  segment name, ASCII, zero-padded
//
// It lets a stage that maps a segment (and does not hash it: that is Verify's
// job) refuse a file from another generation or another import cheaply.
const segmentMagic = "SEAM-SEG"

func encodeHeader(gen int, name string, importID [16]byte) []byte {
	h := make([]byte, SegmentHeaderLen)
	copy(h, segmentMagic)
	binary.LittleEndian.PutUint32(h[8:], uint32(gen))
	binary.LittleEndian.PutUint32(h[12:], SegmentHeaderLen)
	copy(h[16:32], importID[:])
	copy(h[32:], name)
	return h
}

// checkHeader validates the header at the start of data, a segment file.
func checkHeader(data []byte, gen int, file, name string, importID [16]byte) error {
	if len(data) < SegmentHeaderLen {
		return fmt.Errorf("%s: %d bytes, shorter than the %d-byte segment header", file, len(data), SegmentHeaderLen)
	}
	if string(data[:8]) != segmentMagic {
		return fmt.Errorf("%s: magic %q, want %q: not a Seam segment", file, data[:8], segmentMagic)
	}
	if g := binary.LittleEndian.Uint32(data[8:]); g != uint32(gen) {
		return fmt.Errorf("%s: segment of generation %d in a generation %d container", file, g, gen)
	}
	if n := binary.LittleEndian.Uint32(data[12:]); n != SegmentHeaderLen {
		return fmt.Errorf("%s: header length %d, want %d", file, n, SegmentHeaderLen)
	}
	if !bytes.Equal(data[16:32], importID[:]) {
		return fmt.Errorf("%s: import id %x, the index's is %x: the file belongs to another import", file, data[16:32], importID[:])
	}
	var want [32]byte
	if len(name) > len(want) {
		return fmt.Errorf("%s: segment name %q is longer than %d bytes", file, name, len(want))
	}
	copy(want[:], name)
	if !bytes.Equal(data[32:64], want[:]) {
		return fmt.Errorf("%s: header names segment %q, want %q", file, bytes.TrimRight(data[32:64], "\x00"), name)
	}
	return nil
}

// writeFileAtomic makes dir/name hold data, or leave it as it was: it writes
// a temporary file, syncs it, renames it over name, then syncs the directory
// so that the rename itself survives a crash.
func writeFileAtomic(dir, name string, data []byte) (err error) {
	final := filepath.Join(dir, name)
	tmp := final + tempExt
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", final, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, final); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(dir)
}

// syncDir makes the directory's entries (renames, creations) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// readBounded reads a whole small file whose size the index declares,
// refusing any other size before reading it.
func readBounded(path string, declared int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Size() != declared {
		return nil, fmt.Errorf("%s: %d bytes, the index declares %d", path, st.Size(), declared)
	}
	data := make([]byte, declared)
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}
