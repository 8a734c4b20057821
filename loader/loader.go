// Package loader opens a model from whatever the user points at: a GGUF file,
// a llama2.c checkpoint, or a Seam container directory, and returns its
// weights (the whole model, or a stage's layer range) and its tokenizer.
package loader

import (
	"fmt"
	"io"
	"os"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/gguf"
	"github.com/seamlm/seam/llama2c"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tokenizer"
)

// Format names a model source format.
type Format string

const (
	FormatGGUF      Format = "gguf"
	FormatLlama2c   Format = "llama2c"
	FormatContainer Format = "container"
)

// Options select what to load.
type Options struct {
	// TokenizerPath is a tokenizer: a llama2.c tokenizer.bin, a GGUF file
	// or a Hugging Face tokenizer.json (or folder). Required for llama2.c
	// checkpoints, which carry no vocabulary; it overrides a GGUF's or a
	// container's own vocabulary when given.
	TokenizerPath string
	// First and Last select the layer range [First, Last); Last == 0 means
	// every layer. Only containers open a range without mapping the rest.
	First, Last int
	// NoTokenizer skips loading a vocabulary (middle stages need none).
	NoTokenizer bool
	// Verify checks the BLAKE3 checksums of everything the range maps
	// before mapping it (container.VerifyLayers), so that a stage never
	// serves damaged weights. Only containers carry checksums: Verify with
	// a GGUF file or a llama2.c checkpoint is an error.
	Verify bool
	// Mapped leaves the weights in the file's mapping. Otherwise the held
	// layers and the classifier are copied into huge-page memory at open
	// (see resident): f32 decode runs 14-19 % faster on the development VM,
	// quantized 0-9 %, and the process holds
	// those bytes as its own memory instead of as page cache the system
	// could drop and read back. Readers that touch each weight once, such
	// as an import, want Mapped.
	Mapped bool
}

// Model is a loaded model. Close releases its mappings.
type Model struct {
	Path      string
	Format    Format
	Weights   *model.Weights
	Tokenizer tokenizer.Tokenizer // nil when Options.NoTokenizer
	// Codecs are the boundary codecs attached to a container, by boundary
	// layer, for the boundaries of the loaded range (its first and last layer).
	Codecs map[int]*codec.Codec
	// Resident is the bytes of weights copied into huge-page memory at
	// open (0 with Options.Mapped).
	Resident int64
	closer   io.Closer

	identity    [32]byte
	hasIdentity bool
	whole       *model.Weights // every layer, when Weights was narrowed from a single file
}

// Close unmaps the model's files.
func (m *Model) Close() error {
	if m.closer == nil {
		return nil
	}
	return m.closer.Close()
}

// Open loads the model at path.
func Open(path string, opts Options) (*Model, error) {
	format, err := Detect(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if !format.IsModel() {
		return nil, formatError(path, format)
	}
	if opts.Verify && format != FormatContainer {
		return nil, fmt.Errorf("%s: a %s file carries no checksums to verify; import it into a container (seam import) to have them checked", path, format)
	}
	var m *Model
	switch format {
	case FormatGGUF:
		m, err = openGGUF(path, opts)
	case FormatLlama2c:
		m, err = openLlama2c(path, opts)
	case FormatContainer:
		m, err = openContainer(path, opts)
	}
	if err != nil {
		return nil, err
	}
	m.Path, m.Format = path, format
	if err := m.restrict(opts); err != nil {
		m.Close()
		return nil, err
	}
	if !opts.Mapped {
		a, err := resident(path, m.Weights)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.closer, m.Resident = closers{a, m.closer}, a.Bytes()
		return m, nil
	}
	// Any format's f32 tensors that do not start on a cache line are
	// copied (llama2.c checkpoints always; a GGUF aligned to 32 bytes may
	// have some; others never).
	cs, err := alignF32(m.Weights)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.closer = closers{cs, m.closer}
	return m, nil
}

// restrict narrows a whole-file model to the requested layer range. The
// layers outside it stay mapped (single-file formats cannot avoid that) but
// are never touched.
func (m *Model) restrict(opts Options) error {
	w := m.Weights
	first, last := opts.First, opts.Last
	if last == 0 {
		last = w.Config.NLayers
	}
	if first < 0 || first >= last || last > w.Config.NLayers {
		return fmt.Errorf("%s: layer range [%d, %d) is not within the model's %d layers", m.Path, first, last, w.Config.NLayers)
	}
	if first == w.First && last == w.Last {
		return nil
	}
	if first < w.First || last > w.Last {
		return fmt.Errorf("%s: layer range [%d, %d) is not within the loaded layers [%d, %d)", m.Path, first, last, w.First, w.Last)
	}
	part := *w
	part.First, part.Last = first, last
	m.whole, m.Weights = w, &part
	return nil
}

func openGGUF(path string, opts Options) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m := &Model{closer: f}
	if m.Weights, err = f.LlamaWeights(); err != nil {
		f.Close()
		return nil, err
	}
	if opts.NoTokenizer {
		return m, nil
	}
	if opts.TokenizerPath != "" {
		m.Tokenizer, err = loadLlama2cTokenizer(opts.TokenizerPath, m.Weights.Config.VocabSize)
	} else {
		m.Tokenizer, err = ggufTokenizer(f, path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

func ggufTokenizer(f *gguf.File, path string) (tokenizer.Tokenizer, error) {
	v, err := tokenizer.ReadGGUFVocab(f)
	if err != nil {
		return nil, err
	}
	return tokenizer.NewFromGGUF(v, path)
}

func openLlama2c(path string, opts Options) (*Model, error) {
	c, err := llama2c.Open(path)
	if err != nil {
		return nil, err
	}
	m := &Model{Weights: c.Weights, closer: c}
	if opts.NoTokenizer {
		return m, nil
	}
	if opts.TokenizerPath == "" {
		c.Close()
		return nil, fmt.Errorf("%s: llama2.c checkpoints carry no vocabulary: pass --tokenizer PATH (a llama2.c tokenizer.bin)", path)
	}
	if m.Tokenizer, err = loadLlama2cTokenizer(opts.TokenizerPath, c.Weights.Config.VocabSize); err != nil {
		c.Close()
		return nil, err
	}
	return m, nil
}

// loadLlama2cTokenizer loads the tokenizer given with --tokenizer: a
// llama2.c tokenizer.bin of vocabSize tokens, a GGUF file's vocabulary, or a
// Hugging Face tokenizer.json (or a folder holding one). The vocabulary may
// be smaller than the model's (models pad their embeddings), never larger.
func loadLlama2cTokenizer(path string, vocabSize int) (tokenizer.Tokenizer, error) {
	var t tokenizer.Tokenizer
	var err error
	if isGGUFOrHF(path) {
		t, err = tokenizer.Load(path)
	} else if err = CheckTokenizerFile(path); err == nil {
		t, err = tokenizer.LoadLlama2c(path, vocabSize)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if t.VocabSize() > vocabSize {
		return nil, fmt.Errorf("tokenizer %s: %d tokens, more than the model's vocabulary of %d", path, t.VocabSize(), vocabSize)
	}
	return t, nil
}

// isGGUFOrHF tells a GGUF file, a tokenizer.json or a folder from a
// llama2.c tokenizer.bin by the first bytes.
func isGGUFOrHF(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	if st.IsDir() {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [4]byte
	n, _ := io.ReadFull(f, head[:])
	return string(head[:n]) == "GGUF" || (n > 0 && head[0] == '{')
}
