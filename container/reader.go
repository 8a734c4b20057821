package container

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/zeebo/blake3"

	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

// Container is an opened container: its validated index. Opening reads
// index.json only; segments are read by OpenRange and Verify.
type Container struct {
	dir string
	l   *layout
}

// Open reads and validates dir/index.json: generation first, then the index
// digest, then the structure (config, segments, regions, bounds, alignment,
// overlaps, shapes, identity).
func Open(dir string) (*Container, error) {
	_, l, err := loadIndex(dir)
	if err != nil {
		return nil, err
	}
	return &Container{dir: dir, l: l}, nil
}

// Dir is the container's directory.
func (c *Container) Dir() string { return c.dir }

// Generation is the index's generation.
func (c *Container) Generation() int { return c.l.generation }

// Config is the model's configuration.
func (c *Container) Config() model.Config { return c.l.cfg }

// Alignment is the region alignment in bytes.
func (c *Container) Alignment() int { return c.l.alignment }

// Identity is the model identity digest (see Identity).
func (c *Container) Identity() [32]byte { return c.l.identity }

// Segments describes every segment in index order: embed, layers, head.
func (c *Container) Segments() []Segment {
	out := make([]Segment, len(c.l.segments))
	for i, s := range c.l.segments {
		out[i] = s
		out[i].Regions = slices.Clone(s.Regions)
	}
	return out
}

// WeightBytes is the total size of all regions.
func (c *Container) WeightBytes() int64 {
	var n int64
	for _, s := range c.l.segments {
		for _, r := range s.Regions {
			n += r.Length
		}
	}
	return n
}

// HasTokenizer reports whether the container stores a tokenizer.
func (c *Container) HasTokenizer() bool { return c.l.tokenizer != nil }

// Tokenizer reads tokenizer.json, checks its size and digest against the
// index, and builds the tokenizer.
func (c *Container) Tokenizer() (tokenizer.Tokenizer, error) {
	t := c.l.tokenizer
	if t == nil {
		return nil, fmt.Errorf("%s: %w", c.dir, ErrNoTokenizer)
	}
	data, err := readBounded(filepath.Join(c.dir, t.File), t.Size)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if got := blake3.Sum256(data); got != c.l.tokDigest {
		return nil, fmt.Errorf("%s: blake3 %x, the index says %x", filepath.Join(c.dir, t.File), got, c.l.tokDigest)
	}
	return parseTokenizer(data, c.l.cfg.VocabSize)
}

// Tokenizer opens the container in dir and reads its tokenizer.
func Tokenizer(dir string) (tokenizer.Tokenizer, error) {
	c, err := Open(dir)
	if err != nil {
		return nil, err
	}
	return c.Tokenizer()
}

// Identity returns the model identity of the container in dir: a BLAKE3
// digest over the config and every tensor's role, dtype, shape and checksum in
// canonical order. Two containers holding the same weights have the same
// identity whatever their layout; stages compare it at handshake. It reads
// only the index.
func Identity(dir string) ([32]byte, error) {
	c, err := Open(dir)
	if err != nil {
		return [32]byte{}, err
	}
	return c.Identity(), nil
}

// Range is a stage's slice of a model: weights viewing mapped segment files.
type Range struct {
	Weights *model.Weights
	files   []*mapped.File
}

// OpenRange opens dir and maps the layers [a, b) (see Container.OpenRange).
func OpenRange(dir string, a, b int) (*Range, error) {
	c, err := Open(dir)
	if err != nil {
		return nil, err
	}
	return c.OpenRange(a, b)
}

// OpenRange maps only what layers [a, b) need: their segments, the embed
// segment when a == 0, and the head segment when b == n_layers (plus the
// embed segment for a tied classifier, which is the embedding matrix: such a
// last stage has Embedding set too, as model.Weights allows). The
// range is checked before any segment is touched. Each mapped file must have
// the size the index declares and a header naming this import; region
// checksums are Verify's job, not done here, so that opening stays fast.
func (c *Container) OpenRange(a, b int) (*Range, error) {
	n := c.l.cfg.NLayers
	if a < 0 || b > n || a >= b {
		return nil, fmt.Errorf("%s: layer range [%d, %d) is not a non-empty range within the model's [0, %d)", c.dir, a, b, n)
	}
	w := &model.Weights{Config: c.l.cfg, First: a, Last: b, Layers: make([]model.Layer, n)}
	r := &Range{Weights: w}
	if err := r.mapAll(c, a, b); err != nil {
		r.Close()
		return nil, err
	}
	if err := w.Validate(); err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: layers [%d, %d): %w", c.dir, a, b, err)
	}
	return r, nil
}

func (r *Range) mapAll(c *Container, a, b int) error {
	segs := c.l.segments // embed, layer-000 ... layer-(n-1), head
	n := c.l.cfg.NLayers
	w := r.Weights
	if a == 0 || (b == n && c.l.cfg.TiedOutput) {
		data, err := r.mapSegment(c, segs[0])
		if err != nil {
			return err
		}
		w.Embedding = view(segs[0], data, RoleEmbedding)
	}
	for i := a; i < b; i++ {
		s := segs[1+i]
		data, err := r.mapSegment(c, s)
		if err != nil {
			return err
		}
		for _, role := range c.l.cfg.LayerRoles() {
			*w.Layers[i].Tensor(role) = view(s, data, role)
		}
	}
	if b == n {
		s := segs[n+1]
		data, err := r.mapSegment(c, s)
		if err != nil {
			return err
		}
		w.FinalNorm = view(s, data, RoleFinalNorm)
		if c.l.cfg.TiedOutput {
			w.Output = w.Embedding
		} else {
			w.Output = view(s, data, RoleOutput)
		}
	}
	return nil
}

// mapSegment maps one segment file and checks its size and header.
func (r *Range) mapSegment(c *Container, s Segment) ([]byte, error) {
	path := filepath.Join(c.dir, s.File)
	f, err := mapped.Open(path)
	if err != nil {
		return nil, fmt.Errorf("segment %s: %w", s.Name, err)
	}
	r.files = append(r.files, f)
	data := f.Bytes()
	if int64(len(data)) != s.Size {
		return nil, fmt.Errorf("%s: %d bytes, the index declares %d (truncated or replaced?)", path, len(data), s.Size)
	}
	if err := checkHeader(data, c.l.generation, path, s.Name, c.l.importID); err != nil {
		return nil, err
	}
	return data, nil
}

// view returns the tensor of role in segment s over its mapped bytes. The
// index has been validated against the file size, so the slices are in range;
// their capacity is clipped so an append cannot reach a neighbour.
func view(s Segment, data []byte, role string) tensor.Tensor {
	var t tensor.Tensor
	for _, r := range s.Regions {
		if r.Role == role {
			t = tensor.Tensor{Name: r.Name, Type: r.DType, Rows: r.Rows, Cols: r.Cols, Data: slice(data, r), GroupSize: r.GroupSize}
			if r.Scales != "" {
				for _, x := range s.Regions {
					if x.Name == r.Scales {
						t.Scales = slice(data, x)
					}
				}
			}
		}
	}
	return t
}

func slice(data []byte, r Region) []byte {
	lo, hi := int(r.Offset), int(r.Offset+r.Length)
	return data[lo:hi:hi]
}

// MappedFiles lists the base names of the files this range mapped.
func (r *Range) MappedFiles() []string {
	var names []string
	for _, f := range r.files {
		names = append(names, filepath.Base(f.Path()))
	}
	return names
}

// Close unmaps the range's files. Its tensors must not be used afterwards.
func (r *Range) Close() error {
	var first error
	for _, f := range r.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	r.files = nil
	return first
}
