package loader

import (
	"errors"
	"fmt"

	"github.com/seamlm/seam/container"
)

// openContainer maps only the requested layer range of a container (plus
// the embedding for a first stage and the head for a last one).
func openContainer(path string, opts Options) (*Model, error) {
	c, err := container.Open(path)
	if err != nil {
		return nil, err
	}
	last := opts.Last
	if last == 0 {
		last = c.Config().NLayers
	}
	if opts.Verify {
		if _, err := c.VerifyLayers(opts.First, last, nil); err != nil {
			return nil, fmt.Errorf("refusing to serve layers [%d, %d) of %s: %w", opts.First, last, path, err)
		}
	}
	r, err := c.OpenRange(opts.First, last)
	if err != nil {
		return nil, err
	}
	codecs, err := loadCodecs(c, opts.First, last)
	if err != nil {
		r.Close()
		return nil, err
	}
	m := &Model{Weights: r.Weights, closer: r, identity: c.Identity(), hasIdentity: true, Codecs: codecs}
	if opts.NoTokenizer {
		return m, nil
	}
	if opts.TokenizerPath != "" {
		m.Tokenizer, err = loadLlama2cTokenizer(opts.TokenizerPath, c.Config().VocabSize)
	} else if m.Tokenizer, err = c.Tokenizer(); errors.Is(err, container.ErrNoTokenizer) {
		err = fmt.Errorf("%s: %w; pass --tokenizer PATH", path, err)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return m, nil
}

// Identity returns the model identity digest that stages exchange at
// handshake: the container's stored identity, or for a GGUF file or llama2.c
// checkpoint the identity importing it would give (computed by hashing every
// weight once, then remembered).
func (m *Model) Identity() ([32]byte, error) {
	if m.hasIdentity {
		return m.identity, nil
	}
	w := m.Weights
	if m.whole != nil {
		w = m.whole
	}
	id, err := container.WeightsIdentity(w)
	if err != nil {
		return id, fmt.Errorf("%s: %w", m.Path, err)
	}
	m.identity, m.hasIdentity = id, true
	return id, nil
}
