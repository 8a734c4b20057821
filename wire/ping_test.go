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
