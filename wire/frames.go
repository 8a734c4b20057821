package wire

import (
	"fmt"
	"slices"
)

// Typed payload access on a read Frame.

// Hello decodes the payload of a Hello or HelloAck frame.
func (f *Frame) Hello() (Hello, error) {
	if f.Kind != KindHello && f.Kind != KindHelloAck {
		return Hello{}, fmt.Errorf("hello payload requested from a %v frame: %w", f.Kind, ErrMalformed)
	}
	return DecodeHello(f.Payload)
}

// RemoteError decodes the payload of an Error frame.
func (f *Frame) RemoteError() (*RemoteError, error) {
	if f.Kind != KindError {
		return nil, fmt.Errorf("error payload requested from a %v frame: %w", f.Kind, ErrMalformed)
	}
	p, err := DecodeErrorPayload(f.Payload)
	if err != nil {
		return nil, err
	}
	return &RemoteError{Code: p.Code, Message: p.Message, Session: f.Session, Request: f.Request}, nil
}

// Activations decodes the activations (or logits) of a Prefill, Decode or
// Result frame into dst, reusing its storage when it has room. The header
// was checked, so Tokens*Width is within the Framer's limits.
func (f *Frame) Activations(dst []float32) ([]float32, error) {
	if f.enc == nil {
		return dst[:0], fmt.Errorf("%v frame carries no activations (flags %#02x): %w", f.Kind, uint8(f.Flags), ErrMalformed)
	}
	n := int(f.Tokens) * int(f.Width)
	dst = slices.Grow(dst[:0], n)[:n]
	if err := f.enc.Decode(dst, f.Payload, int(f.Tokens), int(f.Width)); err != nil {
		return dst[:0], fmt.Errorf("%v frame (session %d, request %d): %w", f.Kind, f.Session, f.Request, err)
	}
	return dst, nil
}

// TokenIDs decodes the token ids of a Prefill, Decode or Result frame that
// has FlagTokenIDs, into dst's storage when it has room. On a pinned Framer,
// every id must be below the agreed vocab size.
func (f *Frame) TokenIDs(dst []uint32) ([]uint32, error) {
	if f.Flags&FlagTokenIDs == 0 || f.Kind < KindPrefill || f.Kind > KindResult {
		return dst[:0], fmt.Errorf("%v frame carries no token ids (flags %#02x): %w", f.Kind, uint8(f.Flags), ErrMalformed)
	}
	dst = slices.Grow(dst[:0], int(f.Tokens))[:f.Tokens]
	for i := range dst {
		id := le.Uint32(f.Payload[4*i:])
		if f.vocab != 0 && id >= f.vocab {
			return dst[:0], fmt.Errorf("%v frame (session %d, request %d): token %d has id %d, vocab size %d: %w", f.Kind, f.Session, f.Request, i, id, f.vocab, ErrMalformed)
		}
		dst[i] = id
	}
	return dst, nil
}

// Writing.

// WriteHello writes a Hello or HelloAck frame.
func (fr *Framer) WriteHello(kind Kind, h *Hello) error {
	if kind != KindHello && kind != KindHelloAck {
		return fmt.Errorf("write hello: kind %v: %w", kind, ErrMalformed)
	}
	b, err := AppendHello(fr.startPayload(), h)
	if err != nil {
		return fmt.Errorf("write %v: %w", kind, err)
	}
	return fr.finish(Header{Kind: kind}, b)
}

// WriteActivations writes a Prefill, Decode or Result frame carrying tokens
// x width values x encoded with enc. flags may hold FlagAllLogits (Prefill).
// An encoding failure (a non-finite value, say) writes nothing.
func (fr *Framer) WriteActivations(kind Kind, flags Flags, m Meta, enc Encoding, x []float32, tokens, width int) error {
	size, err := enc.PayloadSize(tokens, width)
	if err != nil {
		return fmt.Errorf("write %v: %w", kind, err)
	}
	h := Header{Kind: kind, Flags: flags, Encoding: enc.ID(), Codec: codecOf(enc),
		Tokens: clampU32(tokens), Width: clampU32(width), Start: m.Start, Session: m.Session, Request: m.Request, Length: clampU32(size)}
	if _, err := fr.checkHeader(fr.stamp(&h)); err != nil {
		return fmt.Errorf("write %v: %w", kind, err)
	}
	if ve, ok := enc.(VariableEncoding); ok {
		frame, err := ve.AppendEncode(fr.startPayload(), x, tokens, width)
		if err != nil {
			return fmt.Errorf("write %v (session %d, request %d): %w", kind, m.Session, m.Request, err)
		}
		return fr.finish(h, frame)
	}
	frame := slices.Grow(fr.startPayload(), size)[:HeaderSize+size]
	fr.wbuf = frame[:0]
	if err := enc.Encode(frame[HeaderSize:], x, tokens, width); err != nil {
		return fmt.Errorf("write %v (session %d, request %d): %w", kind, m.Session, m.Request, err)
	}
	return fr.finish(h, frame)
}

// LastFrameBytes is the size, header included, of the last frame written:
// what a frame of a variable-length encoding took on the wire.
func (fr *Framer) LastFrameBytes() int { return fr.lastFrame }

// WriteTokenIDs writes a Prefill, Decode or Result frame carrying token ids.
// flags may add FlagAllLogits (Prefill); FlagTokenIDs is set here.
func (fr *Framer) WriteTokenIDs(kind Kind, flags Flags, m Meta, ids []uint32) error {
	if fr.pinned {
		for i, id := range ids {
			if id >= fr.agreed.Vocab {
				return fmt.Errorf("write %v: token %d has id %d, vocab size %d: %w", kind, i, id, fr.agreed.Vocab, ErrMalformed)
			}
		}
	}
	b := fr.startPayload()
	for _, id := range ids {
		b = le.AppendUint32(b, id)
	}
	h := Header{Kind: kind, Flags: flags | FlagTokenIDs, Tokens: clampU32(len(ids)), Start: m.Start, Session: m.Session, Request: m.Request}
	return fr.finish(h, b)
}

// WriteReset writes a Reset frame: clear the session's KV cache.
func (fr *Framer) WriteReset(m Meta) error {
	return fr.finish(Header{Kind: KindReset, Session: m.Session, Request: m.Request}, fr.startPayload())
}

// WriteClose writes a Close frame: end the session.
func (fr *Framer) WriteClose(m Meta) error {
	return fr.finish(Header{Kind: KindClose, Session: m.Session, Request: m.Request}, fr.startPayload())
}

// WriteError writes an Error frame; msg is truncated to MaxErrorMessage.
// Session and request 0 mean the whole connection.
func (fr *Framer) WriteError(m Meta, code ErrorCode, msg string) error {
	b, err := AppendErrorPayload(fr.startPayload(), ErrorPayload{Code: code, Message: TruncateMessage(msg)})
	if err != nil {
		return fmt.Errorf("write error frame: %w", err)
	}
	return fr.finish(Header{Kind: KindError, Session: m.Session, Request: m.Request}, b)
}

// startPayload returns the write buffer positioned after the header.
func (fr *Framer) startPayload() []byte {
	fr.wbuf = slices.Grow(fr.wbuf[:0], HeaderSize)[:HeaderSize]
	return fr.wbuf
}

// stamp sets the generation frames are written with: the agreed one, or
// before the handshake the lowest this side speaks, so that a peer of any
// generation can read the Hello (whose payload negotiates the generation)
// and answer it.
func (fr *Framer) stamp(h *Header) *Header {
	h.Generation = MinGeneration
	if fr.pinned {
		h.Generation = fr.agreed.Generation
	}
	return h
}

// finish checks h against the same rules a reader applies, then writes the
// header and payload (frame[HeaderSize:]) in one Write.
func (fr *Framer) finish(h Header, frame []byte) error {
	fr.wbuf = frame[:0] // keep any growth for reuse
	if fr.werr != nil {
		return fr.werr
	}
	h.Length = clampU32(len(frame) - HeaderSize)
	if _, err := fr.checkHeader(fr.stamp(&h)); err != nil {
		return fmt.Errorf("write %v: %w", h.Kind, err)
	}
	hdr := (*[HeaderSize]byte)(frame)
	h.CRC = 0
	h.put(hdr)
	h.CRC = frameCRC(hdr, frame[HeaderSize:])
	le.PutUint32(hdr[offCRC:], h.CRC)
	if _, err := fr.w.Write(frame); err != nil {
		fr.werr = fmt.Errorf("write %v frame: %w", h.Kind, err)
		return fr.werr
	}
	fr.lastFrame = len(frame)
	return nil
}

// clampU32 converts a size for a header field; an out-of-range size becomes
// MaxUint32, which the header checks then reject with a limit error.
func clampU32(n int) uint32 {
	if n < 0 || uint64(n) > 0xffffffff {
		return 0xffffffff
	}
	return uint32(n)
}
