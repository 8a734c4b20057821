package loader

import (
	"fmt"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/container"
)

// loadCodecs reads the boundary codecs attached to a container for the
// boundaries in [lo, hi], checking that each was fitted for this model
// and this boundary: a codec is never used where it was not fitted.
func loadCodecs(c *container.Container, lo, hi int) (map[int]*codec.Codec, error) {
	out := map[int]*codec.Codec{}
	for _, info := range c.Codecs() {
		if info.Boundary < lo || info.Boundary > hi {
			continue
		}
		b, err := c.Codec(info.Boundary)
		if err != nil {
			return nil, err
		}
		cd, err := codec.Unmarshal(b)
		if err != nil {
			return nil, fmt.Errorf("%s: codec for boundary %d (%s): %w", c.Dir(), info.Boundary, info.File, err)
		}
		if err := checkCodec(cd, info.Boundary, c.Identity(), c.Config().Dim); err != nil {
			return nil, fmt.Errorf("%s: codec for boundary %d (%s): %w", c.Dir(), info.Boundary, info.File, err)
		}
		out[info.Boundary] = cd
	}
	return out, nil
}

func checkCodec(cd *codec.Codec, boundary int, model [32]byte, width int) error {
	p := cd.Provenance()
	switch {
	case cd.Width() != width:
		return fmt.Errorf("codec is %d wide, the model's hidden width is %d", cd.Width(), width)
	case int(p.Boundary) != boundary:
		return fmt.Errorf("codec was fitted at boundary %d, attached at %d", p.Boundary, boundary)
	case p.Model != model:
		return fmt.Errorf("codec was fitted for model %x, this model is %x", p.Model, model)
	}
	return nil
}
