package container

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/zeebo/blake3"
)

// codecFileName names a codec file after its boundary and digest, so that
// replacing a codec writes a new file and the index never points at a file
// that is being overwritten.
func codecFileName(boundary int, digest [32]byte) string {
	return fmt.Sprintf("codec-%03d-%x.bin", boundary, digest[:8])
}

// Codecs lists the attached boundary codecs, by boundary.
func (c *Container) Codecs() []CodecInfo { return slices.Clone(c.l.codecs) }

// Codec returns the codec bytes attached at boundary (activations entering
// layer boundary), after checking their size and BLAKE3 digest against the
// index. The bytes are opaque here.
func (c *Container) Codec(boundary int) ([]byte, error) {
	for _, ci := range c.l.codecs {
		if ci.Boundary != boundary {
			continue
		}
		path := filepath.Join(c.dir, ci.File)
		data, err := readBounded(path, ci.Size)
		if err != nil {
			return nil, fmt.Errorf("codec at boundary %d: %w", boundary, err)
		}
		if got := blake3.Sum256(data); got != ci.Digest {
			return nil, fmt.Errorf("%s: blake3 %x, the index says %x", path, got, ci.Digest)
		}
		return data, nil
	}
	return nil, fmt.Errorf("%s: boundary %d: %w", c.dir, boundary, ErrNoCodec)
}

// AddCodec attaches codec bytes at boundary b in [1, n_layers): it writes the
// codec file atomically, then rewrites the index atomically with the entry
// (replacing any earlier codec at b, whose file is removed afterwards).
// digest must be the BLAKE3-256 of codecBytes. Not safe to run concurrently
// with another AddCodec on the same directory.
func AddCodec(dir string, boundary int, codecBytes []byte, digest [32]byte) error {
	ix, l, err := loadIndex(dir)
	if err != nil {
		return err
	}
	if n := l.cfg.NLayers; boundary < 1 || boundary >= n {
		return fmt.Errorf("add codec: boundary %d outside [1, %d): a boundary is the first layer of a later stage", boundary, n)
	}
	if len(codecBytes) == 0 || len(codecBytes) > maxCodecBytes {
		return fmt.Errorf("add codec: %d bytes, want 1..%d", len(codecBytes), maxCodecBytes)
	}
	if got := blake3.Sum256(codecBytes); got != digest {
		return fmt.Errorf("add codec: bytes hash to %x, caller's digest is %x", got, digest)
	}
	entry := codecEntry{Boundary: boundary, File: codecFileName(boundary, digest), Size: int64(len(codecBytes)), BLAKE3: hexDigest(digest)}
	old := ""
	ix.Codecs = slices.DeleteFunc(ix.Codecs, func(e codecEntry) bool {
		if e.Boundary == boundary {
			old = e.File
		}
		return e.Boundary == boundary
	})
	ix.Codecs = append(ix.Codecs, entry)
	slices.SortFunc(ix.Codecs, func(x, y codecEntry) int { return x.Boundary - y.Boundary })
	if err := writeFileAtomic(dir, entry.File, codecBytes); err != nil {
		return fmt.Errorf("add codec: %w", err)
	}
	if err := writeIndex(dir, ix); err != nil {
		return fmt.Errorf("add codec: %w", err)
	}
	if old != "" && old != entry.File {
		if err := removeIfExists(filepath.Join(dir, old)); err != nil {
			return fmt.Errorf("add codec: index updated, but the replaced codec file remains: %w", err)
		}
	}
	return nil
}
