package eval

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/zeebo/blake3"
)

// Capture file, version 1. All integers little-endian unsigned; f32 is IEEE
// binary32 little-endian. s sequences, n rows (tokens), width d.
//
//	offset      size  field
//	0           8     magic "SEAMCAPT"
//	8           4     version (1)
//	12          4     width d, 1..65536
//	16          4     boundary: the rows are hidden states entering this layer, 1..1023
//	20          4     sequences s, 1..n
//	24          8     rows n, >= 1
//	32          32    model identity digest (docs/container.md)
//	64          32    calibration-data digest: BLAKE3-256 of bytes [96, T) (TokensDigest)
//	96          4s    sequence lengths, each >= 1, summing to n
//	96+4s       4n    token ids, each < 2^31; row i is the state at token i
//	T=96+4s+4n  4nd   rows: n x d f32, finite
//	T+4nd       32    BLAKE3-256 of bytes [0, T+4nd)
//
// The token ids make a capture self-contained: a fit can rerun the model on
// the held-out sequences to measure the KL divergence a codec causes.
const (
	captureMagic   = "SEAMCAPT"
	captureVersion = 1
	captureHeader  = 96
	digestSize     = 32
	// MaxCaptureWidth bounds a capture file's width (model.MaxDim).
	MaxCaptureWidth = model.MaxDim
)

// CaptureFile is a capture: the hidden states entering one boundary layer
// for a token stream, with what they were computed from.
type CaptureFile struct {
	Boundary int
	Width    int
	Model    [32]byte  // identity digest of the model that computed the rows
	Seqs     [][]int   // the tokens, one row per token, in order
	Rows     []float32 // N() x Width
}

// N is the number of rows (tokens).
func (c *CaptureFile) N() int { return CountTokens(c.Seqs) }

// CalibDigest is the calibration-data digest of the capture's tokens
// (TokensDigest): codecs fitted on it record it as provenance.
func (c *CaptureFile) CalibDigest() [32]byte { return TokensDigest(c.Seqs) }

// layout computes the section offsets and total size of a capture with s
// sequences, n rows and width d, overflow-checked.
func captureLayout(s, n, d int) (rowsOff, total int, err error) {
	toks, err := tensor.MulSize(s+n, 4) // s <= n, both bounded by the caller
	if err != nil {
		return 0, 0, err
	}
	nd, err := tensor.MulSize(n, d)
	if err != nil {
		return 0, 0, err
	}
	rowBytes, err := tensor.MulSize(nd, 4)
	if err != nil {
		return 0, 0, err
	}
	rowsOff = captureHeader + toks
	if rowBytes > math.MaxInt-rowsOff-digestSize {
		return 0, 0, fmt.Errorf("%d rows of width %d overflow", n, d)
	}
	return rowsOff, rowsOff + rowBytes + digestSize, nil
}

// validate checks a capture before it is written, so that a file this
// package writes is one it reads.
func (c *CaptureFile) validate() error {
	switch {
	case c.Width < 1 || c.Width > MaxCaptureWidth:
		return fmt.Errorf("width %d outside 1..%d", c.Width, MaxCaptureWidth)
	case c.Boundary < 1 || c.Boundary >= model.MaxLayers:
		return fmt.Errorf("boundary %d outside 1..%d", c.Boundary, model.MaxLayers-1)
	case len(c.Seqs) == 0:
		return errors.New("no sequences")
	}
	for i, s := range c.Seqs {
		if len(s) == 0 {
			return fmt.Errorf("sequence %d is empty", i)
		}
		for p, id := range s {
			if id < 0 || id > math.MaxInt32 {
				return fmt.Errorf("sequence %d, position %d: token id %d outside 0..%d", i, p, id, math.MaxInt32)
			}
		}
	}
	n := c.N()
	if want := n * c.Width; len(c.Rows) != want {
		return fmt.Errorf("%d row values for %d tokens of width %d, want %d", len(c.Rows), n, c.Width, want)
	}
	if i := firstNonFinite(c.Rows); i >= 0 {
		return fmt.Errorf("row %d, index %d: value %v is not finite", i/c.Width, i%c.Width, c.Rows[i])
	}
	return nil
}

func firstNonFinite(x []float32) int {
	for i, v := range x {
		if v-v != 0 { // NaN and infinities
			return i
		}
	}
	return -1
}

// WriteTo writes the capture file to w.
func (c *CaptureFile) WriteTo(w io.Writer) (int64, error) {
	if err := c.validate(); err != nil {
		return 0, fmt.Errorf("write capture: %w", err)
	}
	h := blake3.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<16)
	var hdr [captureHeader]byte
	copy(hdr[0:], captureMagic)
	le := binary.LittleEndian
	le.PutUint32(hdr[8:], captureVersion)
	le.PutUint32(hdr[12:], uint32(c.Width))
	le.PutUint32(hdr[16:], uint32(c.Boundary))
	le.PutUint32(hdr[20:], uint32(len(c.Seqs)))
	le.PutUint64(hdr[24:], uint64(c.N()))
	copy(hdr[32:], c.Model[:])
	calib := c.CalibDigest()
	copy(hdr[64:], calib[:])
	bw.Write(hdr[:])
	var b [4]byte
	for _, s := range c.Seqs {
		le.PutUint32(b[:], uint32(len(s)))
		bw.Write(b[:])
	}
	for _, s := range c.Seqs {
		for _, id := range s {
			le.PutUint32(b[:], uint32(id))
			bw.Write(b[:])
		}
	}
	for _, v := range c.Rows {
		le.PutUint32(b[:], math.Float32bits(v))
		bw.Write(b[:])
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("write capture: %w", err)
	}
	var sum [digestSize]byte
	h.Sum(sum[:0])
	if _, err := w.Write(sum[:]); err != nil {
		return 0, fmt.Errorf("write capture: %w", err)
	}
	_, total, _ := captureLayout(len(c.Seqs), c.N(), c.Width)
	return int64(total), nil
}

// WriteFile writes the capture to path through a temporary file renamed into
// place, so that an interrupted write leaves no partial capture.
func (c *CaptureFile) WriteFile(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = c.WriteTo(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ReadCaptureFile reads and validates the capture file at path.
func ReadCaptureFile(path string) (*CaptureFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	c, err := ReadCapture(bufio.NewReaderSize(f, 1<<16), st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// UnmarshalCapture parses and validates a capture file held in memory.
func UnmarshalCapture(b []byte) (*CaptureFile, error) {
	return ReadCapture(bytes.NewReader(b), int64(len(b)))
}

// ReadCapture reads a capture file of exactly size bytes from r. The header
// is checked, and the size it implies compared with size, before anything
// is allocated, so allocations are bounded by the real input. Then the
// digest of the whole file, the sequence lengths, the calibration-data
// digest and the finiteness of every value are checked. Errors name the
// field and the values that disagree.
func ReadCapture(r io.Reader, size int64) (*CaptureFile, error) {
	var hdr [captureHeader]byte
	if size < captureHeader+digestSize {
		return nil, fmt.Errorf("capture: %d bytes, shorter than the %d-byte header and digest", size, captureHeader+digestSize)
	}
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("capture: header: %w", err)
	}
	c, s, n, err := parseCaptureHeader(hdr[:], size)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	h := blake3.New()
	h.Write(hdr[:])
	br := &hashReader{r: r, h: h}
	toks := make([]byte, 4*(s+n)) // bounded: the layout fits in size
	if _, err := io.ReadFull(br, toks); err != nil {
		return nil, fmt.Errorf("capture: tokens: %w", err)
	}
	c.Rows = make([]float32, n*c.Width)
	if err := br.readFloats(c.Rows); err != nil {
		return nil, fmt.Errorf("capture: rows: %w", err)
	}
	var want, got [digestSize]byte
	h.Sum(want[:0])
	if _, err := io.ReadFull(r, got[:]); err != nil {
		return nil, fmt.Errorf("capture: digest: %w", err)
	}
	if got != want {
		return nil, fmt.Errorf("capture: file digest %x does not match its contents (%x): the file is corrupt", got, want)
	}
	if err := c.parseTokens(toks, s, n, hdr[64:96]); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	if i := firstNonFinite(c.Rows); i >= 0 {
		return nil, fmt.Errorf("capture: row %d, index %d: value %v is not finite", i/c.Width, i%c.Width, c.Rows[i])
	}
	return c, nil
}

// parseCaptureHeader checks the fixed header against the limits and size.
func parseCaptureHeader(hdr []byte, size int64) (c *CaptureFile, s, n int, err error) {
	le := binary.LittleEndian
	if string(hdr[:8]) != captureMagic {
		return nil, 0, 0, fmt.Errorf("magic %q, want %q: not a Seam capture file", hdr[:8], captureMagic)
	}
	if v := le.Uint32(hdr[8:]); v != captureVersion {
		return nil, 0, 0, fmt.Errorf("version %d, this build reads version %d", v, captureVersion)
	}
	d := le.Uint32(hdr[12:])
	boundary := le.Uint32(hdr[16:])
	ns := le.Uint32(hdr[20:])
	nr := le.Uint64(hdr[24:])
	switch {
	case d < 1 || d > MaxCaptureWidth:
		return nil, 0, 0, fmt.Errorf("width %d outside 1..%d", d, MaxCaptureWidth)
	case boundary < 1 || boundary >= model.MaxLayers:
		return nil, 0, 0, fmt.Errorf("boundary %d outside 1..%d", boundary, model.MaxLayers-1)
	case nr < 1 || uint64(size) < nr: // each row takes more than a byte
		return nil, 0, 0, fmt.Errorf("%d rows in a %d-byte file", nr, size)
	case ns < 1 || uint64(ns) > nr:
		return nil, 0, 0, fmt.Errorf("%d sequences for %d rows, want 1..%d (no sequence is empty)", ns, nr, nr)
	}
	s, n = int(ns), int(nr)
	_, total, err := captureLayout(s, n, int(d))
	if err != nil {
		return nil, 0, 0, err
	}
	if int64(total) != size {
		return nil, 0, 0, fmt.Errorf("%d sequences, %d rows of width %d make %d bytes, but the file has %d", s, n, d, total, size)
	}
	c = &CaptureFile{Boundary: int(boundary), Width: int(d)}
	copy(c.Model[:], hdr[32:64])
	return c, s, n, nil
}

// parseTokens splits the tokens section into sequences and checks it
// against the calibration-data digest stored in the header.
func (c *CaptureFile) parseTokens(toks []byte, s, n int, calib []byte) error {
	le := binary.LittleEndian
	ids := toks[4*s:]
	c.Seqs = make([][]int, s)
	off := 0
	for i := range s {
		l := int(le.Uint32(toks[4*i:]))
		if l < 1 || l > n-off {
			return fmt.Errorf("sequence %d has length %d; %d of the %d rows remain", i, l, n-off, n)
		}
		seq := make([]int, l)
		for p := range seq {
			id := le.Uint32(ids[4*(off+p):])
			if id > math.MaxInt32 {
				return fmt.Errorf("sequence %d, position %d: token id %d beyond %d", i, p, id, math.MaxInt32)
			}
			seq[p] = int(id)
		}
		c.Seqs[i] = seq
		off += l
	}
	if off != n {
		return fmt.Errorf("sequence lengths sum to %d, the header declares %d rows", off, n)
	}
	if d := blake3.Sum256(toks); !bytes.Equal(d[:], calib) {
		return fmt.Errorf("calibration-data digest %x does not match the tokens (%x)", calib, d)
	}
	return nil
}

// hashReader hashes what it reads.
type hashReader struct {
	r   io.Reader
	h   *blake3.Hasher
	buf []byte
}

func (hr *hashReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	return n, err
}

// readFloats fills dst with little-endian f32 values through one bounded
// buffer, so a large capture is never held twice.
func (hr *hashReader) readFloats(dst []float32) error {
	if hr.buf == nil {
		hr.buf = make([]byte, 1<<16)
	}
	for len(dst) > 0 {
		k := min(len(dst), len(hr.buf)/4)
		b := hr.buf[:4*k]
		if _, err := io.ReadFull(hr, b); err != nil {
			return err
		}
		for i := range k {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		dst = dst[k:]
	}
	return nil
}
