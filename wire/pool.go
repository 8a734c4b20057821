package wire

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// Payloads of the pool frames (docs/wire.md, "Pool members"): a member's
// description of itself, a link it measured, and the layer range a head
// assigns it.

// Description is a pool member's answer to Describe.
//
//	offset size field
//	0      8    free bytes: memory offered for weights and KV caches, 1 .. 2^62
//	8      8    decode ns: one layer, one token, 1 .. 60e9
//	16     8    prefill ns: one layer, per token of a batch, 1 .. 60e9
//	24     8    head ns: final norm and classifier, one position, 1 .. 60e9
type Description struct {
	Free         uint64
	DecodeNanos  uint64
	PrefillNanos uint64
	HeadNanos    uint64
}

// DescriptionSize is the size of a Description payload.
const DescriptionSize = 32

const (
	maxFree  = 1 << 62
	maxNanos = 60e9
)

// AppendDescription appends d's encoding, after checking it.
func AppendDescription(dst []byte, d *Description) ([]byte, error) {
	if err := d.check(); err != nil {
		return dst, err
	}
	dst = le.AppendUint64(dst, d.Free)
	dst = le.AppendUint64(dst, d.DecodeNanos)
	dst = le.AppendUint64(dst, d.PrefillNanos)
	return le.AppendUint64(dst, d.HeadNanos), nil
}

// DecodeDescription parses a Description payload.
func DecodeDescription(src []byte) (Description, error) {
	if len(src) != DescriptionSize {
		return Description{}, fmt.Errorf("description payload of %d bytes, want %d: %w", len(src), DescriptionSize, ErrMalformed)
	}
	d := Description{Free: le.Uint64(src), DecodeNanos: le.Uint64(src[8:]), PrefillNanos: le.Uint64(src[16:]), HeadNanos: le.Uint64(src[24:])}
	return d, d.check()
}

func (d *Description) check() error {
	if d.Free < 1 || d.Free > maxFree {
		return fmt.Errorf("description: free memory %d bytes, want 1..2^62: %w", d.Free, ErrMalformed)
	}
	for _, v := range []struct {
		name string
		ns   uint64
	}{{"decode", d.DecodeNanos}, {"prefill", d.PrefillNanos}, {"head", d.HeadNanos}} {
		if v.ns < 1 || v.ns > maxNanos {
			return fmt.Errorf("description: %s time %d ns, want 1..%d: %w", v.name, v.ns, uint64(maxNanos), ErrMalformed)
		}
	}
	return nil
}

// Assignment is a head's Assign: the layers a pool member is to serve and
// how many sessions it must hold at once (the planner budgeted their KV
// caches in the member's memory).
//
//	offset size field
//	0      4    layers start
//	4      4    layers end, start < end
//	8      4    max sessions, >= 1
type Assignment struct {
	Layers      LayerRange
	MaxSessions uint32
}

// AssignmentSize is the size of an Assignment payload.
const AssignmentSize = 12

// AppendAssignment appends a's encoding, after checking it.
func AppendAssignment(dst []byte, a *Assignment) ([]byte, error) {
	if err := a.check(); err != nil {
		return dst, err
	}
	dst = le.AppendUint32(dst, a.Layers.Start)
	dst = le.AppendUint32(dst, a.Layers.End)
	return le.AppendUint32(dst, a.MaxSessions), nil
}

// DecodeAssignment parses an Assignment payload.
func DecodeAssignment(src []byte) (Assignment, error) {
	if len(src) != AssignmentSize {
		return Assignment{}, fmt.Errorf("assignment payload of %d bytes, want %d: %w", len(src), AssignmentSize, ErrMalformed)
	}
	a := Assignment{Layers: LayerRange{Start: le.Uint32(src), End: le.Uint32(src[4:])}, MaxSessions: le.Uint32(src[8:])}
	return a, a.check()
}

func (a *Assignment) check() error {
	if a.Layers.Start >= a.Layers.End || a.MaxSessions < 1 {
		return fmt.Errorf("assignment of layers %v with %d sessions: want a non-empty range and at least 1 session: %w", a.Layers, a.MaxSessions, ErrMalformed)
	}
	return nil
}

// LinkReport is a pool member's answer to Measure: the link from it to
// the address the head named.
//
//	offset size field
//	0      8    round trip ns, 1 .. 60e9
//	8      8    bandwidth, bits per second, 1 .. 10^13
type LinkReport struct {
	RTTNanos      uint64
	BitsPerSecond uint64
}

// LinkReportSize is the size of a LinkReport payload.
const LinkReportSize = 16

// AppendLinkReport appends r's encoding, after checking it.
func AppendLinkReport(dst []byte, r *LinkReport) ([]byte, error) {
	if err := r.check(); err != nil {
		return dst, err
	}
	dst = le.AppendUint64(dst, r.RTTNanos)
	return le.AppendUint64(dst, r.BitsPerSecond), nil
}

// DecodeLinkReport parses a LinkReport payload.
func DecodeLinkReport(src []byte) (LinkReport, error) {
	if len(src) != LinkReportSize {
		return LinkReport{}, fmt.Errorf("link report payload of %d bytes, want %d: %w", len(src), LinkReportSize, ErrMalformed)
	}
	r := LinkReport{RTTNanos: le.Uint64(src), BitsPerSecond: le.Uint64(src[8:])}
	return r, r.check()
}

func (r *LinkReport) check() error {
	if r.RTTNanos < 1 || r.RTTNanos > maxNanos || r.BitsPerSecond < 1 || r.BitsPerSecond > 1e13 {
		return fmt.Errorf("link report: round trip %d ns, %d bit/s: want 1..60e9 ns and 1..1e13 bit/s: %w", r.RTTNanos, r.BitsPerSecond, ErrMalformed)
	}
	return nil
}

// A Measure request's payload is the address to measure: a length (u16,
// 1 .. MaxAddrBytes) and that many bytes of UTF-8, as in a Route.

// AppendMeasure appends the encoding of a Measure request for addr.
func AppendMeasure(dst []byte, addr string) ([]byte, error) {
	if err := checkAddr(addr); err != nil {
		return dst, err
	}
	dst = le.AppendUint16(dst, uint16(len(addr)))
	return append(dst, addr...), nil
}

// DecodeMeasure parses a Measure request's payload.
func DecodeMeasure(src []byte) (string, error) {
	if len(src) < 2 || len(src) != 2+int(le.Uint16(src)) {
		return "", fmt.Errorf("measure payload of %d bytes does not match its length prefix: %w", len(src), ErrMalformed)
	}
	addr := string(src[2:])
	return addr, checkAddr(addr)
}

func checkAddr(addr string) error {
	if len(addr) < 1 || len(addr) > MaxAddrBytes || len(addr) > math.MaxUint16 || !utf8.ValidString(addr) {
		return fmt.Errorf("address of %d bytes: want 1..%d bytes of UTF-8: %w", len(addr), MaxAddrBytes, ErrMalformed)
	}
	return nil
}

// PoolGeneration is the first protocol generation with pool frames.
const PoolGeneration uint16 = 3

// Pool frame kinds (generation PoolGeneration on). None carries a session.
const (
	// KindDescribe: head -> unassigned pool member, empty: "describe
	// yourself"; the member answers Describe with a Description.
	KindDescribe Kind = 11
	// KindProbe: n payload bytes (0 .. MaxProbeBytes) to time a link; the
	// receiver answers Probe with an empty payload once it has them all.
	KindProbe Kind = 12
	// KindMeasure: head -> pool member, an address: "measure your link to
	// it"; the member answers Measure with a LinkReport.
	KindMeasure Kind = 13
	// KindAssign: head -> pool member, an Assignment; the member maps the
	// layers and answers Assign with the same assignment, or an Error.
	KindAssign Kind = 14
)

// MaxProbeBytes bounds a Probe frame's payload.
const MaxProbeBytes = 8 << 20

// checkPool checks a pool frame's header: a generation that has pool
// frames, no flags, tensor fields or session, and a length the kind allows.
func checkPool(h *Header) error {
	if h.Generation < PoolGeneration {
		return fmt.Errorf("%v frame in generation %d; pool frames exist from generation %d: %w", h.Kind, h.Generation, PoolGeneration, ErrMalformed)
	}
	if h.Session != 0 {
		return fmt.Errorf("%v frame with session %d, want 0: %w", h.Kind, h.Session, ErrMalformed)
	}
	switch h.Kind {
	case KindDescribe:
		if h.Length != 0 && h.Length != DescriptionSize {
			return fmt.Errorf("describe payload of %d bytes, want 0 (a question) or %d (an answer): %w", h.Length, DescriptionSize, ErrMalformed)
		}
		return checkControl(h, false, 0, DescriptionSize)
	case KindProbe:
		return checkControl(h, false, 0, MaxProbeBytes)
	case KindMeasure:
		return checkControl(h, false, 3, 2+MaxAddrBytes)
	}
	return checkControl(h, false, AssignmentSize, AssignmentSize)
}

// WriteDescribe writes a head's question (d == nil) or a member's answer.
func (fr *Framer) WriteDescribe(req uint64, d *Description) error {
	b := fr.startPayload()
	if d != nil {
		var err error
		if b, err = AppendDescription(b, d); err != nil {
			return fmt.Errorf("write describe frame: %w", err)
		}
	}
	return fr.finish(Header{Kind: KindDescribe, Request: req}, b)
}

// Description decodes a member's answer to Describe.
func (f *Frame) Description() (Description, error) {
	if f.Kind != KindDescribe {
		return Description{}, fmt.Errorf("description requested from a %v frame: %w", f.Kind, ErrMalformed)
	}
	return DecodeDescription(f.Payload)
}

// WriteProbe writes a Probe of n zero bytes (n = 0: the answer).
func (fr *Framer) WriteProbe(req uint64, n int) error {
	if n < 0 || n > MaxProbeBytes {
		return fmt.Errorf("write probe frame of %d bytes, want 0..%d: %w", n, MaxProbeBytes, ErrLimit)
	}
	b := fr.startPayload()
	b = append(b, make([]byte, n)...)
	return fr.finish(Header{Kind: KindProbe, Request: req}, b)
}

// WriteMeasure writes a head's request to measure the link to addr.
func (fr *Framer) WriteMeasure(req uint64, addr string) error {
	b, err := AppendMeasure(fr.startPayload(), addr)
	if err != nil {
		return fmt.Errorf("write measure frame: %w", err)
	}
	return fr.finish(Header{Kind: KindMeasure, Request: req}, b)
}

// MeasureAddr decodes a Measure request.
func (f *Frame) MeasureAddr() (string, error) {
	if f.Kind != KindMeasure {
		return "", fmt.Errorf("measure address requested from a %v frame: %w", f.Kind, ErrMalformed)
	}
	return DecodeMeasure(f.Payload)
}

// WriteLinkReport writes a member's answer to Measure.
func (fr *Framer) WriteLinkReport(req uint64, r *LinkReport) error {
	b, err := AppendLinkReport(fr.startPayload(), r)
	if err != nil {
		return fmt.Errorf("write measure frame: %w", err)
	}
	return fr.finish(Header{Kind: KindMeasure, Request: req}, b)
}

// LinkReport decodes a member's answer to Measure.
func (f *Frame) LinkReport() (LinkReport, error) {
	if f.Kind != KindMeasure {
		return LinkReport{}, fmt.Errorf("link report requested from a %v frame: %w", f.Kind, ErrMalformed)
	}
	return DecodeLinkReport(f.Payload)
}

// WriteAssign writes a head's Assign, or a member's acknowledgement (the
// same assignment).
func (fr *Framer) WriteAssign(req uint64, a *Assignment) error {
	b, err := AppendAssignment(fr.startPayload(), a)
	if err != nil {
		return fmt.Errorf("write assign frame: %w", err)
	}
	return fr.finish(Header{Kind: KindAssign, Request: req}, b)
}

// Assignment decodes an Assign frame.
func (f *Frame) Assignment() (Assignment, error) {
	if f.Kind != KindAssign {
		return Assignment{}, fmt.Errorf("assignment requested from a %v frame: %w", f.Kind, ErrMalformed)
	}
	return DecodeAssignment(f.Payload)
}
