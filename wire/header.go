package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

var le = binary.LittleEndian

// Magic opens every frame.
const Magic = "SEAM"

// Protocol generations this implementation speaks. A generation changes
// whenever any byte layout or rule in docs/wire.md changes meaning.
const (
	MinGeneration uint16 = 1
	MaxGeneration uint16 = 4
)

// HeaderSize is the fixed size of a frame header in bytes.
const HeaderSize = 52

// Header field offsets (see docs/wire.md).
const (
	offMagic      = 0
	offGeneration = 4
	offKind       = 6
	offFlags      = 7
	offLength     = 8
	offEncoding   = 12
	offReserved   = 13 // 3 bytes, zero
	offCodec      = 16
	offTokens     = 20
	offWidth      = 24
	offStart      = 28
	offSession    = 32
	offRequest    = 40
	offCRC        = 48
)

// Kind is a frame's message kind.
type Kind uint8

// Message kinds.
const (
	KindHello    Kind = 1 // upstream -> downstream: handshake offer
	KindHelloAck Kind = 2 // downstream -> upstream: handshake acceptance
	KindPrefill  Kind = 3 // many positions: token ids or activations
	KindDecode   Kind = 4 // one position: token id or activations
	KindResult   Kind = 5 // back to the head: logits or sampled token ids
	KindReset    Kind = 6 // clear a session's KV cache
	KindClose    Kind = 7 // end a session
	KindError    Kind = 8 // code and message; the request is aborted
	KindRoute    Kind = 9 // head -> stage: connect to your downstream; empty: the stage's ack
	numKinds          = KindAssign + 1
)

// KindPing (generation 2 on): head -> stage, "are you there?"; the stage
// answers with a Ping carrying its StageStats (see ping.go).
const KindPing Kind = 10

var kindNames = [numKinds]string{"", "hello", "hello-ack", "prefill", "decode", "result", "reset", "close", "error", "route", "ping",
	"describe", "probe", "measure", "assign"}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Flags qualify a frame's payload.
type Flags uint8

const (
	// FlagTokenIDs: the payload of a Prefill, Decode or Result frame is
	// token ids (u32 each) rather than encoded activations or logits.
	FlagTokenIDs Flags = 1 << 0
	// FlagAllLogits: on a Prefill, the head wants logits after every
	// position (teacher-forced scoring), not only after the last.
	FlagAllLogits Flags = 1 << 1
	// FlagGreedy: on a Prefill or Decode, the head wants the last stage to
	// return the most likely next token (the first maximum of the logits,
	// per position) as token ids, instead of the logits themselves.
	FlagGreedy Flags = 1 << 2
)

// Header is the fixed part of a frame. Field meanings depend on Kind; fields a
// kind does not use must be zero (see docs/wire.md).
type Header struct {
	Generation uint16
	Kind       Kind
	Flags      Flags
	Length     uint32 // payload bytes that follow the header
	Encoding   EncodingID
	Codec      uint32 // learned codec short id when Encoding is EncodingLowRank, else 0
	Tokens     uint32 // positions carried
	Width      uint32 // values per position: hidden width, or vocab size for logits
	Start      uint32 // position of the first token
	Session    uint64
	Request    uint64
	CRC        uint32 // CRC32C of header (this field zeroed) and payload
}

// Meta routes a frame: which session, which request, which first position.
type Meta struct {
	Session uint64
	Request uint64
	Start   uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// put writes h into b, CRC field included as h.CRC.
func (h *Header) put(b *[HeaderSize]byte) {
	copy(b[offMagic:], Magic)
	le.PutUint16(b[offGeneration:], h.Generation)
	b[offKind] = byte(h.Kind)
	b[offFlags] = byte(h.Flags)
	le.PutUint32(b[offLength:], h.Length)
	b[offEncoding] = byte(h.Encoding)
	b[offReserved], b[offReserved+1], b[offReserved+2] = 0, 0, 0
	le.PutUint32(b[offCodec:], h.Codec)
	le.PutUint32(b[offTokens:], h.Tokens)
	le.PutUint32(b[offWidth:], h.Width)
	le.PutUint32(b[offStart:], h.Start)
	le.PutUint64(b[offSession:], h.Session)
	le.PutUint64(b[offRequest:], h.Request)
	le.PutUint32(b[offCRC:], h.CRC)
}

// parseHeader decodes b, checking only what needs no configuration: the
// magic and the reserved bytes. Everything else is checked by Framer.
func parseHeader(b *[HeaderSize]byte) (Header, error) {
	if string(b[offMagic:offMagic+4]) != Magic {
		return Header{}, fmt.Errorf("header magic %q, want %q: %w", b[offMagic:offMagic+4], Magic, ErrMalformed)
	}
	if r := b[offReserved : offReserved+3]; r[0]|r[1]|r[2] != 0 {
		return Header{}, fmt.Errorf("header reserved bytes %x, want zero: %w", r, ErrMalformed)
	}
	return Header{
		Generation: le.Uint16(b[offGeneration:]),
		Kind:       Kind(b[offKind]),
		Flags:      Flags(b[offFlags]),
		Length:     le.Uint32(b[offLength:]),
		Encoding:   EncodingID(b[offEncoding]),
		Codec:      le.Uint32(b[offCodec:]),
		Tokens:     le.Uint32(b[offTokens:]),
		Width:      le.Uint32(b[offWidth:]),
		Start:      le.Uint32(b[offStart:]),
		Session:    le.Uint64(b[offSession:]),
		Request:    le.Uint64(b[offRequest:]),
		CRC:        le.Uint32(b[offCRC:]),
	}, nil
}

// zeroCRC stands in for the CRC field while the CRC is computed.
var zeroCRC [4]byte

// frameCRC is the CRC32C of the header with its CRC field zeroed, then the payload.
func frameCRC(b *[HeaderSize]byte, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[:offCRC])
	c = crc32.Update(c, castagnoli, zeroCRC[:])
	c = crc32.Update(c, castagnoli, b[offCRC+4:])
	return crc32.Update(c, castagnoli, payload)
}
