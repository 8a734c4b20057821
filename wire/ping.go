package wire

import (
	"fmt"
)

// PingGeneration is the first protocol generation with Ping frames.
const PingGeneration uint16 = 2

// RefusalsGeneration is the first protocol generation whose stage stats
// carry the stage's prefill limit and its refusal counters after the 48
// bytes of generations 2 and 3 (StatsSizeRefusals bytes in all). A head and
// a stage that agree an older generation exchange the 48-byte stats, so
// neither side of an older peer ever sees the longer payload.
const RefusalsGeneration uint16 = 4

// StageStats is the payload of a stage's answer to a Ping: counters since
// the stage started (cumulative over every head it served) and what it holds
// now. A head derives time per token and bytes per token from the
// differences between two answers.
//
//	offset size field
//	0      8    compute ns: time spent computing frames (embedding, layers, logits)
//	8      8    positions: token positions computed
//	16     8    down bytes: bytes of Prefill and Decode frames sent to downstream stages
//	24     8    result bytes: bytes of Result frames sent to heads
//	32     8    kv bytes: bytes of KV cache held now
//	40     4    sessions: sessions held now
//	44     4    max sessions: the stage's session limit
//
// From RefusalsGeneration on, the answer goes on:
//
//	48     4    max prefill: the most tokens the stage takes in one Prefill frame
//	52     104  refusals: 13 u64 counters, in the order of Refusals' fields
type StageStats struct {
	ComputeNanos uint64
	Positions    uint64
	DownBytes    uint64
	ResultBytes  uint64
	KVBytes      uint64
	Sessions     uint32
	MaxSessions  uint32
	// MaxPrefill and Refusals travel from RefusalsGeneration on; an answer
	// of an older generation leaves them zero.
	MaxPrefill uint32
	Refusals   Refusals
}

// Refusals counts what a stage refused, cut off or abandoned since it
// started, one counter per limit (docs/reliability.md names the flag of
// each). On the wire they follow each other as u64s in this order.
type Refusals struct {
	Conns               uint64 // connections closed as accepted: --max-conns were held
	PreHandshake        uint64 // first frames refused before the handshake: too large, malformed, not a Hello, another generation
	Handshakes          uint64 // Hellos refused for a mismatch (model, layers, width, encoding, codec, generation)
	Trickled            uint64 // frames cut off for taking longer than --timeout to arrive
	Sessions            uint64 // sessions refused: the stage held --max-sessions
	SessionsPerConn     uint64 // sessions refused: the head connection held --max-sessions-per-conn
	SessionsPerIdentity uint64 // sessions refused: the peer's identity held --max-sessions-per-identity
	Prefill             uint64 // Prefill frames refused for carrying more than --max-prefill tokens
	InFlight            uint64 // frames refused: the connection had --max-inflight-tokens tokens in flight
	QueueFull           uint64 // frames refused: the connection had --max-queue frames not yet computed
	Idle                uint64 // connections closed for sending nothing: --timeout before the handshake, --idle-timeout after it
	Routes              uint64 // routes refused or failed: not allowed, or the dial or the downstream handshake failed
	Cancelled           uint64 // frames abandoned, queued or mid-computation: their head closed or reset the session, or a connection they needed ended
	KV                  uint64 // frames refused: the KV cache budget (--kv-budget) had no room for their positions
}

// counters lists the fields in wire order.
func (r *Refusals) counters() [refusalCounters]*uint64 {
	return [refusalCounters]*uint64{&r.Conns, &r.PreHandshake, &r.Handshakes, &r.Trickled, &r.Sessions, &r.SessionsPerConn,
		&r.SessionsPerIdentity, &r.Prefill, &r.InFlight, &r.QueueFull, &r.Idle, &r.Routes, &r.Cancelled, &r.KV}
}

// Sizes of a StageStats payload.
const (
	// StatsSize is the size in generations 2 and 3.
	StatsSize = 48
	// StatsSizeRefusals is the size from RefusalsGeneration on.
	StatsSizeRefusals = StatsSize + 4 + 8*refusalCounters
	refusalCounters   = 14
)

// StatsSizeFor is the size of a stage's stats in generation gen.
func StatsSizeFor(gen uint16) int {
	if gen >= RefusalsGeneration {
		return StatsSizeRefusals
	}
	return StatsSize
}

// AppendStageStats appends the 48-byte encoding of s that generations 2 and
// 3 use to dst.
func AppendStageStats(dst []byte, s *StageStats) []byte {
	dst = le.AppendUint64(dst, s.ComputeNanos)
	dst = le.AppendUint64(dst, s.Positions)
	dst = le.AppendUint64(dst, s.DownBytes)
	dst = le.AppendUint64(dst, s.ResultBytes)
	dst = le.AppendUint64(dst, s.KVBytes)
	dst = le.AppendUint32(dst, s.Sessions)
	return le.AppendUint32(dst, s.MaxSessions)
}

// AppendStageStatsFor appends the encoding of s in generation gen: from
// RefusalsGeneration on with the prefill limit and the refusal counters.
func AppendStageStatsFor(dst []byte, s *StageStats, gen uint16) []byte {
	dst = AppendStageStats(dst, s)
	if gen < RefusalsGeneration {
		return dst
	}
	dst = le.AppendUint32(dst, s.MaxPrefill)
	r := s.Refusals
	for _, c := range r.counters() {
		dst = le.AppendUint64(dst, *c)
	}
	return dst
}

// DecodeStageStats parses a 48-byte StageStats payload of generation 2 or 3.
func DecodeStageStats(src []byte) (StageStats, error) {
	return DecodeStageStatsFor(PingGeneration, src)
}

// DecodeStageStatsFor parses a StageStats payload of generation gen, which
// must be exactly StatsSizeFor(gen) bytes.
func DecodeStageStatsFor(gen uint16, src []byte) (StageStats, error) {
	if want := StatsSizeFor(gen); len(src) != want {
		return StageStats{}, fmt.Errorf("stage stats payload of %d bytes, want %d in generation %d: %w", len(src), want, gen, ErrMalformed)
	}
	s := StageStats{
		ComputeNanos: le.Uint64(src[0:]), Positions: le.Uint64(src[8:]), DownBytes: le.Uint64(src[16:]),
		ResultBytes: le.Uint64(src[24:]), KVBytes: le.Uint64(src[32:]), Sessions: le.Uint32(src[40:]), MaxSessions: le.Uint32(src[44:]),
	}
	if s.Sessions > s.MaxSessions {
		return StageStats{}, fmt.Errorf("stage stats: %d sessions held, above the limit of %d: %w", s.Sessions, s.MaxSessions, ErrMalformed)
	}
	if gen < RefusalsGeneration {
		return s, nil
	}
	s.MaxPrefill = le.Uint32(src[StatsSize:])
	for i, c := range s.Refusals.counters() {
		*c = le.Uint64(src[StatsSize+4+8*i:])
	}
	return s, nil
}

// WritePing writes a head's Ping (stats == nil: an empty payload) or a
// stage's answer carrying its stats, under request id req, in the layout
// of the Framer's generation.
func (fr *Framer) WritePing(req uint64, stats *StageStats) error {
	b := fr.startPayload()
	if stats != nil {
		h := Header{}
		b = AppendStageStatsFor(b, stats, fr.stamp(&h).Generation)
	}
	return fr.finish(Header{Kind: KindPing, Request: req}, b)
}

// StageStats decodes the payload of a stage's answer to a Ping, in the
// layout of the frame's generation.
func (f *Frame) StageStats() (StageStats, error) {
	if f.Kind != KindPing {
		return StageStats{}, fmt.Errorf("stage stats requested from a %v frame: %w", f.Kind, ErrMalformed)
	}
	return DecodeStageStatsFor(f.Generation, f.Payload)
}

// checkPing: no flags, no tensor fields, no session, a payload of 0 (a
// head's question) or StatsSizeFor(generation) bytes (a stage's answer),
// and a generation that has Ping frames.
func checkPing(h *Header) error {
	if h.Generation < PingGeneration {
		return fmt.Errorf("ping frame in generation %d; pings exist from generation %d: %w", h.Generation, PingGeneration, ErrMalformed)
	}
	if h.Session != 0 {
		return fmt.Errorf("ping with session %d, want 0: %w", h.Session, ErrMalformed)
	}
	size := StatsSizeFor(h.Generation)
	if h.Length != 0 && int(h.Length) != size {
		return fmt.Errorf("ping payload of %d bytes, want 0 (a question) or %d (an answer in generation %d): %w", h.Length, size, h.Generation, ErrMalformed)
	}
	return checkControl(h, false, 0, size)
}
