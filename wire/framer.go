package wire

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/seamlm/seam/tensor"
)

// Limits bound what a peer may make this side allocate. A zero field takes
// its default; DefaultLimits lists them.
type Limits struct {
	// MaxPayload bounds a frame's payload bytes, and also the f32 size
	// (tokens x width x 4) of the activations or logits a frame decodes to,
	// since a compressing codec can be much smaller on the wire.
	MaxPayload int
	MaxTokens  int // positions in one frame
	MaxWidth   int // hidden width of activations
	MaxVocab   int // width of a logits Result
}

// DefaultLimits: 64 MiB holds a 2048-token prefill at width 8192 in f32;
// the width and vocab bounds match package model's MaxDim and MaxVocab.
func DefaultLimits() Limits {
	return Limits{MaxPayload: 64 << 20, MaxTokens: 8192, MaxWidth: 1 << 16, MaxVocab: 1 << 22}
}

func (l Limits) withDefaults() (Limits, error) {
	d := DefaultLimits()
	for _, f := range []struct {
		v   *int
		def int
		nm  string
	}{{&l.MaxPayload, d.MaxPayload, "max payload"}, {&l.MaxTokens, d.MaxTokens, "max tokens"},
		{&l.MaxWidth, d.MaxWidth, "max width"}, {&l.MaxVocab, d.MaxVocab, "max vocab"}} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v < 0 || uint64(*f.v) > math.MaxUint32:
			return l, fmt.Errorf("limit %s = %d, want 1..%d (the header field is u32)", f.nm, *f.v, uint32(math.MaxUint32))
		}
	}
	return l, nil
}

// Framer reads and writes frames on a connection. Reads and writes may
// proceed concurrently with each other, but not with themselves; configure
// it (SetLimits, SetRegistry, Pin) while neither is running. After a read
// or write error the stream is out of step, so the error is sticky: the
// connection must be closed, never resynchronized.
type Framer struct {
	w      io.Writer
	r      io.Reader
	limits Limits
	reg    *Registry
	pinned bool
	agreed Agreement

	// frameTimeout, when > 0, bounds the time from a frame's first byte to
	// its last (SetFrameTimeout).
	frameTimeout time.Duration
	setDeadline  func(time.Time) error

	rhdr  [HeaderSize]byte
	rbuf  []byte // reusable payload buffer, grown only as bytes arrive
	frame Frame
	rerr  error

	wbuf []byte // reusable header+payload buffer
	werr error
	// lastFrame is the size of the last frame written (LastFrameBytes).
	lastFrame int
}

// NewFramer returns a Framer with DefaultLimits and the Default registry.
func NewFramer(w io.Writer, r io.Reader) *Framer {
	return &Framer{w: w, r: r, limits: DefaultLimits(), reg: Default}
}

// SetLimits replaces the limits; zero fields take defaults.
func (fr *Framer) SetLimits(l Limits) error {
	l, err := l.withDefaults()
	if err != nil {
		return err
	}
	fr.limits = l
	return nil
}

// Limits returns the limits in force.
func (fr *Framer) Limits() Limits { return fr.limits }

// SetRegistry selects where encodings are looked up (nil: Default).
func (fr *Framer) SetRegistry(r *Registry) {
	if r == nil {
		r = Default
	}
	fr.reg = r
}

// Pin applies a handshake's agreement to every later frame, read or written:
// the generation must be the agreed one; Prefill/Decode activations must use
// the agreed encoding, codec and width; logits must be vocab wide; token ids
// must be below vocab.
func (fr *Framer) Pin(a Agreement) {
	fr.pinned, fr.agreed = true, a
}

// SetFrameTimeout bounds how long a frame may take to arrive once its
// first byte has: ReadFrame sets a read deadline of d through setDeadline
// (a net.Conn's SetReadDeadline) when the first byte of a header arrives,
// and clears it when the frame is read. The wait for that first byte stays
// unbounded, so an idle connection is not cut, but a peer that trickles a
// frame (a byte a second) fails with a timeout. d <= 0 turns it off.
func (fr *Framer) SetFrameTimeout(setDeadline func(time.Time) error, d time.Duration) {
	fr.setDeadline, fr.frameTimeout = setDeadline, d
	if setDeadline == nil {
		fr.frameTimeout = 0
	}
}

// Frame is one frame read by a Framer. It and its Payload are valid only
// until the next ReadFrame.
type Frame struct {
	Header
	Payload []byte
	enc     Encoding
	vocab   uint32 // bound on token ids; 0 when not pinned
}

// ActivationEncoding is the encoding of a Prefill, Decode or Result frame
// carrying activations or logits, and nil otherwise.
func (f *Frame) ActivationEncoding() Encoding { return f.enc }

// ReadFrame reads the next frame. It returns io.EOF, unwrapped, only when
// the stream ends cleanly before a frame; every other failure is an error
// naming the field and values at fault.
func (fr *Framer) ReadFrame() (*Frame, error) {
	if fr.rerr != nil {
		return nil, fr.rerr
	}
	f, err := fr.readFrame()
	if err != nil {
		fr.rerr = err
		return nil, err
	}
	return f, nil
}

func (fr *Framer) readFrame() (*Frame, error) {
	if err := fr.readHeader(); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("reading frame header: %w", err)
	}
	if fr.frameTimeout > 0 {
		defer fr.setDeadline(time.Time{})
	}
	h, err := parseHeader(&fr.rhdr)
	if err != nil {
		return nil, err
	}
	enc, err := fr.checkHeader(&h)
	if err != nil {
		return nil, fmt.Errorf("%v frame (session %d, request %d): %w", h.Kind, h.Session, h.Request, err)
	}
	payload, err := fr.readPayload(int(h.Length))
	if err != nil {
		return nil, fmt.Errorf("%v frame: reading %d payload bytes: %w", h.Kind, h.Length, err)
	}
	if got := frameCRC(&fr.rhdr, payload); got != h.CRC {
		return nil, fmt.Errorf("%v frame (session %d, request %d): crc32c %#08x, header says %#08x: %w", h.Kind, h.Session, h.Request, got, h.CRC, ErrChecksum)
	}
	fr.frame = Frame{Header: h, Payload: payload, enc: enc}
	if fr.pinned {
		fr.frame.vocab = fr.agreed.Vocab
	}
	return &fr.frame, nil
}

// readHeader fills fr.rhdr, starting the frame's deadline after the first
// byte when a frame timeout is set.
func (fr *Framer) readHeader() error {
	if fr.frameTimeout <= 0 {
		_, err := io.ReadFull(fr.r, fr.rhdr[:])
		return err
	}
	if _, err := io.ReadFull(fr.r, fr.rhdr[:1]); err != nil {
		return err
	}
	fr.setDeadline(time.Now().Add(fr.frameTimeout))
	_, err := io.ReadFull(fr.r, fr.rhdr[1:])
	if err != nil {
		fr.setDeadline(time.Time{})
	}
	return unexpected(err)
}

// growStep is the first allocation for a payload larger than the buffer.
const growStep = 64 << 10

// readPayload reads n bytes into the reusable buffer. A buffer too small is
// grown by doubling as bytes actually arrive, so a peer that declares a large
// (in-limit) payload and then sends little costs little memory.
func (fr *Framer) readPayload(n int) ([]byte, error) {
	if n <= cap(fr.rbuf) {
		b := fr.rbuf[:n]
		_, err := io.ReadFull(fr.r, b)
		return b, unexpected(err)
	}
	b := fr.rbuf[:0]
	for len(b) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(n, max(2*cap(b), growStep)))
			copy(nb, b)
			b = nb
		}
		m, err := io.ReadFull(fr.r, b[len(b):min(n, cap(b))])
		b = b[:len(b)+m]
		if err != nil {
			fr.rbuf = b[:0]
			return nil, unexpected(err)
		}
	}
	fr.rbuf = b
	return b, nil
}

// unexpected turns a clean EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// checkHeader applies every rule that needs no payload: generation, kind,
// flags, fields a kind must leave zero, limits, and the declared length
// against what the kind and shape need. Writers apply it too.
func (fr *Framer) checkHeader(h *Header) (Encoding, error) {
	if err := fr.checkGeneration(h.Generation); err != nil {
		return nil, err
	}
	if int64(h.Length) > int64(fr.limits.MaxPayload) {
		return nil, fmt.Errorf("declared payload length %d exceeds limit %d: %w", h.Length, fr.limits.MaxPayload, ErrLimit)
	}
	switch h.Kind {
	case KindHello, KindHelloAck:
		return nil, checkControl(h, false, minHelloPayload, MaxHelloPayload)
	case KindReset, KindClose:
		return nil, checkControl(h, true, 0, 0)
	case KindError:
		return nil, checkControl(h, false, errorFixed, errorFixed+MaxErrorMessage)
	case KindRoute:
		if h.Length != 0 && h.Length < routeFixed+1 {
			return nil, fmt.Errorf("route payload of %d bytes, want 0 (an ack) or %d..%d: %w", h.Length, routeFixed+1, routeFixed+MaxAddrBytes, ErrMalformed)
		}
		return nil, checkControl(h, false, 0, routeFixed+MaxAddrBytes)
	case KindPrefill, KindDecode, KindResult:
		return fr.checkTensor(h)
	case KindPing:
		return nil, checkPing(h)
	case KindDescribe, KindProbe, KindMeasure, KindAssign:
		return nil, checkPool(h)
	}
	return nil, fmt.Errorf("unknown kind %d: %w", uint8(h.Kind), ErrMalformed)
}

func (fr *Framer) checkGeneration(g uint16) error {
	if fr.pinned && g != fr.agreed.Generation {
		return fmt.Errorf("generation %d, agreed %d: %w", g, fr.agreed.Generation, ErrGeneration)
	}
	if g < MinGeneration || g > MaxGeneration {
		return fmt.Errorf("generation %d, we speak %d..%d: %w", g, MinGeneration, MaxGeneration, ErrGeneration)
	}
	return nil
}

// checkControl checks a kind without a tensor: no flags, no tensor fields,
// a session only where needed, and a payload length within [lo, hi].
func checkControl(h *Header, needSession bool, lo, hi int) error {
	if h.Flags != 0 {
		return fmt.Errorf("flags %#02x, want 0: %w", uint8(h.Flags), ErrMalformed)
	}
	if h.Encoding != 0 || h.Codec != 0 || h.Tokens != 0 || h.Width != 0 || h.Start != 0 {
		return fmt.Errorf("encoding %d, codec %d, tokens %d, width %d, start %d: all must be 0: %w",
			h.Encoding, h.Codec, h.Tokens, h.Width, h.Start, ErrMalformed)
	}
	if needSession && h.Session == 0 {
		return fmt.Errorf("session id 0: %w", ErrMalformed)
	}
	if (h.Kind == KindHello || h.Kind == KindHelloAck) && (h.Session != 0 || h.Request != 0) {
		return fmt.Errorf("session %d, request %d: both must be 0: %w", h.Session, h.Request, ErrMalformed)
	}
	if int(h.Length) < lo || int(h.Length) > hi {
		return fmt.Errorf("declared payload length %d, want %d..%d: %w", h.Length, lo, hi, ErrMalformed)
	}
	return nil
}

// allowedFlags per tensor kind.
var allowedFlags = map[Kind]Flags{
	KindPrefill: FlagTokenIDs | FlagAllLogits | FlagGreedy,
	KindDecode:  FlagTokenIDs | FlagGreedy,
	KindResult:  FlagTokenIDs,
}

func (fr *Framer) checkTensor(h *Header) (Encoding, error) {
	if bad := h.Flags &^ allowedFlags[h.Kind]; bad != 0 {
		return nil, fmt.Errorf("flags %#02x not allowed: %w", uint8(bad), ErrMalformed)
	}
	if h.Session == 0 {
		return nil, fmt.Errorf("session id 0: %w", ErrMalformed)
	}
	if err := fr.checkTokens(h); err != nil {
		return nil, err
	}
	if h.Flags&FlagTokenIDs != 0 {
		if h.Encoding != 0 || h.Codec != 0 || h.Width != 0 {
			return nil, fmt.Errorf("token ids with encoding %d, codec %d, width %d: all must be 0: %w", h.Encoding, h.Codec, h.Width, ErrMalformed)
		}
		n, _ := tensor.MulSize(int(h.Tokens), 4) // Tokens <= MaxTokens < 2^32: cannot overflow
		return nil, checkLength(h, n, "token ids")
	}
	if err := fr.checkWidth(h); err != nil {
		return nil, err
	}
	if h.Encoding == EncodingNone {
		return nil, fmt.Errorf("activations with encoding 0 (none): %w", ErrMalformed)
	}
	enc, err := fr.reg.Lookup(h.Encoding, h.Codec)
	if err != nil {
		return nil, err
	}
	if fr.pinned && h.Kind != KindResult && (h.Encoding != fr.agreed.Encoding || h.Codec != fr.agreed.Codec) {
		return nil, fmt.Errorf("encoding %v codec %d, agreed %v codec %d: %w", h.Encoding, h.Codec, fr.agreed.Encoding, fr.agreed.Codec, ErrEncoding)
	}
	if err := fr.checkDecodedSize(int(h.Tokens), int(h.Width)); err != nil {
		return nil, err
	}
	size, err := enc.PayloadSize(int(h.Tokens), int(h.Width))
	if err != nil {
		return nil, fmt.Errorf("%d tokens x width %d: %w (%w)", h.Tokens, h.Width, err, ErrLimit)
	}
	if IsVariable(enc) {
		if h.Length < 1 || int64(h.Length) > int64(size) {
			return nil, fmt.Errorf("declared payload length %d, but %d tokens x width %d in %s take 1 to %d bytes: %w", h.Length, h.Tokens, h.Width, enc.Name(), size, ErrMalformed)
		}
		return enc, nil
	}
	if int64(h.Length) != int64(size) {
		return nil, fmt.Errorf("declared payload length %d, but %d tokens x width %d in %s needs %d: %w", h.Length, h.Tokens, h.Width, enc.Name(), size, ErrMalformed)
	}
	return enc, nil
}

func (fr *Framer) checkTokens(h *Header) error {
	switch {
	case h.Tokens == 0:
		return fmt.Errorf("token count 0: %w", ErrMalformed)
	case h.Kind == KindDecode && h.Tokens != 1:
		return fmt.Errorf("decode carries %d tokens, want 1: %w", h.Tokens, ErrMalformed)
	case int64(h.Tokens) > int64(fr.limits.MaxTokens):
		return fmt.Errorf("token count %d exceeds limit %d: %w", h.Tokens, fr.limits.MaxTokens, ErrLimit)
	case uint64(h.Start)+uint64(h.Tokens) > math.MaxUint32:
		return fmt.Errorf("positions %d + %d tokens overflow u32: %w", h.Start, h.Tokens, ErrMalformed)
	}
	return nil
}

func (fr *Framer) checkWidth(h *Header) error {
	limit, what := fr.limits.MaxWidth, "width"
	if h.Kind == KindResult {
		limit, what = fr.limits.MaxVocab, "logits width"
	}
	switch {
	case h.Width == 0:
		return fmt.Errorf("%s 0: %w", what, ErrMalformed)
	case int64(h.Width) > int64(limit):
		return fmt.Errorf("%s %d exceeds limit %d: %w", what, h.Width, limit, ErrLimit)
	}
	if !fr.pinned {
		return nil
	}
	want := fr.agreed.Width
	if h.Kind == KindResult {
		want = fr.agreed.Vocab
	}
	if h.Width != want {
		return fmt.Errorf("%s %d, agreed %d: %w", what, h.Width, want, ErrMalformed)
	}
	return nil
}

// checkDecodedSize bounds the f32 size a frame decodes to.
func (fr *Framer) checkDecodedSize(tokens, width int) error {
	n, err := tensor.MulSize(tokens, width)
	if err == nil {
		n, err = tensor.MulSize(n, 4)
	}
	if err != nil || n > fr.limits.MaxPayload {
		return fmt.Errorf("%d tokens x width %d decode to more than the %d-byte limit: %w", tokens, width, fr.limits.MaxPayload, ErrLimit)
	}
	return nil
}

func checkLength(h *Header, want int, what string) error {
	if int64(h.Length) != int64(want) {
		return fmt.Errorf("declared payload length %d, but %s needs %d: %w", h.Length, what, want, ErrMalformed)
	}
	return nil
}
