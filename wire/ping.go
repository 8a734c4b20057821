package wire

import (
	"fmt"
)

// PingGeneration is the first protocol generation with Ping frames.
const PingGeneration uint16 = 2

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
type StageStats struct {
	ComputeNanos uint64
	Positions    uint64
	DownBytes    uint64
	ResultBytes  uint64
	KVBytes      uint64
	Sessions     uint32
	MaxSessions  uint32
}

// StatsSize is the size of a StageStats payload.
const StatsSize = 48

// AppendStageStats appends the encoding of s to dst.
func AppendStageStats(dst []byte, s *StageStats) []byte {
	dst = le.AppendUint64(dst, s.ComputeNanos)
	dst = le.AppendUint64(dst, s.Positions)
	dst = le.AppendUint64(dst, s.DownBytes)
	dst = le.AppendUint64(dst, s.ResultBytes)
	dst = le.AppendUint64(dst, s.KVBytes)
	dst = le.AppendUint32(dst, s.Sessions)
	return le.AppendUint32(dst, s.MaxSessions)
}

// DecodeStageStats parses a StageStats payload.
func DecodeStageStats(src []byte) (StageStats, error) {
	if len(src) != StatsSize {
		return StageStats{}, fmt.Errorf("stage stats payload of %d bytes, want %d: %w", len(src), StatsSize, ErrMalformed)
	}
	s := StageStats{
		ComputeNanos: le.Uint64(src[0:]), Positions: le.Uint64(src[8:]), DownBytes: le.Uint64(src[16:]),
		ResultBytes: le.Uint64(src[24:]), KVBytes: le.Uint64(src[32:]), Sessions: le.Uint32(src[40:]), MaxSessions: le.Uint32(src[44:]),
	}
	if s.Sessions > s.MaxSessions {
		return StageStats{}, fmt.Errorf("stage stats: %d sessions held, above the limit of %d: %w", s.Sessions, s.MaxSessions, ErrMalformed)
	}
	return s, nil
}

// WritePing writes a head's Ping (stats == nil: an empty payload) or a
// stage's answer carrying its stats, under request id req.
func (fr *Framer) WritePing(req uint64, stats *StageStats) error {
	b := fr.startPayload()
	if stats != nil {
		b = AppendStageStats(b, stats)
	}
	return fr.finish(Header{Kind: KindPing, Request: req}, b)
}

// StageStats decodes the payload of a stage's answer to a Ping.
func (f *Frame) StageStats() (StageStats, error) {
	if f.Kind != KindPing {
		return StageStats{}, fmt.Errorf("stage stats requested from a %v frame: %w", f.Kind, ErrMalformed)
	}
	return DecodeStageStats(f.Payload)
}

// checkPing: no flags, no tensor fields, no session, a payload of 0 (a
// head's question) or StatsSize bytes (a stage's answer), and a generation
// that has Ping frames.
func checkPing(h *Header) error {
	if h.Generation < PingGeneration {
		return fmt.Errorf("ping frame in generation %d; pings exist from generation %d: %w", h.Generation, PingGeneration, ErrMalformed)
	}
	if h.Session != 0 {
		return fmt.Errorf("ping with session %d, want 0: %w", h.Session, ErrMalformed)
	}
	if h.Length != 0 && h.Length != StatsSize {
		return fmt.Errorf("ping payload of %d bytes, want 0 (a question) or %d (an answer): %w", h.Length, StatsSize, ErrMalformed)
	}
	return checkControl(h, false, 0, StatsSize)
}
