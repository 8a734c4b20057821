package container

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/zeebo/blake3"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

// ErrInterrupted is returned once the WithInterruptAfter test hook fires.
var ErrInterrupted = errors.New("import interrupted by test hook")

const (
	defaultBufferSize = 1 << 20
	minBufferSize     = 64
	maxBufferSize     = 64 << 20
)

// RegionSpec describes a tensor to add: the bytes come from a reader.
type RegionSpec struct {
	Name      string // free-form, e.g. the source file's tensor name
	Role      string // see segmentRoles: model.LayerRoles, or embedding, final_norm, output
	DType     tensor.DType
	Rows      int
	Cols      int
	GroupSize int // q8g only
}

// Option configures a Builder.
type Option func(*options) error

type options struct {
	progress       func(bytesDone, bytesTotal int64)
	total          int64
	alignment      int
	bufferSize     int
	interruptAfter int64
}

// WithProgress calls fn after every chunk written, with the region bytes
// written so far and the total declared by WithTotal (-1 when undeclared).
func WithProgress(fn func(bytesDone, bytesTotal int64)) Option {
	return func(o *options) error { o.progress = fn; return nil }
}

// WithTotal declares the number of region bytes the import will write (tensor
// values and q8g scales, not headers or padding), for progress reporting.
func WithTotal(n int64) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("declared total %d is negative", n)
		}
		o.total = n
		return nil
	}
}

// WithAlignment sets the region alignment: a power of two from 64 to 65536.
func WithAlignment(n int) Option {
	return func(o *options) error {
		if n < MinAlignment || n > MaxAlignment || n&(n-1) != 0 {
			return fmt.Errorf("alignment %d is not a power of two in [%d, %d]", n, MinAlignment, MaxAlignment)
		}
		o.alignment = n
		return nil
	}
}

// WithBufferSize sets the size of the one buffer bytes stream through. The
// builder's memory use is this buffer, whatever the tensors' sizes.
func WithBufferSize(n int) Option {
	return func(o *options) error {
		if n < minBufferSize || n > maxBufferSize {
			return fmt.Errorf("buffer size %d outside [%d, %d]", n, minBufferSize, maxBufferSize)
		}
		o.bufferSize = n
		return nil
	}
}

// WithInterruptAfter is a test hook: after n region bytes the builder stops
// as a killed process would, leaving its files (a half-written temporary
// segment, finished segments, no index) in place, and returns ErrInterrupted
// from then on. Abort still cleans up.
func WithInterruptAfter(n int64) Option {
	return func(o *options) error { o.interruptAfter = n; return nil }
}

// Builder writes a container directory, one segment at a time. It is not
// safe for concurrent use. After any error the builder refuses further
// calls; call Abort to remove what it wrote.
type Builder struct {
	dir        string
	cfg        model.Config
	opts       options
	importID   [16]byte
	createdDir bool
	buf        []byte
	done       int64
	err        error // sticky: the first failure
	finished   bool
	segments   map[string]Segment
	written    []string // final names of the files this builder made
	cur        *segmentWriter
	tokSpec    *tokenizer.Spec
}

type segmentWriter struct {
	seg  Segment
	f    *os.File
	tmp  string
	off  int64
	used map[string]bool // region names and roles taken
}

// Create starts an import into dir, which must not exist or be empty.
func Create(dir string, cfg model.Config, opts ...Option) (*Builder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("create container %s: config: %w", dir, err)
	}
	b := &Builder{dir: dir, cfg: cfg, segments: map[string]Segment{},
		opts: options{total: -1, alignment: DefaultAlignment, bufferSize: defaultBufferSize, interruptAfter: -1}}
	for _, o := range opts {
		if err := o(&b.opts); err != nil {
			return nil, fmt.Errorf("create container %s: %w", dir, err)
		}
	}
	if err := b.prepareDir(); err != nil {
		return nil, err
	}
	if _, err := rand.Read(b.importID[:]); err != nil {
		return nil, fmt.Errorf("create container %s: import id: %w", dir, err)
	}
	b.buf = make([]byte, b.opts.bufferSize)
	return b, nil
}

func (b *Builder) prepareDir() error {
	entries, err := os.ReadDir(b.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(b.dir, 0o755); err != nil {
			return fmt.Errorf("create container: %w", err)
		}
		b.createdDir = true
		return nil
	case err != nil:
		return fmt.Errorf("create container: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("create container %s: directory is not empty (%d entries, e.g. %s)", b.dir, len(entries), entries[0].Name())
	}
	return nil
}

// fail records the first error; every later call returns it.
func (b *Builder) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return b.err
}

func (b *Builder) usable() error {
	if b.err != nil {
		return b.err
	}
	if b.finished {
		return fmt.Errorf("container %s: builder already finished", b.dir)
	}
	return nil
}

// BeginSegment starts segment name: EmbedSegment, HeadSegment or LayerSegment(i).
func (b *Builder) BeginSegment(name string) error {
	if err := b.usable(); err != nil {
		return err
	}
	if b.cur != nil {
		return b.fail(fmt.Errorf("begin segment %s: segment %s is still open", name, b.cur.seg.Name))
	}
	layer, err := segmentLayer(name, &b.cfg)
	if err != nil {
		return b.fail(fmt.Errorf("begin segment: %w", err))
	}
	if _, dup := b.segments[name]; dup {
		return b.fail(fmt.Errorf("begin segment %s: already written", name))
	}
	tmp := filepath.Join(b.dir, SegmentFile(name)+tempExt)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return b.fail(fmt.Errorf("begin segment %s: %w", name, err))
	}
	b.cur = &segmentWriter{seg: Segment{Name: name, File: SegmentFile(name), Layer: layer}, f: f, tmp: tmp, used: map[string]bool{}}
	if _, err := f.Write(encodeHeader(GenerationFor(&b.cfg), name, b.importID)); err != nil {
		return b.fail(fmt.Errorf("write %s: %w", tmp, err))
	}
	b.cur.off = SegmentHeaderLen
	return nil
}

// AddTensor adds t under the given name and role. For q8g it streams the
// values, then the scales.
func (b *Builder) AddTensor(name, role string, t *tensor.Tensor) error {
	spec := RegionSpec{Name: name, Role: role, DType: t.Type, Rows: t.Rows, Cols: t.Cols, GroupSize: t.GroupSize}
	return b.AddRegion(spec, io.MultiReader(bytes.NewReader(t.Data), bytes.NewReader(t.Scales)))
}

// AddRegion streams one tensor from r into the open segment. r must yield
// exactly the bytes dtype x shape needs; for q8g, the int8 values followed by
// the f32 scales (one per group), as llama2.c writes them. The bytes pass
// through one bounded buffer while being hashed; a tensor is never held
// whole in memory.
func (b *Builder) AddRegion(spec RegionSpec, r io.Reader) error {
	if err := b.usable(); err != nil {
		return err
	}
	if b.cur == nil {
		return b.fail(fmt.Errorf("add region %q: no segment begun", spec.Name))
	}
	valueBytes, nScales, err := b.checkSpec(&spec)
	if err != nil {
		return b.fail(fmt.Errorf("segment %s: region %q: %w", b.cur.seg.Name, spec.Name, err))
	}
	region := Region{Name: spec.Name, Role: spec.Role, DType: spec.DType, Rows: spec.Rows, Cols: spec.Cols}
	if spec.DType == tensor.Q8G {
		region.GroupSize, region.Scales = spec.GroupSize, spec.Name+ScalesSuffix
	}
	if err := b.writeRegion(&region, r, valueBytes); err != nil {
		return err
	}
	if spec.DType == tensor.Q8G {
		scales := Region{Name: region.Scales, Role: RoleScales, DType: tensor.F32, Rows: 1, Cols: nScales}
		if err := b.writeRegion(&scales, r, int64(nScales)*4); err != nil {
			return err
		}
	}
	var extra [1]byte
	if n, _ := io.ReadFull(r, extra[:]); n > 0 {
		return b.fail(fmt.Errorf("segment %s: region %q: reader has more than the %d bytes %s %dx%d needs",
			b.cur.seg.Name, spec.Name, valueBytes+int64(nScales)*4, spec.DType, spec.Rows, spec.Cols))
	}
	return nil
}

// checkSpec validates a region against the open segment and the config and
// returns the byte length of its values and its number of q8g scales.
func (b *Builder) checkSpec(s *RegionSpec) (int64, int, error) {
	w := b.cur
	if !validName.MatchString(s.Name) {
		return 0, 0, fmt.Errorf("name is not 1..200 characters of [A-Za-z0-9_.:-+ ]")
	}
	if w.used["name:"+s.Name] {
		return 0, 0, fmt.Errorf("name already used in this segment")
	}
	if !slices.Contains(segmentRoles(w.seg.Name, &b.cfg), s.Role) {
		return 0, 0, fmt.Errorf("role %q does not belong in segment %s (want one of %v)", s.Role, w.seg.Name, segmentRoles(w.seg.Name, &b.cfg))
	}
	if w.used["role:"+s.Role] {
		return 0, 0, fmt.Errorf("role %s already added to this segment", s.Role)
	}
	rows, cols, mustF32, _ := roleShape(s.Role, &b.cfg)
	if s.Rows != rows || s.Cols != cols {
		return 0, 0, fmt.Errorf("%s is %dx%d, the config needs %dx%d", s.Role, s.Rows, s.Cols, rows, cols)
	}
	if !s.DType.Valid() || (mustF32 && s.DType != tensor.F32) {
		return 0, 0, fmt.Errorf("dtype %s not allowed for %s", s.DType, s.Role)
	}
	n, err := shapeBytes(s.DType, rows, cols)
	if err != nil {
		return 0, 0, fmt.Errorf("%s %dx%d: %w", s.DType, rows, cols, err)
	}
	nScales := 0
	if s.DType == tensor.Q8G {
		if nScales, err = scalesCount(rows, cols, s.GroupSize); err != nil {
			return 0, 0, err
		}
		if scales := s.Name + ScalesSuffix; !validName.MatchString(scales) || w.used["name:"+scales] {
			return 0, 0, fmt.Errorf("cannot name its scales region %q", scales)
		}
		w.used["name:"+s.Name+ScalesSuffix] = true
	} else if s.GroupSize != 0 {
		return 0, 0, fmt.Errorf("group size %d given for %s, which has none", s.GroupSize, s.DType)
	}
	w.used["name:"+s.Name], w.used["role:"+s.Role] = true, true
	return n, nScales, nil
}

// writeRegion pads to the alignment and streams exactly n bytes from r,
// filling in the region's offset, length and checksum.
func (b *Builder) writeRegion(region *Region, r io.Reader, n int64) error {
	w := b.cur
	align := int64(b.opts.alignment)
	if pad := (align - w.off%align) % align; pad > 0 {
		if _, err := w.f.Write(make([]byte, pad)); err != nil {
			return b.fail(fmt.Errorf("write %s: %w", w.tmp, err))
		}
		w.off += pad
	}
	region.Offset, region.Length = w.off, n
	h := blake3.New()
	for left := n; left > 0; {
		chunk := int64(len(b.buf))
		if left < chunk {
			chunk = left
		}
		if stop := b.opts.interruptAfter; stop >= 0 && b.done+chunk > stop {
			chunk = stop - b.done
		}
		got, err := io.ReadFull(r, b.buf[:chunk])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return b.fail(fmt.Errorf("segment %s: region %q: read: %w", w.seg.Name, region.Name, err))
		}
		if int64(got) < chunk {
			return b.fail(fmt.Errorf("segment %s: region %q: reader ended after %d bytes, %s %dx%d needs %d",
				w.seg.Name, region.Name, n-left+int64(got), region.DType, region.Rows, region.Cols, n))
		}
		h.Write(b.buf[:chunk])
		if _, err := w.f.Write(b.buf[:chunk]); err != nil {
			return b.fail(fmt.Errorf("write %s: %w", w.tmp, err))
		}
		left -= chunk
		w.off += chunk
		b.done += chunk
		if b.opts.progress != nil {
			b.opts.progress(b.done, b.opts.total)
		}
		if b.done == b.opts.interruptAfter {
			w.f.Close() // as the kernel would for a killed process; the file stays
			w.f = nil
			return b.fail(ErrInterrupted)
		}
	}
	h.Sum(region.Checksum[:0])
	w.seg.Regions = append(w.seg.Regions, *region)
	return nil
}

// EndSegment makes the open segment durable: sync, rename into place, sync
// the directory. It checks the segment holds every tensor its role needs.
func (b *Builder) EndSegment() error {
	if err := b.usable(); err != nil {
		return err
	}
	w := b.cur
	if w == nil {
		return b.fail(errors.New("end segment: no segment begun"))
	}
	for _, role := range segmentRoles(w.seg.Name, &b.cfg) {
		if !w.used["role:"+role] {
			return b.fail(fmt.Errorf("end segment %s: no %s tensor added", w.seg.Name, role))
		}
	}
	if err := w.f.Sync(); err != nil {
		return b.fail(fmt.Errorf("sync %s: %w", w.tmp, err))
	}
	if err := w.f.Close(); err != nil {
		return b.fail(fmt.Errorf("close %s: %w", w.tmp, err))
	}
	w.f = nil
	final := filepath.Join(b.dir, w.seg.File)
	if err := os.Rename(w.tmp, final); err != nil {
		return b.fail(fmt.Errorf("end segment %s: %w", w.seg.Name, err))
	}
	b.written = append(b.written, w.seg.File)
	if err := syncDir(b.dir); err != nil {
		return b.fail(err)
	}
	w.seg.Size = w.off
	b.segments[w.seg.Name] = w.seg
	b.cur = nil
	return nil
}

// SetTokenizer stores a llama2.c-style vocabulary; it must build a
// tokenizer and have exactly the config's vocab_size pieces. Finish writes
// it.
func (b *Builder) SetTokenizer(v tokenizer.Vocab) error {
	c := tokenizer.Vocab{Pieces: append([]string(nil), v.Pieces...), Scores: append([]float32(nil), v.Scores...), BOS: v.BOS, EOS: v.EOS}
	if v.Types != nil {
		c.Types = append([]int32(nil), v.Types...)
	}
	return b.SetTokenizerSpec(tokenizer.Spec{Kind: tokenizer.SpecLlama2c, Llama2c: &c})
}

// SetTokenizerSpec stores a tokenizer as it was loaded (tokenizer.SpecOf);
// it must build a tokenizer with exactly the config's vocab_size ids.
// Finish writes it.
func (b *Builder) SetTokenizerSpec(s tokenizer.Spec) error {
	if err := b.usable(); err != nil {
		return err
	}
	data, err := encodeTokenizerSpec(s)
	if err != nil {
		return b.fail(err)
	}
	if _, err := parseTokenizer(data, b.cfg.VocabSize); err != nil {
		return b.fail(fmt.Errorf("tokenizer: %w", err))
	}
	b.tokSpec = &s
	return nil
}

// Finish writes the tokenizer and then the index, which makes the directory
// a container. It fails, writing no index, when a segment is missing.
func (b *Builder) Finish() error {
	if err := b.usable(); err != nil {
		return err
	}
	if b.cur != nil {
		return b.fail(fmt.Errorf("finish: segment %s is still open", b.cur.seg.Name))
	}
	ix := &index{gen: GenerationFor(&b.cfg), ImportID: fmt.Sprintf("%x", b.importID[:]), Alignment: b.opts.alignment, Config: b.cfg, Codecs: []codecEntry{}}
	var segs []Segment
	for _, name := range segmentNames(b.cfg.NLayers) {
		s, ok := b.segments[name]
		if !ok {
			return b.fail(fmt.Errorf("finish: segment %s was not written", name))
		}
		segs = append(segs, s)
		ix.Segments = append(ix.Segments, segmentToJSON(s))
	}
	ix.Identity = hexDigest(computeIdentity(&b.cfg, segs))
	if b.tokSpec != nil {
		data, err := encodeTokenizerSpec(*b.tokSpec)
		if err != nil {
			return b.fail(err)
		}
		if err := writeFileAtomic(b.dir, TokenizerFile, data); err != nil {
			return b.fail(err)
		}
		b.written = append(b.written, TokenizerFile)
		ix.Tokenizer = &fileEntry{File: TokenizerFile, Size: int64(len(data)), BLAKE3: hexDigest(blake3.Sum256(data))}
	}
	if err := writeIndex(b.dir, ix); err != nil {
		return b.fail(err)
	}
	b.finished = true
	return nil
}

// writeIndex encodes ix, checks that it parses back (a bug here must not
// produce a container), and writes it atomically.
func writeIndex(dir string, ix *index) error {
	data, err := encodeIndex(ix)
	if err != nil {
		return err
	}
	if _, err := parseIndex(data, IndexFile); err != nil {
		return fmt.Errorf("refusing to write an invalid index: %w", err)
	}
	return writeFileAtomic(dir, IndexFile, data)
}

func segmentToJSON(s Segment) segmentJSON {
	sj := segmentJSON{Name: s.Name, Size: s.Size}
	for _, r := range s.Regions {
		sj.Regions = append(sj.Regions, regionJSON{Name: r.Name, Role: r.Role, DType: r.DType.String(), Rows: r.Rows, Cols: r.Cols,
			GroupSize: r.GroupSize, Scales: r.Scales, Offset: r.Offset, Length: r.Length, BLAKE3: hexDigest(r.Checksum)})
	}
	return sj
}

// Abort removes everything the builder wrote: temporary files, finished
// segments, and the directory itself when Create made it, so the import can
// be run again. After Finish it does nothing: the container is complete.
func (b *Builder) Abort() error {
	if b.finished {
		return nil
	}
	b.fail(errors.New("import aborted"))
	var errs []error
	if w := b.cur; w != nil {
		if w.f != nil {
			w.f.Close()
		}
		errs = append(errs, removeIfExists(w.tmp))
		b.cur = nil
	}
	for _, name := range b.written {
		errs = append(errs, removeIfExists(filepath.Join(b.dir, name)))
	}
	b.written = nil
	for _, name := range []string{TokenizerFile + tempExt, IndexFile + tempExt} {
		errs = append(errs, removeIfExists(filepath.Join(b.dir, name)))
	}
	if b.createdDir {
		errs = append(errs, removeIfExists(b.dir))
	}
	return errors.Join(errs...)
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
