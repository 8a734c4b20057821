package wire

import (
	"bytes"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
)

// A matching pair: the head-side stage holds layers [0,3), the next [3,6).
func helloPair() (up, down Hello) {
	up = testHello()
	down = Hello{
		Generation: 1, MinGeneration: 1, MaxGeneration: 1,
		Model:  up.Model,
		Layers: LayerRange{3, 6}, PeerLayers: LayerRange{0, 3},
		Width: 64, Vocab: 512,
		Encodings: []EncodingID{EncodingF32, EncodingF16, EncodingQ8, EncodingQ4},
		Codecs:    []CodecDigest{{Boundary: 3, ID: 7, Digest: Digest{9}}, {Boundary: 6, ID: 8, Digest: Digest{10}}},
		Name:      "stage-1",
	}
	return up, down
}

func TestHandshakeAgreement(t *testing.T) {
	up, down := helloPair()
	a, err := CheckHello(&down, &up)
	if err != nil {
		t.Fatal(err)
	}
	want := Agreement{Generation: 1, Encoding: EncodingQ8, Boundary: 3, Width: 64, Vocab: 512}
	if a != want {
		t.Fatalf("agreement %+v, want %+v", a, want)
	}
	ack := Ack(down, a)
	a2, err := CheckHelloAck(&up, &ack)
	if err != nil || a2 != want {
		t.Fatalf("ack: %+v, %v", a2, err)
	}
}

// Each mismatch is reported with both values in the message.
func TestHandshakeMismatches(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(up, down *Hello)
		want  error
		words []string
	}{
		{"generation", func(up, down *Hello) { down.Generation, down.MinGeneration, down.MaxGeneration = 3, 2, 3 },
			ErrGeneration, []string{"generation", "upstream (peer) speaks 1..1", "downstream (us) speaks 2..3"}},
		{"model digest", func(up, down *Hello) { down.Model = Digest{0xab} },
			ErrHandshake, []string{"model digest", up0(Digest{1, 2, 3}), up0(Digest{0xab})}},
		{"layer boundary", func(up, down *Hello) { down.Layers.Start = 4; up.PeerLayers.Start = 4 },
			ErrHandshake, []string{"layer boundary", "[0,3) ending at 3", "[4,6) starting at 4"}},
		{"expected range", func(up, down *Hello) { up.PeerLayers = LayerRange{3, 5} },
			ErrHandshake, []string{"layer range", "expects downstream to hold [3,5)", "holds [3,6)"}},
		{"expected upstream range", func(up, down *Hello) { down.PeerLayers = LayerRange{1, 3} },
			ErrHandshake, []string{"layer range", "expects upstream to hold [1,3)", "holds [0,3)"}},
		{"width", func(up, down *Hello) { down.Width = 128 },
			ErrHandshake, []string{"hidden width", "upstream (peer) 64", "downstream (us) 128"}},
		{"vocab", func(up, down *Hello) { down.Vocab = 32000 },
			ErrHandshake, []string{"vocab size", "512", "32000"}},
		{"encoding", func(up, down *Hello) { down.Encodings = []EncodingID{EncodingF32, EncodingF16} },
			ErrHandshake, []string{"encoding", "requests q8", "supports [f32 f16]"}},
		{"codec digest", func(up, down *Hello) { down.Codecs[0].Digest = Digest{0xcd} },
			ErrHandshake, []string{"codec digest at layer 3", up0(Digest{9}), up0(Digest{0xcd})}},
		{"codec id", func(up, down *Hello) { down.Codecs[0].ID = 70 },
			ErrHandshake, []string{"codec digest at layer 3", "id 7", "id 70"}},
		{"lowrank without a codec downstream", func(up, down *Hello) {
			up.Encodings = append(up.Encodings, EncodingLowRank)
			up.Encoding, up.Codec = EncodingLowRank, 7
			down.Encodings = append(down.Encodings, EncodingLowRank)
			down.Codecs = down.Codecs[1:]
		}, ErrHandshake, []string{"codec digest at layer 3", "has id 7 digest " + up0(Digest{9}), "downstream (us) has none"}},
	}
	for _, c := range cases {
		up, down := helloPair()
		c.edit(&up, &down)
		if err := up.validate(true); err != nil {
			t.Fatalf("%s: invalid upstream hello: %v", c.name, err)
		}
		_, err := CheckHello(&down, &up)
		if !errors.Is(err, c.want) || !errors.Is(err, ErrHandshake) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
			continue
		}
		for _, w := range c.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %q", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: multi-line error %q", c.name, err)
		}
	}
}

func up0(d Digest) string { return d.String() }

func TestHandshakeReportsEveryMismatch(t *testing.T) {
	up, down := helloPair()
	down.Width, down.Vocab, down.Model = 65, 513, Digest{7}
	_, err := CheckHello(&down, &up)
	for _, w := range []string{"hidden width", "vocab size", "model digest"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not mention %s", err, w)
		}
	}
}

func TestHelloAckMismatches(t *testing.T) {
	up, down := helloPair()
	a, err := CheckHello(&down, &up)
	if err != nil {
		t.Fatal(err)
	}
	ack := Ack(down, a)
	ack.Encoding = EncodingF16
	if _, err := CheckHelloAck(&up, &ack); !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "requested q8 codec 0, downstream (peer) accepted f16 codec 0") {
		t.Errorf("ack encoding: %v", err)
	}
	// A downstream that speaks 1..2 but answers with 2 to an upstream that
	// speaks only 1 chose a generation outside the common range.
	ack = Ack(down, a)
	ack.Generation, ack.MaxGeneration = 2, 2
	if _, err := CheckHelloAck(&up, &ack); !errors.Is(err, ErrGeneration) || !strings.Contains(err.Error(), "chose 2") || !strings.Contains(err.Error(), "expected 1") {
		t.Errorf("ack generation: %v", err)
	}
}

func TestHelloEncodingRoundTripAndBounds(t *testing.T) {
	h := testHello()
	b, err := AppendHello(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	// 67 fixed + 1 + 3 encodings + 2 + 1 codec entry (40) + 1 + 4 name bytes.
	if len(b) != 67+1+3+2+40+1+4 {
		t.Fatalf("hello is %d bytes", len(b))
	}
	got, err := DecodeHello(b)
	if err != nil || !helloEqual(got, h) {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	for n := range len(b) {
		if _, err := DecodeHello(b[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", n)
		}
	}
	if _, err := DecodeHello(append(slices.Clone(b), 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte: %v", err)
	}
	edits := []struct {
		name string
		edit func(h *Hello)
		want error
	}{
		{"no encodings", func(h *Hello) { h.Encodings = nil }, ErrLimit},
		{"too many encodings", func(h *Hello) {
			h.Encodings = nil
			for i := range MaxHelloEncodings + 1 {
				h.Encodings = append(h.Encodings, EncodingID(i+1))
			}
		}, ErrLimit},
		{"unsorted encodings", func(h *Hello) { h.Encodings = []EncodingID{EncodingQ8, EncodingF32} }, ErrMalformed},
		{"duplicate encodings", func(h *Hello) { h.Encodings = []EncodingID{EncodingQ8, EncodingQ8} }, ErrMalformed},
		{"encoding none listed", func(h *Hello) { h.Encodings = []EncodingID{0, EncodingQ8} }, ErrMalformed},
		{"request not listed", func(h *Hello) { h.Encoding = EncodingQ4 }, ErrMalformed},
		{"codec without lowrank", func(h *Hello) { h.Codec = 3 }, ErrMalformed},
		{"too many codecs", func(h *Hello) {
			h.Codecs = nil
			for i := range MaxCodecDigests + 1 {
				h.Codecs = append(h.Codecs, CodecDigest{Boundary: uint32(i), ID: 1})
			}
		}, ErrLimit},
		{"codec boundaries unsorted", func(h *Hello) { h.Codecs = []CodecDigest{{Boundary: 5, ID: 1}, {Boundary: 5, ID: 2}} }, ErrMalformed},
		{"codec id 0", func(h *Hello) { h.Codecs = []CodecDigest{{Boundary: 5}} }, ErrMalformed},
		{"name too long", func(h *Hello) { h.Name = strings.Repeat("x", MaxNameBytes+1) }, ErrLimit},
		{"name not UTF-8", func(h *Hello) { h.Name = "\xff" }, ErrMalformed},
		{"generation outside range", func(h *Hello) { h.Generation = 2 }, ErrMalformed},
		{"generation 0", func(h *Hello) { h.Generation, h.MinGeneration = 0, 0 }, ErrMalformed},
		{"reversed layers", func(h *Hello) { h.Layers = LayerRange{3, 2} }, ErrMalformed},
		{"zero width", func(h *Hello) { h.Width = 0 }, ErrMalformed},
	}
	for _, e := range edits {
		h := testHello()
		e.edit(&h)
		if _, err := AppendHello(nil, &h); !errors.Is(err, e.want) {
			t.Errorf("%s: encode %v, want %v", e.name, err, e.want)
		}
	}
	// Counts beyond their bounds in raw bytes are refused before reading on.
	raw := slices.Clone(b)
	raw[67] = MaxHelloEncodings + 1
	if _, err := DecodeHello(raw); !errors.Is(err, ErrLimit) {
		t.Errorf("raw encoding count 65: %v", err)
	}
	raw = slices.Clone(b)
	le.PutUint16(raw[67+1+3:], MaxCodecDigests+1)
	if _, err := DecodeHello(raw); !errors.Is(err, ErrLimit) {
		t.Errorf("raw codec count 1025: %v", err)
	}
}

// The whole exchange over a connection, then pinned framers refuse frames
// that break the agreement.
func TestHandshakeOverConnAndPin(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	upF, downF := NewFramer(c1, c1), NewFramer(c2, c2)
	up, down := helloPair()
	done := make(chan error, 1)
	go func() {
		f, err := downF.ReadFrame()
		if err != nil {
			done <- err
			return
		}
		remote, err := f.Hello()
		if err != nil {
			done <- err
			return
		}
		a, err := CheckHello(&down, &remote)
		if err != nil {
			done <- err
			return
		}
		ack := Ack(down, a)
		downF.Pin(a)
		done <- downF.WriteHello(KindHelloAck, &ack)
	}()
	if err := upF.WriteHello(KindHello, &up); err != nil {
		t.Fatal(err)
	}
	f, err := upF.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ack, err := f.Hello()
	if err != nil || f.Kind != KindHelloAck {
		t.Fatalf("ack %v %v", f.Kind, err)
	}
	a, err := CheckHelloAck(&up, &ack)
	if err != nil {
		t.Fatal(err)
	}
	upF.Pin(a)

	m := Meta{Session: 1}
	x := make([]float32, 64)
	if err := upF.WriteActivations(KindDecode, 0, m, F16, x, 1, 64); !errors.Is(err, ErrEncoding) {
		t.Errorf("pinned writer sent f16 against an agreed q8: %v", err)
	}
	if err := upF.WriteActivations(KindDecode, 0, m, Q8, x[:32], 1, 32); !errors.Is(err, ErrMalformed) {
		t.Errorf("pinned writer sent width 32 against 64: %v", err)
	}
	if err := upF.WriteTokenIDs(KindDecode, 0, m, []uint32{512}); !errors.Is(err, ErrMalformed) {
		t.Errorf("pinned writer sent token 512 with vocab 512: %v", err)
	}
	// The reading side is pinned too: an unpinned writer's f16 is refused.
	go func() {
		rogue := NewFramer(c1, nil)
		_ = rogue.WriteActivations(KindDecode, 0, m, F16, x, 1, 64)
	}()
	if _, err := downF.ReadFrame(); !errors.Is(err, ErrEncoding) || !strings.Contains(err.Error(), "agreed q8") {
		t.Errorf("pinned reader accepted f16: %v", err)
	}
}

func TestTokenIDsBelowVocabOnPinnedReader(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	r := NewFramer(nil, c2)
	r.Pin(Agreement{Generation: 1, Encoding: EncodingQ8, Width: 64, Vocab: 512})
	go func() { _ = NewFramer(c1, nil).WriteTokenIDs(KindPrefill, 0, Meta{Session: 1}, []uint32{1, 512}) }()
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.TokenIDs(nil); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "id 512, vocab size 512") {
		t.Fatalf("token 512 with vocab 512: %v", err)
	}
}

// The payload bounds stated in docs/wire.md, from its Hello table: 67 fixed
// bytes, then n (1..64) encodings with their count byte, the u16 codec count
// with 0..1024 entries of 40 bytes, and a name of 0..255 bytes with its length.
func TestHelloSizeBounds(t *testing.T) {
	if minHelloPayload != 72 || MaxHelloPayload != 41350 {
		t.Fatalf("hello payload bounds %d..%d, documented 72..41350", minHelloPayload, MaxHelloPayload)
	}
	h := testHello()
	h.Encodings = nil
	for i := range MaxHelloEncodings {
		h.Encodings = append(h.Encodings, EncodingID(i+1))
	}
	h.Codecs = nil
	for i := range MaxCodecDigests {
		h.Codecs = append(h.Codecs, CodecDigest{Boundary: uint32(i), ID: 1})
	}
	h.Name = strings.Repeat("n", MaxNameBytes)
	b, err := AppendHello(nil, &h)
	if err != nil || len(b) != 41350 {
		t.Fatalf("largest hello: %d bytes, %v", len(b), err)
	}
	var buf bytes.Buffer
	if err := NewFramer(&buf, nil).WriteHello(KindHello, &h); err != nil {
		t.Fatalf("largest hello does not fit a frame: %v", err)
	}
}
