package container

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
)

// Region describes one tensor's bytes (or a q8g tensor's scales) in a segment.
type Region struct {
	Name      string // as imported, e.g. "blk.0.attn_q.weight"
	Role      string // model.LayerRoles, RoleEmbedding, RoleFinalNorm, RoleOutput or RoleScales
	DType     tensor.DType
	Rows      int
	Cols      int
	GroupSize int    // q8g only
	Scales    string // q8g only: name of the companion scales region
	Offset    int64  // from the start of the segment file; a multiple of the alignment
	Length    int64  // exactly the bytes dtype x shape needs
	Checksum  [32]byte
}

// Segment describes one segment file.
type Segment struct {
	Name    string // "embed", "layer-000", ..., "head"
	File    string // Name + ".seg"
	Layer   int    // the layer it holds, or -1 for embed and head
	Size    int64  // the file's exact size
	Regions []Region
}

// CodecInfo describes a boundary codec file attached to the container.
type CodecInfo struct {
	Boundary int // the codec carries activations entering layer Boundary
	File     string
	Size     int64
	Digest   [32]byte
}

// layout is a validated index.
type layout struct {
	generation int
	cfg        model.Config
	importID   [16]byte
	alignment  int
	identity   [32]byte
	segments   []Segment // embed, layer-000 ... layer-(n-1), head
	tokenizer  *fileEntry
	tokDigest  [32]byte
	codecs     []CodecInfo
}

// segmentNames lists the segment names of a model in index order.
func segmentNames(nLayers int) []string {
	names := make([]string, 0, nLayers+2)
	names = append(names, EmbedSegment)
	for i := 0; i < nLayers; i++ {
		names = append(names, LayerSegment(i))
	}
	return append(names, HeadSegment)
}

// segmentRoles lists, in canonical order, the tensor roles segment name holds.
func segmentRoles(name string, cfg *model.Config) []string {
	switch name {
	case EmbedSegment:
		return []string{RoleEmbedding}
	case HeadSegment:
		if cfg.TiedOutput {
			return []string{RoleFinalNorm}
		}
		return []string{RoleFinalNorm, RoleOutput}
	}
	return cfg.LayerRoles()
}

// segmentLayer returns the layer of segment name, -1 for embed and head, or
// an error for a name that is not one of the model's segments.
func segmentLayer(name string, cfg *model.Config) (int, error) {
	if name == EmbedSegment || name == HeadSegment {
		return -1, nil
	}
	if rest, ok := strings.CutPrefix(name, "layer-"); ok {
		// Parse, then require the canonical spelling: "layer-03" or "layer-+03" are not names.
		if i, err := strconv.Atoi(rest); err == nil && i >= 0 && i < cfg.NLayers && LayerSegment(i) == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("segment name %q is not %q, %q or layer-NNN for a layer in [0, %d)",
		name, EmbedSegment, HeadSegment, cfg.NLayers)
}

// roleShape is the shape the config requires of a tensor role, and whether
// the role must be f32 (norm weights are).
func roleShape(role string, cfg *model.Config) (rows, cols int, mustF32 bool, err error) {
	switch role {
	case RoleEmbedding, RoleOutput:
		return cfg.VocabSize, cfg.Dim, false, nil
	case RoleFinalNorm:
		return 1, cfg.Dim, true, nil
	}
	if rows, cols, mustF32, ok := cfg.RoleShape(role); ok {
		return rows, cols, mustF32, nil
	}
	return 0, 0, false, fmt.Errorf("unknown role %q", role)
}

// shapeBytes is the byte length dtype x shape needs (values only for q8g).
func shapeBytes(dt tensor.DType, rows, cols int) (int64, error) {
	if rows <= 0 || cols <= 0 {
		return 0, fmt.Errorf("bad shape %dx%d", rows, cols)
	}
	rb, err := dt.RowBytes(cols)
	if err != nil {
		return 0, err
	}
	n, err := tensor.MulSize(rb, rows)
	return int64(n), err
}

// scalesCount is the number of f32 scales of a q8g tensor, checking the group size.
func scalesCount(rows, cols, group int) (int, error) {
	n, err := tensor.MulSize(rows, cols)
	if err != nil {
		return 0, err
	}
	if group <= 0 || group > maxGroupSize || n%group != 0 {
		return 0, fmt.Errorf("group size %d does not divide the %d values into groups of 1..%d", group, n, maxGroupSize)
	}
	return n / group, nil
}

// checkIndex validates a decoded index body and builds its layout.
func checkIndex(ix *index) (*layout, error) {
	l := &layout{generation: ix.gen, cfg: ix.Config, alignment: ix.Alignment}
	id, err := hex.DecodeString(ix.ImportID)
	if err != nil || len(id) != len(l.importID) {
		return nil, fmt.Errorf("import_id %q is not %d hex bytes", ix.ImportID, len(l.importID))
	}
	copy(l.importID[:], id)
	if a := ix.Alignment; a < MinAlignment || a > MaxAlignment || a&(a-1) != 0 {
		return nil, fmt.Errorf("alignment %d is not a power of two in [%d, %d]", a, MinAlignment, MaxAlignment)
	}
	if err := l.cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if need := GenerationFor(&l.cfg); l.generation < need {
		return nil, fmt.Errorf("config uses fields of generation %d (head_dim, rope_*, qkv_bias, qk_norm) in a generation %d index", need, l.generation)
	}
	names := segmentNames(l.cfg.NLayers)
	if len(ix.Segments) != len(names) {
		return nil, fmt.Errorf("index lists %d segments, a %d-layer model has %d (embed, layers, head)",
			len(ix.Segments), l.cfg.NLayers, len(names))
	}
	for i := range ix.Segments {
		if ix.Segments[i].Name != names[i] {
			return nil, fmt.Errorf("segment %d is %q, want %q", i, ix.Segments[i].Name, names[i])
		}
		s, err := checkSegment(&ix.Segments[i], &l.cfg, int64(l.alignment))
		if err != nil {
			return nil, err
		}
		l.segments = append(l.segments, s)
	}
	if err := l.checkFiles(ix); err != nil {
		return nil, err
	}
	want, err := parseDigest(ix.Identity)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	if l.identity = computeIdentity(&l.cfg, l.segments); l.identity != want {
		return nil, fmt.Errorf("identity %x in the index disagrees with %x computed from its config and checksums", want, l.identity)
	}
	return l, nil
}

// checkFiles validates the tokenizer and codec entries.
func (l *layout) checkFiles(ix *index) error {
	if t := ix.Tokenizer; t != nil {
		if t.File != TokenizerFile {
			return fmt.Errorf("tokenizer file %q, want %q", t.File, TokenizerFile)
		}
		if t.Size <= 0 || t.Size > maxTokenizerSize {
			return fmt.Errorf("tokenizer size %d, want 1..%d", t.Size, maxTokenizerSize)
		}
		d, err := parseDigest(t.BLAKE3)
		if err != nil {
			return fmt.Errorf("tokenizer blake3: %w", err)
		}
		l.tokenizer, l.tokDigest = t, d
	}
	for i, c := range ix.Codecs {
		if c.Boundary < 1 || c.Boundary >= l.cfg.NLayers {
			return fmt.Errorf("codec %d: boundary %d outside [1, %d)", i, c.Boundary, l.cfg.NLayers)
		}
		if i > 0 && c.Boundary <= ix.Codecs[i-1].Boundary {
			return fmt.Errorf("codec %d: boundary %d after %d: codecs must be sorted by boundary, one each", i, c.Boundary, ix.Codecs[i-1].Boundary)
		}
		d, err := parseDigest(c.BLAKE3)
		if err != nil {
			return fmt.Errorf("codec %d blake3: %w", c.Boundary, err)
		}
		if want := codecFileName(c.Boundary, d); c.File != want {
			return fmt.Errorf("codec %d: file %q, want %q", c.Boundary, c.File, want)
		}
		if c.Size <= 0 || c.Size > maxCodecBytes {
			return fmt.Errorf("codec %d: size %d, want 1..%d", c.Boundary, c.Size, maxCodecBytes)
		}
		l.codecs = append(l.codecs, CodecInfo{Boundary: c.Boundary, File: c.File, Size: c.Size, Digest: d})
	}
	return nil
}

// checkSegment validates one segment's regions: names, roles, shapes against
// the config, lengths against dtype x shape, alignment, bounds, no overlaps,
// and the pairing of q8g regions with their scales.
func checkSegment(sj *segmentJSON, cfg *model.Config, align int64) (Segment, error) {
	s := Segment{Name: sj.Name, File: SegmentFile(sj.Name), Size: sj.Size}
	fail := func(err error) (Segment, error) { return s, fmt.Errorf("segment %s: %w", sj.Name, err) }
	var err error
	if s.Layer, err = segmentLayer(sj.Name, cfg); err != nil {
		return fail(err)
	}
	roles := segmentRoles(sj.Name, cfg)
	if len(sj.Regions) == 0 || len(sj.Regions) > 2*len(roles) {
		return fail(fmt.Errorf("%d regions, want %d tensors plus their scales", len(sj.Regions), len(roles)))
	}
	end := int64(SegmentHeaderLen)
	byName := map[string]int{}
	for i := range sj.Regions {
		r, err := checkRegion(&sj.Regions[i], cfg, align, end, sj.Size)
		if err != nil {
			return s, &RegionError{Segment: sj.Name, Region: clip(sj.Regions[i].Name), Err: err}
		}
		if _, dup := byName[r.Name]; dup {
			return fail(fmt.Errorf("region name %q appears twice", r.Name))
		}
		byName[r.Name] = i
		end = r.Offset + r.Length
		s.Regions = append(s.Regions, r)
	}
	if end != sj.Size {
		return fail(fmt.Errorf("size %d, but the last region ends at %d", sj.Size, end))
	}
	if err := checkRoles(s.Regions, byName, roles); err != nil {
		return fail(err)
	}
	return s, nil
}

// checkRegion validates one region; prevEnd is where the previous region
// ended, so regions must appear in ascending, non-overlapping order.
func checkRegion(rj *regionJSON, cfg *model.Config, align, prevEnd, segSize int64) (Region, error) {
	r := Region{Name: rj.Name, Role: rj.Role, Rows: rj.Rows, Cols: rj.Cols, GroupSize: rj.GroupSize,
		Scales: rj.Scales, Offset: rj.Offset, Length: rj.Length}
	if !validName.MatchString(r.Name) {
		return r, fmt.Errorf("name is not 1..200 characters of [A-Za-z0-9_.:-+ ]")
	}
	var err error
	if r.DType, err = tensor.ParseDType(rj.DType); err != nil {
		return r, err
	}
	if r.Checksum, err = parseDigest(rj.BLAKE3); err != nil {
		return r, fmt.Errorf("blake3: %w", err)
	}
	if r.Role != RoleScales {
		rows, cols, mustF32, err := roleShape(r.Role, cfg)
		if err != nil {
			return r, err
		}
		if r.Rows != rows || r.Cols != cols {
			return r, fmt.Errorf("%s is %dx%d, the config needs %dx%d", r.Role, r.Rows, r.Cols, rows, cols)
		}
		if mustF32 && r.DType != tensor.F32 {
			return r, fmt.Errorf("%s is %s, norms must be f32", r.Role, r.DType)
		}
	}
	want, err := shapeBytes(r.DType, r.Rows, r.Cols)
	if err != nil {
		return r, fmt.Errorf("%s %dx%d: %w", r.DType, r.Rows, r.Cols, err)
	}
	if r.Length != want {
		return r, fmt.Errorf("length %d, but %s %dx%d needs %d bytes", r.Length, r.DType, r.Rows, r.Cols, want)
	}
	if r.Offset%align != 0 {
		return r, fmt.Errorf("offset %d is not a multiple of the alignment %d", r.Offset, align)
	}
	if r.Offset < prevEnd {
		return r, fmt.Errorf("offset %d overlaps what precedes it (header or region), which ends at %d", r.Offset, prevEnd)
	}
	if r.Offset > segSize || r.Length > segSize-r.Offset {
		return r, fmt.Errorf("bytes [%d, %d+%d) run past the segment's %d bytes", r.Offset, r.Offset, r.Length, segSize)
	}
	return r, nil
}

// checkRoles requires each role exactly once (in any order), and every
// q8g region paired with exactly one scales region of the matching size.
func checkRoles(regions []Region, byName map[string]int, roles []string) error {
	var got []string
	paired := map[string]bool{}
	for _, r := range regions {
		if r.Role == RoleScales {
			if r.DType != tensor.F32 || r.Rows != 1 || r.GroupSize != 0 || r.Scales != "" {
				return fmt.Errorf("scales region %q must be f32 1xN without group size or scales of its own", r.Name)
			}
			continue
		}
		got = append(got, r.Role)
		if r.DType != tensor.Q8G {
			if r.GroupSize != 0 || r.Scales != "" {
				return fmt.Errorf("region %q: %s carries no group size or scales", r.Name, r.DType)
			}
			continue
		}
		n, err := scalesCount(r.Rows, r.Cols, r.GroupSize)
		if err != nil {
			return fmt.Errorf("region %q: %w", r.Name, err)
		}
		if r.Scales != r.Name+ScalesSuffix {
			return fmt.Errorf("region %q: scales region is %q, want %q", r.Name, r.Scales, r.Name+ScalesSuffix)
		}
		j, ok := byName[r.Scales]
		if !ok || regions[j].Role != RoleScales {
			return fmt.Errorf("region %q: scales region %q is missing", r.Name, r.Scales)
		}
		if regions[j].Cols != n {
			return fmt.Errorf("region %q: scales region %q holds %d scales, %d values in groups of %d need %d",
				r.Name, r.Scales, regions[j].Cols, r.Rows*r.Cols, r.GroupSize, n)
		}
		paired[r.Scales] = true
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(roles)); !slices.Equal(got, want) {
		return fmt.Errorf("tensor roles %v, want each of %v once", got, want)
	}
	for _, r := range regions {
		if r.Role == RoleScales && !paired[r.Name] {
			return fmt.Errorf("scales region %q belongs to no q8g region", r.Name)
		}
	}
	return nil
}

// clip shortens an untrusted name for an error message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
