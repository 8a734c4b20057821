// Package container stores one model, imported once, as a directory that is
// shipped to every pipeline stage: one segment file per transformer layer, one
// for the token embedding, one for the final norm and classifier, a tokenizer
// file, optional boundary codec files, and index.json, written last, which
// describes all of them and carries their checksums.
//
// The layering follows the shape of small storage engines: this file defines
// the on-disk format (names, limits, the index envelope and its parser), the
// builder writes it, the reader and the verifier read it. The byte-level
// format is specified in docs/container.md; keep the two in step.
//
// Guarantees, and where each is enforced:
//   - An import that did not finish has no index.json, and every entry point
//     refuses a directory without one (ErrNotContainer). The index is renamed
//     into place only after every file it names is durable.
//   - The generation is the first thing read from the index; a reader refuses
//     every generation but the ones it supports (GenerationError) before
//     parsing anything else or touching a segment. Segment headers repeat it.
//   - index.json carries the BLAKE3 digest of its own body; the body carries
//     BLAKE3 digests of every region, the tokenizer file and codec files.
//   - Every region's byte length is checked against its dtype and shape when
//     it is imported, when the index is parsed, and by Verify.
package container

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/zeebo/blake3"

	"github.com/seamlm/seam/model"
)

// Generation is the newest container format generation this package writes.
// It writes the oldest generation that describes the model (see
// GenerationFor), so that containers of models an older reader can run stay
// readable by it.
const Generation = 2

// SupportedGenerations lists the generations this package reads.
var SupportedGenerations = []int{1, 2}

// GenerationFor is the generation a container of a model with config cfg is
// written in: 1 for the original Llama layout, 2 when the config uses a
// field generation 1 lacks (head size, NeoX RoPE, RoPE scaling or factors,
// Q/K/V biases, Q/K norms), with the layer roles those bring.
func GenerationFor(cfg *model.Config) int {
	if cfg.Extended() {
		return 2
	}
	return 1
}

// File names inside a container directory.
const (
	IndexFile     = "index.json"
	TokenizerFile = "tokenizer.json"
	EmbedSegment  = "embed" // token embedding: what a first stage maps
	HeadSegment   = "head"  // final norm and (untied) classifier: what a last stage maps
	segmentExt    = ".seg"
	tempExt       = ".tmp"
)

// Region roles besides model.LayerRoles.
const (
	RoleEmbedding = "embedding"
	RoleFinalNorm = "final_norm"
	RoleOutput    = "output"
	RoleScales    = "scales" // f32 group scales of a q8g region
)

// Limits on what an index may declare; they bound what a reader allocates.
const (
	DefaultAlignment = 64
	MinAlignment     = 64
	MaxAlignment     = 1 << 16
	SegmentHeaderLen = 64
	maxIndexBytes    = 64 << 20
	maxTokenizerSize = 64 << 20
	maxCodecBytes    = 256 << 20
	maxGroupSize     = 1 << 20
)

// ScalesSuffix is appended to a q8g region's name to name its scales region.
const ScalesSuffix = ".scales"

// LayerSegment returns the segment name of layer i: "layer-003" for 3.
func LayerSegment(i int) string { return fmt.Sprintf("layer-%03d", i) }

// SegmentFile is the file name of a segment: its name plus ".seg".
func SegmentFile(name string) string { return name + segmentExt }

var (
	// ErrNotContainer is returned for a directory without an index.
	ErrNotContainer = errors.New("not a Seam container (no index; an import may have been interrupted)")
	// ErrNoTokenizer is returned by Tokenizer for a container imported without one.
	ErrNoTokenizer = errors.New("container has no tokenizer")
	// ErrNoCodec is returned by Codec when no codec is attached at a boundary.
	ErrNoCodec = errors.New("no codec attached")
)

// GenerationError reports an index of a generation this build cannot read.
type GenerationError struct {
	Path      string
	Found     int
	Supported []int
}

func (e *GenerationError) Error() string {
	return fmt.Sprintf("%s: container generation %d; this build reads generation %v (re-import the model, or use a matching seam build)",
		e.Path, e.Found, e.Supported)
}

// Envelope. index.json is exactly
//
//	{"generation":G,"index_blake3":"H","index":BODY}\n
//
// G is a decimal integer, H the lowercase hex BLAKE3-256 of the bytes of BODY
// as stored, BODY a JSON object. The prefix up to G is the one part of the
// format every generation keeps, so any reader can name the generation it was
// handed without understanding the rest.
const (
	envelopeGen    = `{"generation":`
	envelopeDigest = `,"index_blake3":"`
	envelopeBody   = `","index":`
	envelopeEnd    = "}\n"
)

// index is the decoded body of index.json (generations 1 and 2: 2 adds the
// config fields after tied_output, which generation 1 must not hold).
type index struct {
	gen       int           // from the envelope, not the body
	ImportID  string        `json:"import_id"`
	Alignment int           `json:"alignment"`
	Config    model.Config  `json:"config"`
	Identity  string        `json:"identity"`
	Tokenizer *fileEntry    `json:"tokenizer"`
	Segments  []segmentJSON `json:"segments"`
	Codecs    []codecEntry  `json:"codecs"`
}

type fileEntry struct {
	File   string `json:"file"`
	Size   int64  `json:"size"`
	BLAKE3 string `json:"blake3"`
}

type codecEntry struct {
	Boundary int    `json:"boundary"`
	File     string `json:"file"`
	Size     int64  `json:"size"`
	BLAKE3   string `json:"blake3"`
}

type segmentJSON struct {
	Name    string       `json:"name"`
	Size    int64        `json:"size"`
	Regions []regionJSON `json:"regions"`
}

type regionJSON struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	DType     string `json:"dtype"`
	Rows      int    `json:"rows"`
	Cols      int    `json:"cols"`
	GroupSize int    `json:"group_size,omitempty"`
	Scales    string `json:"scales,omitempty"`
	Offset    int64  `json:"offset"`
	Length    int64  `json:"length"`
	BLAKE3    string `json:"blake3"`
}

// readGeneration reads G from the start of an index file. It looks at nothing
// after the digits.
func readGeneration(data []byte, path string) (int, error) {
	if !bytes.HasPrefix(data, []byte(envelopeGen)) {
		return 0, fmt.Errorf("%s: does not begin with %s: not a Seam container index", path, envelopeGen)
	}
	rest := data[len(envelopeGen):]
	n := 0
	for n < len(rest) && n < 10 && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n == 10 || (n > 1 && rest[0] == '0') {
		return 0, fmt.Errorf("%s: generation is not a decimal number of at most 9 digits", path)
	}
	g, _ := strconv.Atoi(string(rest[:n])) // at most 9 digits: cannot fail or overflow
	if !slices.Contains(SupportedGenerations, g) {
		return 0, &GenerationError{Path: path, Found: g, Supported: SupportedGenerations}
	}
	return g, nil
}

// splitEnvelope checks the envelope around the body and the body's digest,
// returning the body bytes. The generation has been read already.
func splitEnvelope(data []byte, path string) ([]byte, error) {
	rest := data[len(envelopeGen):]
	for len(rest) > 0 && rest[0] >= '0' && rest[0] <= '9' {
		rest = rest[1:]
	}
	if !bytes.HasPrefix(rest, []byte(envelopeDigest)) {
		return nil, fmt.Errorf("%s: expected %s after the generation", path, envelopeDigest)
	}
	rest = rest[len(envelopeDigest):]
	if len(rest) < 64 {
		return nil, fmt.Errorf("%s: truncated index digest", path)
	}
	want, err := parseDigest(string(rest[:64]))
	if err != nil {
		return nil, fmt.Errorf("%s: index_blake3: %w", path, err)
	}
	rest = rest[64:]
	if !bytes.HasPrefix(rest, []byte(envelopeBody)) {
		return nil, fmt.Errorf("%s: expected %s after the index digest", path, envelopeBody)
	}
	rest = rest[len(envelopeBody):]
	if !bytes.HasSuffix(rest, []byte(envelopeEnd)) {
		return nil, fmt.Errorf("%s: does not end with %q (truncated?)", path, envelopeEnd)
	}
	body := rest[:len(rest)-len(envelopeEnd)]
	if got := blake3.Sum256(body); got != want {
		return nil, fmt.Errorf("%s: index digest mismatch: body hashes to %x, index_blake3 says %x", path, got, want)
	}
	return body, nil
}

// encodeIndex renders ix as a complete index.json.
func encodeIndex(ix *index) ([]byte, error) {
	body, err := json.MarshalIndent(ix, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encode index: %w", err)
	}
	sum := blake3.Sum256(body)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s%d%s%x%s", envelopeGen, ix.gen, envelopeDigest, sum[:], envelopeBody)
	b.Write(body)
	b.WriteString(envelopeEnd)
	return b.Bytes(), nil
}

// parseIndex decodes and validates a whole index file: generation first, then
// the digest, then the body's structure. It touches no other file.
func parseIndex(data []byte, path string) (*layout, error) {
	ix, err := decodeIndex(data, path)
	if err != nil {
		return nil, err
	}
	l, err := checkIndex(ix)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// decodeIndex checks the generation and the digest and decodes the body,
// refusing unknown fields: a field this generation does not define means the
// file is not of this generation.
func decodeIndex(data []byte, path string) (*index, error) {
	gen, err := readGeneration(data, path)
	if err != nil {
		return nil, err
	}
	body, err := splitEnvelope(data, path)
	if err != nil {
		return nil, err
	}
	ix := index{gen: gen}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ix); err != nil {
		return nil, fmt.Errorf("%s: index body: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: index body: data after the JSON object", path)
	}
	return &ix, nil
}

// loadIndex reads, decodes and validates dir/index.json.
func loadIndex(dir string) (*index, *layout, error) {
	data, path, err := readIndexFile(dir)
	if err != nil {
		return nil, nil, err
	}
	ix, err := decodeIndex(data, path)
	if err != nil {
		return nil, nil, err
	}
	l, err := checkIndex(ix)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return ix, l, nil
}

// readIndexFile reads dir/index.json with a size bound.
func readIndexFile(dir string) ([]byte, string, error) {
	path := filepath.Join(dir, IndexFile)
	st, err := os.Stat(dir)
	if err != nil {
		return nil, path, fmt.Errorf("open container: %w", err)
	}
	if !st.IsDir() {
		return nil, path, fmt.Errorf("%s: is a file, not a container directory", dir)
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, path, fmt.Errorf("%s: %w", dir, ErrNotContainer)
	}
	if err != nil {
		return nil, path, fmt.Errorf("open container index: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIndexBytes+1))
	if err != nil {
		return nil, path, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxIndexBytes {
		return nil, path, fmt.Errorf("%s: larger than the %d-byte limit for an index", path, maxIndexBytes)
	}
	return data, path, nil
}

func parseDigest(s string) ([32]byte, error) {
	var d [32]byte
	if len(s) != 64 {
		return d, fmt.Errorf("digest %q is not 64 hex digits", s)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return d, fmt.Errorf("digest %q is not lowercase hex", s)
		}
	}
	_, err := hex.Decode(d[:], []byte(s))
	return d, err
}

func hexDigest(d [32]byte) string { return hex.EncodeToString(d[:]) }

// validName accepts region names: printable ASCII without quotes or slashes,
// so that names print unambiguously in errors and never look like paths.
var validName = regexp.MustCompile(`^[A-Za-z0-9_.:\-+ ]{1,200}$`)
