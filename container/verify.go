package container

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/zeebo/blake3"

	"github.com/seamlm/seam/model"
)

// Report summarises a successful Verify.
type Report struct {
	Generation int
	Config     model.Config
	Identity   [32]byte
	Segments   int
	Regions    int
	Bytes      int64 // region bytes hashed
	Tokenizer  bool  // a tokenizer was present and checked
	Codecs     int   // codec files checked
}

// RegionError names the region where verification failed.
type RegionError struct {
	Segment string // segment name, e.g. "layer-002"
	Region  string // region name, e.g. "blk.2.attn_q.weight"
	Err     error
}

func (e *RegionError) Error() string {
	return fmt.Sprintf("segment %s, region %q: %v", e.Segment, e.Region, e.Err)
}

func (e *RegionError) Unwrap() error { return e.Err }

// Verify checks a container completely: the index (generation, digest,
// structure), then every segment file's size, header, zero padding and every
// region's checksum, streamed through one buffer, then the tokenizer and
// codec files. The first failure is returned; region failures as *RegionError.
func Verify(dir string) (*Report, error) {
	c, err := Open(dir)
	if err != nil {
		return nil, err
	}
	return c.Verify()
}

// Verify checks the container's files against its index; see Verify.
func (c *Container) Verify() (*Report, error) { return c.VerifyProgress(nil) }

// VerifyProgress is Verify, calling progress (when not nil) after each
// region with the region bytes hashed so far and in all: a large model takes
// minutes to hash.
func (c *Container) VerifyProgress(progress func(done, total int64)) (*Report, error) {
	rep := &Report{Generation: c.l.generation, Config: c.l.cfg, Identity: c.l.identity, Segments: len(c.l.segments)}
	buf := make([]byte, defaultBufferSize)
	var total int64
	for _, s := range c.l.segments {
		for _, r := range s.Regions {
			total += r.Length
		}
	}
	// rep.Bytes counts the segments already done; inSegment the current one.
	tick := func(inSegment int64) {
		if progress != nil {
			progress(rep.Bytes+inSegment, total)
		}
	}
	for _, s := range c.l.segments {
		n, err := c.verifySegment(s, buf, tick)
		if err != nil {
			return nil, err
		}
		rep.Regions += len(s.Regions)
		rep.Bytes += n
	}
	if rep.Regions == 0 {
		return nil, fmt.Errorf("%s: nothing to verify: the index lists no regions", c.dir)
	}
	if c.HasTokenizer() {
		if _, err := c.Tokenizer(); err != nil {
			return nil, err
		}
		rep.Tokenizer = true
	}
	for _, ci := range c.l.codecs {
		if _, err := c.Codec(ci.Boundary); err != nil {
			return nil, err
		}
		rep.Codecs++
	}
	return rep, nil
}

// verifySegment reads one segment file front to back and returns the number
// of region bytes hashed.
func (c *Container) verifySegment(s Segment, buf []byte, tick func(hashedInSegment int64)) (int64, error) {
	path := filepath.Join(c.dir, s.File)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("segment %s: %w", s.Name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("segment %s: %w", s.Name, err)
	}
	if st.Size() != s.Size {
		return 0, fmt.Errorf("%s: %d bytes, the index declares %d (truncated or replaced?)", path, st.Size(), s.Size)
	}
	header := buf[:SegmentHeaderLen]
	if _, err := io.ReadFull(f, header); err != nil {
		return 0, fmt.Errorf("%s: header: %w", path, err)
	}
	if err := checkHeader(header, c.l.generation, path, s.Name, c.l.importID); err != nil {
		return 0, err
	}
	pos, hashed := int64(SegmentHeaderLen), int64(0)
	for _, r := range s.Regions {
		if err := expectZeros(f, r.Offset-pos, buf); err != nil {
			return 0, &RegionError{Segment: s.Name, Region: r.Name, Err: fmt.Errorf("padding before offset %d: %w", r.Offset, err)}
		}
		h := blake3.New()
		if _, err := io.CopyBuffer(h, io.LimitReader(f, r.Length), buf); err != nil {
			return 0, &RegionError{Segment: s.Name, Region: r.Name, Err: fmt.Errorf("read: %w", err)}
		}
		var got [32]byte
		h.Sum(got[:0])
		if got != r.Checksum {
			return 0, &RegionError{Segment: s.Name, Region: r.Name,
				Err: fmt.Errorf("blake3 of its %d bytes at offset %d is %x, the index says %x", r.Length, r.Offset, got, r.Checksum)}
		}
		pos = r.Offset + r.Length
		hashed += r.Length
		tick(hashed)
	}
	return hashed, nil
}

// expectZeros reads n bytes and requires them to be zero: padding carries no
// data, so a changed padding byte is corruption too.
func expectZeros(r io.Reader, n int64, buf []byte) error {
	for done := int64(0); done < n; {
		chunk := min(int64(len(buf)), n-done)
		if _, err := io.ReadFull(r, buf[:chunk]); err != nil {
			return err
		}
		for i, b := range buf[:chunk] {
			if b != 0 {
				return fmt.Errorf("byte %d of the padding is %#02x, want 0", done+int64(i), b)
			}
		}
		done += chunk
	}
	return nil
}
