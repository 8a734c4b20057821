package cluster

import (
	"fmt"
	"math"
	"time"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/wire"
)

// CodecInfos describes a container's boundary codecs (by boundary layer,
// as loader.Model.Codecs and loader.Head.Codecs hold them) for
// Request.Codecs: each codec's wire identity, its payload per token, the
// held-out KL recorded when it was fitted, and its compute per token timed
// on this machine (eval.CodecCost: about 10 ms for a width-64 codec, 0.3 s
// at width 1024). A codec with no recorded KL is left out, so lowrank is
// never chosen where its cost to quality is unknown (as with an encoding
// without a measured KL).
func CodecInfos(byBoundary map[int]*codec.Codec) (map[int]CodecInfo, error) {
	out := map[int]CodecInfo{}
	for b, c := range byBoundary {
		st := c.Stats()
		if !st.HasKL {
			continue
		}
		cost, err := eval.CodecCost(c)
		if err != nil {
			return nil, fmt.Errorf("codec at boundary %d: %w", b, err)
		}
		out[b] = CodecInfo{
			Digest:        wire.CodecDigest{Boundary: uint32(b), ID: c.ShortID(), Digest: c.Digest()},
			BytesPerToken: int(math.Ceil(c.MeanPayloadBytes())),
			KL:            st.HeldoutKL,
			EncodeStep:    micros(cost.EncodeUS),
			DecodeStep:    micros(cost.DecodeUS),
			EncodePrefill: micros(cost.PrefillEncodeUS),
			DecodePrefill: micros(cost.PrefillDecodeUS),
		}
	}
	return out, nil
}

func micros(us float64) time.Duration { return time.Duration(us * 1e3) }

// HoldCodecs records that every member holds the given codecs (the
// head's container, as when the hosts of a cluster file serve copies of
// it), so lowrank is a candidate wherever the codec's KL is within the
// budget.
func (r *Request) HoldCodecs(byBoundary map[int]*codec.Codec) {
	if len(byBoundary) == 0 {
		return
	}
	ds := codec.Digests(byBoundary)
	for i := range r.Members {
		m := &r.Members[i]
		m.Codecs = ds
		if !hasEncoding(m.Encodings, wire.EncodingLowRank) {
			m.Encodings = append(m.Encodings, wire.EncodingLowRank)
		}
	}
}
