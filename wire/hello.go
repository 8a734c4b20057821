package wire

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Digest is a 32-byte identity digest (of a model, or of a learned codec).
type Digest [32]byte

func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// LayerRange is a half-open range of transformer layers [Start, End).
type LayerRange struct{ Start, End uint32 }

func (r LayerRange) String() string { return fmt.Sprintf("[%d,%d)", r.Start, r.End) }

// CodecDigest identifies the learned codec used at one layer boundary (the
// activations entering layer Boundary).
type CodecDigest struct {
	Boundary uint32
	ID       uint32 // the short id carried in frame headers
	Digest   Digest
}

// Hello is the payload of Hello (sent by the upstream side) and HelloAck
// (sent back by the downstream side).
type Hello struct {
	// Generation is, in a Hello, the highest generation the sender speaks;
	// in a HelloAck, the generation chosen.
	Generation    uint16
	MinGeneration uint16
	MaxGeneration uint16
	Model         Digest     // identity of the whole model
	Layers        LayerRange // the sender's layers
	PeerLayers    LayerRange // the layers the sender expects the receiver to hold
	Width         uint32     // hidden width
	Vocab         uint32     // vocabulary size
	// Encodings lists the activation encodings the sender can decode, in
	// strictly increasing id order.
	Encodings []EncodingID
	// Encoding is the encoding requested (Hello) or accepted (HelloAck), and
	// Codec the learned codec's short id when Encoding is lowrank, else 0.
	// CheckHello does not consult these in the downstream side's own Hello.
	Encoding EncodingID
	Codec    uint32
	// Codecs lists the learned codecs the sender holds, by strictly
	// increasing boundary layer.
	Codecs []CodecDigest
	Name   string // the sender's name, for logs; UTF-8, at most MaxNameBytes
}

// Bounds of the Hello payload.
const (
	MaxHelloEncodings = 64
	MaxCodecDigests   = 1024
	MaxNameBytes      = 255
	helloFixed        = 67 // bytes before the encoding count
	codecEntryBytes   = 4 + 4 + 32
	// MaxHelloPayload is the largest valid Hello payload.
	MaxHelloPayload = helloFixed + 1 + MaxHelloEncodings + 2 + MaxCodecDigests*codecEntryBytes + 1 + MaxNameBytes
	minHelloPayload = helloFixed + 1 + 1 + 2 + 1
)

// validate checks a Hello's internal consistency. withRequest also checks
// the Encoding/Codec request fields, which the downstream's own Hello may
// leave unset.
func (h *Hello) validate(withRequest bool) error {
	switch {
	case h.MinGeneration == 0 || h.MinGeneration > h.MaxGeneration:
		return fmt.Errorf("hello: generation range %d..%d is empty or starts at 0: %w", h.MinGeneration, h.MaxGeneration, ErrMalformed)
	case h.Generation < h.MinGeneration || h.Generation > h.MaxGeneration:
		return fmt.Errorf("hello: generation %d outside its own range %d..%d: %w", h.Generation, h.MinGeneration, h.MaxGeneration, ErrMalformed)
	case h.Layers.Start > h.Layers.End || h.PeerLayers.Start > h.PeerLayers.End:
		return fmt.Errorf("hello: layer ranges %v and %v must have start <= end: %w", h.Layers, h.PeerLayers, ErrMalformed)
	case h.Width == 0 || h.Vocab == 0:
		return fmt.Errorf("hello: width %d and vocab %d must be positive: %w", h.Width, h.Vocab, ErrMalformed)
	case len(h.Encodings) == 0 || len(h.Encodings) > MaxHelloEncodings:
		return fmt.Errorf("hello: %d encodings, want 1..%d: %w", len(h.Encodings), MaxHelloEncodings, ErrLimit)
	case len(h.Codecs) > MaxCodecDigests:
		return fmt.Errorf("hello: %d codec digests, limit %d: %w", len(h.Codecs), MaxCodecDigests, ErrLimit)
	}
	for i, e := range h.Encodings {
		if e == EncodingNone || (i > 0 && e <= h.Encodings[i-1]) {
			return fmt.Errorf("hello: encodings %v must be nonzero and strictly increasing: %w", h.Encodings, ErrMalformed)
		}
	}
	for i, c := range h.Codecs {
		if c.ID == 0 || (i > 0 && c.Boundary <= h.Codecs[i-1].Boundary) {
			return fmt.Errorf("hello: codec %d (boundary %d, id %d): ids must be nonzero and boundaries strictly increasing: %w", i, c.Boundary, c.ID, ErrMalformed)
		}
	}
	if err := checkString("hello: name", h.Name, MaxNameBytes); err != nil {
		return err
	}
	if withRequest {
		return h.validateRequest()
	}
	return nil
}

func (h *Hello) validateRequest() error {
	if !slices.Contains(h.Encodings, h.Encoding) {
		return fmt.Errorf("hello: encoding %v is not among its own %s: %w", h.Encoding, encList(h.Encodings), ErrMalformed)
	}
	if (h.Encoding == EncodingLowRank) != (h.Codec != 0) {
		return fmt.Errorf("hello: codec id %d with encoding %v (nonzero exactly for lowrank): %w", h.Codec, h.Encoding, ErrMalformed)
	}
	return nil
}

// AppendHello appends the payload encoding of h (see docs/wire.md) to dst.
func AppendHello(dst []byte, h *Hello) ([]byte, error) {
	if err := h.validate(true); err != nil {
		return dst, err
	}
	dst = le.AppendUint16(dst, h.Generation)
	dst = le.AppendUint16(dst, h.MinGeneration)
	dst = le.AppendUint16(dst, h.MaxGeneration)
	dst = append(dst, h.Model[:]...)
	for _, v := range []uint32{h.Layers.Start, h.Layers.End, h.PeerLayers.Start, h.PeerLayers.End, h.Width, h.Vocab} {
		dst = le.AppendUint32(dst, v)
	}
	dst = append(dst, byte(h.Encoding))
	dst = le.AppendUint32(dst, h.Codec)
	dst = append(dst, byte(len(h.Encodings)))
	for _, e := range h.Encodings {
		dst = append(dst, byte(e))
	}
	dst = le.AppendUint16(dst, uint16(len(h.Codecs)))
	for _, c := range h.Codecs {
		dst = le.AppendUint32(dst, c.Boundary)
		dst = le.AppendUint32(dst, c.ID)
		dst = append(dst, c.Digest[:]...)
	}
	dst = append(dst, byte(len(h.Name)))
	return append(dst, h.Name...), nil
}

// reader consumes a byte slice; the first short read sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("%s: need %d bytes, %d remain: %w", what, n, len(r.b), ErrMalformed)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8(what string) uint8 {
	if b := r.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if b := r.take(2, what); b != nil {
		return le.Uint16(b)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if b := r.take(4, what); b != nil {
		return le.Uint32(b)
	}
	return 0
}

// DecodeHello parses and validates a Hello or HelloAck payload. Every count
// is checked against its bound before anything is allocated, and trailing
// bytes are an error.
func DecodeHello(src []byte) (Hello, error) {
	if len(src) > MaxHelloPayload {
		return Hello{}, fmt.Errorf("hello: %d bytes, limit %d: %w", len(src), MaxHelloPayload, ErrLimit)
	}
	r := &reader{b: src}
	var h Hello
	h.Generation, h.MinGeneration, h.MaxGeneration = r.u16("hello generation"), r.u16("hello min generation"), r.u16("hello max generation")
	copy(h.Model[:], r.take(32, "hello model digest"))
	h.Layers = LayerRange{r.u32("hello layers"), r.u32("hello layers")}
	h.PeerLayers = LayerRange{r.u32("hello peer layers"), r.u32("hello peer layers")}
	h.Width, h.Vocab = r.u32("hello width"), r.u32("hello vocab")
	h.Encoding = EncodingID(r.u8("hello encoding"))
	h.Codec = r.u32("hello codec")
	n := int(r.u8("hello encoding count"))
	if n > MaxHelloEncodings {
		return Hello{}, fmt.Errorf("hello: %d encodings, limit %d: %w", n, MaxHelloEncodings, ErrLimit)
	}
	for _, b := range r.take(n, "hello encodings") {
		h.Encodings = append(h.Encodings, EncodingID(b))
	}
	n = int(r.u16("hello codec count"))
	if n > MaxCodecDigests {
		return Hello{}, fmt.Errorf("hello: %d codec digests, limit %d: %w", n, MaxCodecDigests, ErrLimit)
	}
	if entries := r.take(n*codecEntryBytes, "hello codec digests"); entries != nil && n > 0 {
		h.Codecs = make([]CodecDigest, n)
		for i := range h.Codecs {
			e := entries[i*codecEntryBytes:]
			h.Codecs[i].Boundary, h.Codecs[i].ID = le.Uint32(e), le.Uint32(e[4:])
			copy(h.Codecs[i].Digest[:], e[8:40])
		}
	}
	h.Name = string(r.take(int(r.u8("hello name length")), "hello name"))
	if r.err != nil {
		return Hello{}, r.err
	}
	if len(r.b) != 0 {
		return Hello{}, fmt.Errorf("hello: %d trailing bytes: %w", len(r.b), ErrMalformed)
	}
	if err := h.validate(true); err != nil {
		return Hello{}, err
	}
	return h, nil
}

// Agreement is what a successful handshake fixes for a connection.
type Agreement struct {
	Generation uint16
	Encoding   EncodingID
	Codec      uint32 // learned codec short id when Encoding is lowrank
	Boundary   uint32 // the layer the activations enter
	Width      uint32
	Vocab      uint32
}

// CheckHello is run by the downstream side on the upstream's Hello. It
// reports every mismatch in one error, each naming both values, and returns
// the agreement to answer with (see Ack) and to Pin on the Framer.
func CheckHello(local, remote *Hello) (Agreement, error) {
	if err := local.validate(false); err != nil {
		return Agreement{}, fmt.Errorf("our own hello: %w", err)
	}
	return checkPair(remote, local, false)
}

// CheckHelloAck is run by the upstream side on the downstream's HelloAck,
// against the Hello it sent.
func CheckHelloAck(local, remote *Hello) (Agreement, error) {
	if err := local.validate(true); err != nil {
		return Agreement{}, fmt.Errorf("our own hello: %w", err)
	}
	return checkPair(local, remote, true)
}

// Ack returns the downstream's HelloAck: its own Hello with the agreed
// generation, encoding and codec.
func Ack(local Hello, a Agreement) Hello {
	local.Generation, local.Encoding, local.Codec = a.Generation, a.Encoding, a.Codec
	return local
}

// mismatches collects handshake disagreements as one-line messages.
type mismatches struct {
	up, down string // "upstream (us)" / "downstream (peer)" and vice versa
	msgs     []string
	genErr   bool
}

func (m *mismatches) add(format string, args ...any) {
	m.msgs = append(m.msgs, fmt.Sprintf(format, args...))
}

func checkPair(up, down *Hello, upIsLocal bool) (Agreement, error) {
	m := &mismatches{up: "upstream (peer)", down: "downstream (us)"}
	if upIsLocal {
		m.up, m.down = "upstream (us)", "downstream (peer)"
	}
	a := Agreement{Encoding: up.Encoding, Codec: up.Codec, Boundary: up.Layers.End, Width: up.Width, Vocab: up.Vocab}
	a.Generation = m.generation(up, down, upIsLocal)
	if up.Model != down.Model {
		m.add("model digest: %s %s, %s %s", m.up, up.Model, m.down, down.Model)
	}
	// A head holds no layers (its range is empty): it sends token ids in and
	// takes results out, and checks itself that the stages' ranges tile the
	// model. The boundary checks apply between stages.
	if up.Layers.Start != up.Layers.End {
		m.layers(up, down)
	}
	if up.Width != down.Width {
		m.add("hidden width: %s %d, %s %d", m.up, up.Width, m.down, down.Width)
	}
	if up.Vocab != down.Vocab {
		m.add("vocab size: %s %d, %s %d", m.up, up.Vocab, m.down, down.Vocab)
	}
	m.encoding(up, down, upIsLocal)
	m.codecs(up, down)
	if len(m.msgs) == 0 {
		return a, nil
	}
	err := fmt.Errorf("handshake: %s: %w", strings.Join(m.msgs, "; "), ErrHandshake)
	if m.genErr {
		err = fmt.Errorf("%w (%w)", err, ErrGeneration)
	}
	return Agreement{}, err
}

// generation picks the highest generation both ranges hold; in an ack it
// also checks that the downstream picked exactly that one.
func (m *mismatches) generation(up, down *Hello, isAck bool) uint16 {
	lo, hi := max(up.MinGeneration, down.MinGeneration), min(up.MaxGeneration, down.MaxGeneration)
	if lo > hi {
		m.genErr = true
		m.add("generation: %s speaks %d..%d, %s speaks %d..%d", m.up, up.MinGeneration, up.MaxGeneration, m.down, down.MinGeneration, down.MaxGeneration)
		return 0
	}
	if isAck && down.Generation != hi {
		m.genErr = true
		m.add("generation: %s chose %d, %s expected %d", m.down, down.Generation, m.up, hi)
	}
	return hi
}

func (m *mismatches) layers(up, down *Hello) {
	if up.Layers.End != down.Layers.Start {
		m.add("layer boundary: %s holds %v ending at %d, %s holds %v starting at %d", m.up, up.Layers, up.Layers.End, m.down, down.Layers, down.Layers.Start)
	}
	if up.PeerLayers != down.Layers {
		m.add("layer range: %s expects downstream to hold %v, %s holds %v", m.up, up.PeerLayers, m.down, down.Layers)
	}
	if down.PeerLayers != up.Layers {
		m.add("layer range: %s expects upstream to hold %v, %s holds %v", m.down, down.PeerLayers, m.up, up.Layers)
	}
}

func (m *mismatches) encoding(up, down *Hello, isAck bool) {
	if !slices.Contains(down.Encodings, up.Encoding) {
		m.add("encoding: %s requests %v (id %d), %s supports %s", m.up, up.Encoding, up.Encoding, m.down, encList(down.Encodings))
	}
	if isAck && (down.Encoding != up.Encoding || down.Codec != up.Codec) {
		m.add("encoding: %s requested %v codec %d, %s accepted %v codec %d", m.up, up.Encoding, up.Codec, m.down, down.Encoding, down.Codec)
	}
}

// codecs checks that codecs both sides hold for the same boundary are the
// same codec, and that a lowrank request names the boundary's codec.
func (m *mismatches) codecs(up, down *Hello) {
	for _, u := range up.Codecs {
		if d, ok := findCodec(down.Codecs, u.Boundary); ok && d != u {
			m.add("codec digest at layer %d: %s id %d digest %s, %s id %d digest %s", u.Boundary, m.up, u.ID, u.Digest, m.down, d.ID, d.Digest)
		}
	}
	if up.Encoding != EncodingLowRank {
		return
	}
	b := up.Layers.End
	u, uok := findCodec(up.Codecs, b)
	d, dok := findCodec(down.Codecs, b)
	switch {
	case !uok || !dok:
		m.add("codec digest at layer %d: %s %s, %s %s", b, m.up, describeCodec(u, uok), m.down, describeCodec(d, dok))
	case up.Codec != u.ID:
		m.add("codec id: %s requests codec %d but holds codec %d for layer %d; %s holds %d", m.up, up.Codec, u.ID, b, m.down, d.ID)
	}
}

func findCodec(cs []CodecDigest, boundary uint32) (CodecDigest, bool) {
	i, ok := slices.BinarySearchFunc(cs, boundary, func(c CodecDigest, b uint32) int {
		return int(int64(c.Boundary) - int64(b))
	})
	if !ok {
		return CodecDigest{}, false
	}
	return cs[i], true
}

func describeCodec(c CodecDigest, ok bool) string {
	if !ok {
		return "has none"
	}
	return fmt.Sprintf("has id %d digest %s", c.ID, c.Digest)
}

func encList(ids []EncodingID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}
