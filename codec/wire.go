package codec

import (
	"fmt"
	"sync"

	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/wire"
)

// Wire carries a Codec on the stage wire as the lowrank activation encoding
// (wire.EncodingLowRank): a frame's payload is its tokens' codec payloads back
// to back, and the frame header's codec field is the codec's ShortID, so a
// receiver decodes a stream only with the codec it was encoded with.
//
// Wire implements wire.CodecEncoding. Like every wire encoding it allocates
// nothing per call (after its encoder pool has warmed up) and is safe for
// concurrent use. Unlike (*Codec).Encode, which maps non-finite inputs to end
// cells, Wire's Encode refuses them with wire.ErrNonFinite, as the other wire
// encodings do: a NaN never crosses a boundary disguised as a value.
type Wire struct {
	c    *Codec
	pool sync.Pool // *Encoder: one per concurrent Encode call
}

// NewWire returns the wire encoding of c: a *Wire, or for an entropy-coded
// codec a *VarWire, whose frames have a length that depends on the values.
// Register it with wire.Registry.RegisterCodec on both sides of a boundary.
// c must not be changed (SetProvenance, SetHeldoutKL) afterwards: that
// changes its ShortID.
func NewWire(c *Codec) wire.CodecEncoding {
	w := &Wire{c: c}
	w.pool.New = func() any { return c.NewEncoder() }
	if c.Variable() {
		return &VarWire{Wire: w}
	}
	return w
}

// VarWire carries an entropy-coded codec: a frame's payload is one stream
// for all its tokens, PayloadSize the most it can take.
type VarWire struct{ *Wire }

// PayloadSize implements wire.Encoding: the most bytes tokens x width can
// take.
func (w *VarWire) PayloadSize(tokens, width int) (int, error) {
	if err := w.checkShape(tokens, width); err != nil {
		return 0, err
	}
	n, err := w.c.MaxPayload(tokens)
	if err != nil {
		return 0, fmt.Errorf("lowrank codec %08x: %d tokens: %w", w.CodecID(), tokens, err)
	}
	return n, nil
}

// Encode implements wire.Encoding for callers that want a fixed size: it
// fails, since the size depends on the values. Use AppendEncode.
func (w *VarWire) Encode(dst []byte, src []float32, tokens, width int) error {
	return fmt.Errorf("lowrank codec %08x: entropy-coded, its payload size depends on the values: use AppendEncode", w.CodecID())
}

// AppendEncode implements wire.VariableEncoding. It fails with
// wire.ErrNonFinite on a NaN or infinity in src, naming the token and index.
func (w *VarWire) AppendEncode(dst []byte, src []float32, tokens, width int) ([]byte, error) {
	if err := w.checkFloats(src, tokens, width); err != nil {
		return dst, err
	}
	out, err := w.c.AppendTokens(dst, src)
	if err != nil {
		return dst, fmt.Errorf("lowrank codec %08x: %w", w.CodecID(), err)
	}
	return out, nil
}

// Decode implements wire.Encoding: src is the whole stream, 1 to
// PayloadSize bytes; one the encoder would not write is wire.ErrMalformed.
func (w *VarWire) Decode(dst []float32, src []byte, tokens, width int) error {
	size, err := w.PayloadSize(tokens, width)
	if err != nil {
		return err
	}
	if len(src) < 1 || len(src) > size || len(dst) != tokens*width {
		return fmt.Errorf("lowrank codec %08x: %d bytes and %d floats for %d tokens x %d width (at most %d bytes): %w", w.CodecID(), len(src), len(dst), tokens, width, size, wire.ErrMalformed)
	}
	return w.decode(dst, src, width)
}

var _ wire.VariableEncoding = (*VarWire)(nil)

// Codec returns the codec w carries.
func (w *Wire) Codec() *Codec { return w.c }

// ID implements wire.Encoding: always wire.EncodingLowRank.
func (w *Wire) ID() wire.EncodingID { return wire.EncodingLowRank }

// Name implements wire.Encoding. It is "lowrank", the name users give to
// --wire; CodecID tells codecs apart.
func (w *Wire) Name() string { return "lowrank" }

// CodecID implements wire.CodecEncoding: the codec's ShortID.
func (w *Wire) CodecID() uint32 { return w.c.ShortID() }

// Rank is the number of principal components the codec sends.
func (w *Wire) Rank() int { return w.c.Kept() }

// PayloadSize implements wire.Encoding: tokens x PayloadBytes, for the codec's
// own width only.
func (w *Wire) PayloadSize(tokens, width int) (int, error) {
	if err := w.checkShape(tokens, width); err != nil {
		return 0, err
	}
	n, err := tensor.MulSize(tokens, w.c.payloadBytes)
	if err != nil {
		return 0, fmt.Errorf("lowrank codec %08x: %d tokens of %d bytes: %w", w.CodecID(), tokens, w.c.payloadBytes, err)
	}
	return n, nil
}

func (w *Wire) checkShape(tokens, width int) error {
	if tokens <= 0 || width <= 0 {
		return fmt.Errorf("lowrank codec %08x: shape %d tokens x %d width: both must be positive", w.CodecID(), tokens, width)
	}
	if width != w.c.d {
		return fmt.Errorf("lowrank codec %08x: width %d, but the codec was fitted for width %d", w.CodecID(), width, w.c.d)
	}
	return nil
}

// checkFloats refuses a source of the wrong size or with a non-finite value.
func (w *Wire) checkFloats(src []float32, tokens, width int) error {
	if err := w.checkShape(tokens, width); err != nil {
		return err
	}
	if len(src) != tokens*width {
		return fmt.Errorf("lowrank codec %08x: %d floats for %d tokens x %d width", w.CodecID(), len(src), tokens, width)
	}
	for i, v := range src {
		// v-v is 0 for finite v and NaN for NaN and infinities.
		if v-v != 0 {
			return fmt.Errorf("lowrank codec %08x encode: value %v at token %d, index %d: %w", w.CodecID(), v, i/width, i%width, wire.ErrNonFinite)
		}
	}
	return nil
}

// checkSizes validates the slice lengths of an Encode or Decode call.
func (w *Wire) checkSizes(nBytes, nFloats, tokens, width int) error {
	size, err := w.PayloadSize(tokens, width)
	if err != nil {
		return err
	}
	n, err := tensor.MulSize(tokens, width)
	if err != nil {
		return fmt.Errorf("lowrank codec %08x: %d tokens x %d width: %w", w.CodecID(), tokens, width, err)
	}
	if nFloats != n {
		return fmt.Errorf("lowrank codec %08x: %d floats for %d tokens x %d width (%d)", w.CodecID(), nFloats, tokens, width, n)
	}
	if nBytes != size {
		return fmt.Errorf("lowrank codec %08x: %d bytes for %d tokens x %d width, need %d: %w", w.CodecID(), nBytes, tokens, width, size, wire.ErrMalformed)
	}
	return nil
}

// Encode implements wire.Encoding. It fails with wire.ErrNonFinite on a NaN or
// infinity in src, naming the token and index.
func (w *Wire) Encode(dst []byte, src []float32, tokens, width int) error {
	if err := w.checkSizes(len(dst), len(src), tokens, width); err != nil {
		return err
	}
	if err := w.checkFloats(src, tokens, width); err != nil {
		return err
	}
	if w.c.version >= 2 {
		if _, err := w.c.AppendTokens(dst[:0], src); err != nil {
			return fmt.Errorf("lowrank codec %08x: %w", w.CodecID(), err)
		}
		return nil
	}
	e := w.pool.Get().(*Encoder)
	err := e.EncodeBatch(dst, src)
	w.pool.Put(e)
	if err != nil {
		return fmt.Errorf("lowrank codec %08x: %w", w.CodecID(), err)
	}
	return nil
}

// Decode implements wire.Encoding. A payload the encoder would not produce
// (nonzero padding, a negative or non-finite gain) is wire.ErrMalformed; a
// reconstruction that overflows float32 is wire.ErrNonFinite.
func (w *Wire) Decode(dst []float32, src []byte, tokens, width int) error {
	if err := w.checkSizes(len(src), len(dst), tokens, width); err != nil {
		return err
	}
	return w.decode(dst, src, width)
}

// decode reconstructs validated sizes and refuses non-finite results.
func (w *Wire) decode(dst []float32, src []byte, width int) error {
	if err := w.c.DecodeTokens(dst, src); err != nil {
		return fmt.Errorf("lowrank codec %08x: %w: %w", w.CodecID(), err, wire.ErrMalformed)
	}
	for i, v := range dst {
		if v-v != 0 {
			return fmt.Errorf("lowrank codec %08x decode: value %v at token %d, index %d: %w", w.CodecID(), v, i/width, i%width, wire.ErrNonFinite)
		}
	}
	return nil
}

var _ wire.CodecEncoding = (*Wire)(nil)
