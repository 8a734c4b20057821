package loader

import (
	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tokenizer"
)

// Head is what the head of a split model needs: the shape, the vocabulary
// and the identity, but no weights.
type Head struct {
	Config    model.Config
	Tokenizer tokenizer.Tokenizer
	Identity  [32]byte
	Codecs    map[int]*codec.Codec // a container's boundary codecs, by boundary layer
}

// OpenHead reads what a head needs from path. For a container only the index
// and tokenizer are read; a single-file model is hashed once for its identity.
func OpenHead(path string, opts Options) (*Head, error) {
	format, err := Detect(path)
	if err != nil {
		return nil, err
	}
	if !format.IsModel() {
		return nil, formatError(path, format)
	}
	if format == FormatContainer {
		c, err := container.Open(path)
		if err != nil {
			return nil, err
		}
		h := &Head{Config: c.Config(), Identity: c.Identity()}
		if h.Codecs, err = loadCodecs(c, 0, h.Config.NLayers); err != nil {
			return nil, err
		}
		if opts.TokenizerPath != "" {
			h.Tokenizer, err = loadLlama2cTokenizer(opts.TokenizerPath, h.Config.VocabSize)
		} else {
			h.Tokenizer, err = c.Tokenizer()
		}
		if err != nil {
			return nil, err
		}
		return h, nil
	}
	opts.Mapped = true // hashed once, never run: no copy
	m, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	id, err := m.Identity()
	if err != nil {
		return nil, err
	}
	return &Head{Config: m.Weights.Config, Tokenizer: m.Tokenizer, Identity: id}, nil
}
