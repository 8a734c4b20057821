package codec

import (
	"sort"

	"github.com/seamlm/seam/wire"
)

// Digests lists the wire identities of codecs keyed by boundary layer, in
// increasing boundary order, as a handshake carries them.
func Digests(byBoundary map[int]*Codec) []wire.CodecDigest {
	var out []wire.CodecDigest
	for b, c := range byBoundary {
		out = append(out, wire.CodecDigest{Boundary: uint32(b), ID: c.ShortID(), Digest: c.Digest()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Boundary < out[j].Boundary })
	return out
}
