package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func pinnedPair(gen uint16) (w, r *Framer, buf *bytes.Buffer) {
	buf = &bytes.Buffer{}
	w, r = NewFramer(buf, nil), NewFramer(nil, buf)
	a := Agreement{Generation: gen, Encoding: EncodingF32, Width: 64, Vocab: 512}
	w.Pin(a)
	r.Pin(a)
	return w, r, buf
}

func TestPingRoundTrip(t *testing.T) {
	w, r, _ := pinnedPair(2)
	want := StageStats{ComputeNanos: 1 << 40, Positions: 12345, DownBytes: 1 << 33, ResultBytes: 7, KVBytes: 655360, Sessions: 3, MaxSessions: 64}
	if err := w.WritePing(9, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePing(9, &want); err != nil {
		t.Fatal(err)
	}
	q, err := r.ReadFrame()
	if err != nil || q.Kind != KindPing || q.Request != 9 || len(q.Payload) != 0 {
		t.Fatalf("question: %+v, %v", q, err)
	}
	a, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.StageStats()
	if err != nil || got != want || a.Request != 9 {
		t.Fatalf("answer: %+v (request %d), %v; want %+v", got, a.Request, err, want)
	}
}

// Generation 1 has no Ping: neither side may write or accept one.
func TestPingNeedsGeneration2(t *testing.T) {
	w, _, _ := pinnedPair(1)
	if err := w.WritePing(1, nil); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "pings exist from generation 2") {
		t.Fatalf("ping at generation 1: %v", err)
	}
}

func TestStageStatsRefusals(t *testing.T) {
	good := AppendStageStats(nil, &StageStats{Sessions: 1, MaxSessions: 2})
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:StatsSize-1], "47 bytes, want 48"},
		{"long", append(append([]byte{}, good...), 0), "49 bytes, want 48"},
		{"sessions over the limit", AppendStageStats(nil, &StageStats{Sessions: 3, MaxSessions: 2}), "3 sessions held, above the limit of 2"},
	} {
		if _, err := DecodeStageStats(tc.b); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	w, _, _ := pinnedPair(2)
	if err := w.finish(Header{Kind: KindPing, Session: 5}, w.startPayload()); err == nil || !strings.Contains(err.Error(), "ping with session 5") {
		t.Errorf("ping with a session: %v", err)
	}
}

func FuzzStageStats(f *testing.F) {
	f.Add(AppendStageStats(nil, &StageStats{ComputeNanos: 5, Sessions: 1, MaxSessions: 64}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeStageStats(b)
		if err != nil {
			return
		}
		if again := AppendStageStats(nil, &s); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x, was %x", again, b)
		}
	})
}

// refusalsForTest has every counter distinct, so that a field out of
// place shows.
func refusalsForTest() Refusals {
	var r Refusals
	for i, c := range r.counters() {
		*c = uint64(i+1) << (3 * i)
	}
	return r
}

// From RefusalsGeneration on the stats carry the prefill limit and the
// refusal counters, in 164 bytes; an older generation's 48 bytes carry
// neither, so an old head never meets the longer payload.
func TestStageStatsRefusalsByGeneration(t *testing.T) {
	want := StageStats{ComputeNanos: 7, Positions: 9, KVBytes: 1 << 20, Sessions: 2, MaxSessions: 64, MaxPrefill: 4096, Refusals: refusalsForTest()}
	b := AppendStageStatsFor(nil, &want, RefusalsGeneration)
	if len(b) != StatsSizeRefusals || StatsSizeRefusals != 164 {
		t.Fatalf("generation %d stats are %d bytes (StatsSizeRefusals %d), want 164", RefusalsGeneration, len(b), StatsSizeRefusals)
	}
	if got, err := DecodeStageStatsFor(RefusalsGeneration, b); err != nil || got != want {
		t.Fatalf("generation %d: %+v, %v; want %+v", RefusalsGeneration, got, err, want)
	}
	// The prefill limit sits at 48, the first counter at 52, the last at 148.
	if le.Uint32(b[48:]) != 4096 || le.Uint64(b[52:]) != want.Refusals.Conns || le.Uint64(b[148:]) != want.Refusals.Cancelled {
		t.Errorf("generation %d layout: % x", RefusalsGeneration, b[48:])
	}
	old := AppendStageStatsFor(nil, &want, RefusalsGeneration-1)
	if len(old) != StatsSize {
		t.Fatalf("generation %d stats are %d bytes, want %d", RefusalsGeneration-1, len(old), StatsSize)
	}
	got, err := DecodeStageStatsFor(RefusalsGeneration-1, old)
	if err != nil || got.MaxPrefill != 0 || got.Refusals != (Refusals{}) || got.Positions != 9 {
		t.Fatalf("generation %d: %+v, %v; want the 48-byte fields only", RefusalsGeneration-1, got, err)
	}
	for _, c := range []struct {
		gen uint16
		b   []byte
	}{{RefusalsGeneration, old}, {RefusalsGeneration - 1, b}, {RefusalsGeneration, b[:len(b)-1]}} {
		if _, err := DecodeStageStatsFor(c.gen, c.b); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "generation") {
			t.Errorf("%d bytes in generation %d: %v, want malformed naming the generation", len(c.b), c.gen, err)
		}
	}
}

// A Ping's answer must have its generation's size: the 164-byte answer is
// malformed in generation 3, and the 48-byte one from generation 4 on.
func TestPingSizeByGeneration(t *testing.T) {
	for _, c := range []struct {
		gen    uint16
		length uint32
		ok     bool
	}{
		{RefusalsGeneration - 1, 0, true}, {RefusalsGeneration - 1, StatsSize, true}, {RefusalsGeneration - 1, StatsSizeRefusals, false},
		{RefusalsGeneration, 0, true}, {RefusalsGeneration, StatsSizeRefusals, true}, {RefusalsGeneration, StatsSize, false},
	} {
		err := checkPing(&Header{Generation: c.gen, Kind: KindPing, Length: c.length})
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrMalformed)) {
			t.Errorf("generation %d, %d bytes: %v, want ok %v", c.gen, c.length, err, c.ok)
		}
	}
}

// On a Framer the answer takes the agreed generation's layout. Until this
// implementation speaks RefusalsGeneration (MaxGeneration below it) such a
// Framer cannot write at all; once it does, the counters travel.
func TestPingAnswerAtRefusalsGeneration(t *testing.T) {
	w, r, _ := pinnedPair(RefusalsGeneration)
	want := StageStats{Positions: 3, Sessions: 1, MaxSessions: 4, MaxPrefill: 2048, Refusals: refusalsForTest()}
	err := w.WritePing(5, &want)
	if MaxGeneration < RefusalsGeneration {
		if !errors.Is(err, ErrGeneration) {
			t.Fatalf("answer in generation %d, above MaxGeneration %d: %v, want a generation error", RefusalsGeneration, MaxGeneration, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := r.ReadFrame()
	if err != nil || len(f.Payload) != StatsSizeRefusals {
		t.Fatalf("answer: %v, %v", f, err)
	}
	if got, err := f.StageStats(); err != nil || got != want {
		t.Fatalf("answer: %+v, %v; want %+v", got, err, want)
	}
}

func FuzzStageStatsRefusals(f *testing.F) {
	f.Add(AppendStageStatsFor(nil, &StageStats{Sessions: 1, MaxSessions: 2, MaxPrefill: 9, Refusals: refusalsForTest()}, RefusalsGeneration))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeStageStatsFor(RefusalsGeneration, b)
		if err != nil {
			return
		}
		if again := AppendStageStatsFor(nil, &s, RefusalsGeneration); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x, was %x", again, b)
		}
	})
}
