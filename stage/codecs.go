package stage

import (
	"fmt"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/wire"
)

// UseCodecs sets up the learned codecs of a stage's two boundaries: the one
// entering its first layer (it decodes what its upstream sends) and the one
// entering the layer after its last (it encodes what it sends downstream).
// Their digests go into the stage's Hello, so a peer holding a different
// codec for a shared boundary is refused at handshake.
func UseCodecs(cfg *Config, byBoundary map[int]*codec.Codec) error {
	if cfg.Model == nil {
		return fmt.Errorf("stage: no model")
	}
	w := cfg.Model.W
	reg := wire.NewRegistry()
	mine := map[int]*codec.Codec{}
	for _, b := range []int{w.First, w.Last} {
		c, ok := byBoundary[b]
		if !ok || b == 0 || b == w.Config.NLayers {
			continue
		}
		if err := reg.RegisterCodec(codec.NewWire(c)); err != nil {
			return fmt.Errorf("codec for boundary %d: %w", b, err)
		}
		mine[b] = c
	}
	cfg.Registry, cfg.Codecs = reg, codec.Digests(mine)
	return nil
}
