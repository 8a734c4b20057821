package wire

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Route is the body of a Route frame: the head tells a stage which stage
// follows it, so that activations flow stage to stage and only results come
// back to the head. The stage dials Addr and runs the boundary handshake as
// its upstream, expecting the peer to hold Peer, and requesting Encoding
// (and Codec when Encoding is lowrank). The stage answers with an empty
// Route frame (the ack) carrying the same request id, or with an Error.
//
//	offset size field
//	0      4    peer layer range start (u32)
//	4      4    peer layer range end (u32), > start
//	8      1    encoding id
//	9      4    codec short id (nonzero exactly when the encoding is lowrank)
//	13     2    address length n (u16, 1..MaxAddrBytes)
//	15     n    address, host:port in UTF-8
type Route struct {
	Addr     string
	Peer     LayerRange
	Encoding EncodingID
	Codec    uint32
}

const (
	routeFixed = 15
	// MaxAddrBytes bounds a Route's address.
	MaxAddrBytes = 255
)

// AppendRoute appends the encoding of r to dst.
func AppendRoute(dst []byte, r *Route) ([]byte, error) {
	if err := r.validate(); err != nil {
		return dst, err
	}
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, r.Peer.Start)
	dst = le.AppendUint32(dst, r.Peer.End)
	dst = append(dst, byte(r.Encoding))
	dst = le.AppendUint32(dst, r.Codec)
	dst = le.AppendUint16(dst, uint16(len(r.Addr)))
	return append(dst, r.Addr...), nil
}

// DecodeRoute parses a Route payload.
func DecodeRoute(src []byte) (Route, error) {
	if len(src) < routeFixed {
		return Route{}, fmt.Errorf("route payload of %d bytes, need at least %d: %w", len(src), routeFixed, ErrMalformed)
	}
	le := binary.LittleEndian
	r := Route{
		Peer:     LayerRange{Start: le.Uint32(src[0:]), End: le.Uint32(src[4:])},
		Encoding: EncodingID(src[8]),
		Codec:    le.Uint32(src[9:]),
	}
	n := int(le.Uint16(src[13:]))
	if len(src) != routeFixed+n {
		return Route{}, fmt.Errorf("route address declared %d bytes, payload holds %d: %w", n, len(src)-routeFixed, ErrMalformed)
	}
	r.Addr = string(src[routeFixed:])
	return r, r.validate()
}

func (r *Route) validate() error {
	switch {
	case len(r.Addr) == 0 || len(r.Addr) > MaxAddrBytes || !utf8.ValidString(r.Addr):
		return fmt.Errorf("route address of %d bytes, want 1..%d of UTF-8: %w", len(r.Addr), MaxAddrBytes, ErrMalformed)
	case r.Peer.End <= r.Peer.Start:
		return fmt.Errorf("route peer layer range %v is empty: %w", r.Peer, ErrMalformed)
	case r.Encoding == EncodingNone:
		return fmt.Errorf("route encoding is none: %w", ErrMalformed)
	case (r.Encoding == EncodingLowRank) != (r.Codec != 0):
		return fmt.Errorf("route encoding %v with codec %#x: a codec id goes with lowrank only: %w", r.Encoding, r.Codec, ErrMalformed)
	}
	return nil
}

// WriteRoute writes a Route frame asking the stage to connect downstream.
func (fr *Framer) WriteRoute(m Meta, r *Route) error {
	b, err := AppendRoute(fr.startPayload(), r)
	if err != nil {
		return fmt.Errorf("write route frame: %w", err)
	}
	return fr.finish(Header{Kind: KindRoute, Request: m.Request}, b)
}

// WriteRouteAck writes the empty Route frame that acknowledges a route.
func (fr *Framer) WriteRouteAck(m Meta) error {
	return fr.finish(Header{Kind: KindRoute, Request: m.Request}, fr.startPayload())
}

// Route decodes the payload of a Route frame; an ack has none.
func (f *Frame) Route() (Route, error) {
	if f.Kind != KindRoute {
		return Route{}, fmt.Errorf("%v frame is not a route: %w", f.Kind, ErrMalformed)
	}
	if len(f.Payload) == 0 {
		return Route{}, fmt.Errorf("route frame is an ack and carries no route: %w", ErrMalformed)
	}
	return DecodeRoute(f.Payload)
}
