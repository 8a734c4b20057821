package codec_test

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/wire"
)

// handCodec is a width-4 codec whose two components are the first two axes,
// with 8 and 4 bits and clips 1, and mean 0: its payloads and reconstructions
// can be worked out by hand from docs/codec.md §3 and §4.
func handCodec(t *testing.T) *codec.Codec {
	t.Helper()
	c, err := codec.New(codec.Params{
		Mean:       []float32{0, 0, 0, 0},
		Components: []float32{1, 0, 0, 0, 0, 1, 0, 0},
		Bits:       []uint8{8, 4},
		Clips:      []float32{1, 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Worked by hand (docs/codec.md §3): component 0, 8 bits, clip 1: t = y*128 +
// 128; component 1, 4 bits: t = y*8 + 8; level = (2j+1-L)/2^b.
//
//	token 0: y = (0.3, -0.6): t = 166.4 -> j = 166, level 77/256; t = 3.2 -> j = 3, level -9/16.
//	         Payload: 166 = 0xA6, then 3 in the low nibble of byte 1: A6 03.
//	token 1: y = (-2, 0.99): t < 0 -> j = 0, level -255/256; t = 15.92 -> j = 15, level 15/16.
//	         Payload: 00 0F.
var (
	handTokens  = []float32{0.3, -0.6, 5, 7, -2, 0.99, -1, 0}
	handPayload = []byte{0xA6, 0x03, 0x00, 0x0F}
	handDecoded = []float32{77.0 / 256, -9.0 / 16, 0, 0, -255.0 / 256, 15.0 / 16, 0, 0}
)

func TestWireEncodeDecodeByHand(t *testing.T) {
	w := fixedWire(handCodec(t))
	if w.ID() != wire.EncodingLowRank || w.Name() != "lowrank" || w.Rank() != 2 {
		t.Fatalf("id %v name %q rank %d", w.ID(), w.Name(), w.Rank())
	}
	if w.CodecID() != w.Codec().ShortID() || w.CodecID() == 0 {
		t.Fatalf("codec id %08x, short id %08x", w.CodecID(), w.Codec().ShortID())
	}
	if n, err := w.PayloadSize(2, 4); err != nil || n != 4 {
		t.Fatalf("PayloadSize(2, 4) = %d, %v; want 4 (2 tokens x 12 bits -> 2 bytes)", n, err)
	}
	dst := make([]byte, 4)
	if err := w.Encode(dst, handTokens, 2, 4); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, handPayload) {
		t.Fatalf("payload % x, want % x", dst, handPayload)
	}
	got := make([]float32, 8)
	if err := w.Decode(got, dst, 2, 4); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, handDecoded) {
		t.Fatalf("decoded %v, want %v", got, handDecoded)
	}
}

func TestWireShapeErrors(t *testing.T) {
	w := fixedWire(handCodec(t))
	for _, s := range []struct{ tokens, width int }{{0, 4}, {1, 0}, {1, 8}, {-1, 4}, {math.MaxInt, 4}} {
		if n, err := w.PayloadSize(s.tokens, s.width); err == nil {
			t.Errorf("PayloadSize(%d, %d) = %d, want an error", s.tokens, s.width, n)
		}
	}
	if err := w.Encode(make([]byte, 3), handTokens, 2, 4); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("encode into 3 bytes: %v", err)
	}
	if err := w.Encode(make([]byte, 4), handTokens[:7], 2, 4); err == nil {
		t.Error("encode of 7 floats as 2x4 accepted")
	}
	if err := w.Decode(make([]float32, 8), handPayload[:3], 2, 4); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("decode of 3 bytes: %v", err)
	}
	bad := slices.Clone(handPayload)
	bad[1] |= 0x10 // a padding bit: token 0 has 12 bits in 2 bytes
	if err := w.Decode(make([]float32, 8), bad, 2, 4); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("decode with a padding bit set: %v", err)
	}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		x := slices.Clone(handTokens)
		x[6] = v
		if err := w.Encode(make([]byte, 4), x, 2, 4); !errors.Is(err, wire.ErrNonFinite) {
			t.Errorf("encode of %v: %v", v, err)
		}
	}
}

// wrongSize claims the codec's short id but a payload one byte longer than
// the codec's bit allocation gives: a sender with a different idea of the
// codec than the receiver.
type wrongSize struct{ *codec.Wire }

func (w wrongSize) PayloadSize(tokens, width int) (int, error) {
	n, err := w.Wire.PayloadSize(tokens, width)
	return n + 1, err
}

func (w wrongSize) Encode(dst []byte, src []float32, tokens, width int) error {
	return w.Wire.Encode(dst[:len(dst)-1], src, tokens, width)
}

// send writes one prefill frame of the hand tokens with enc (from a sender
// whose registry holds only enc) and reads it back through a Framer using reg.
func send(t *testing.T, enc wire.CodecEncoding, reg *wire.Registry) (*wire.Frame, []float32, error) {
	t.Helper()
	var buf bytes.Buffer
	fw := wire.NewFramer(&buf, nil)
	own := wire.NewRegistry()
	if err := own.RegisterCodec(enc); err != nil {
		t.Fatal(err)
	}
	fw.SetRegistry(own)
	if err := fw.WriteActivations(wire.KindPrefill, 0, wire.Meta{Session: 7, Request: 1}, enc, handTokens, 2, 4); err != nil {
		t.Fatal(err)
	}
	fr := wire.NewFramer(nil, &buf)
	fr.SetRegistry(reg)
	f, err := fr.ReadFrame()
	if err != nil {
		return nil, nil, err
	}
	x, err := f.Activations(nil)
	return f, x, err
}

func TestWireFramerRoundTrip(t *testing.T) {
	c := handCodec(t)
	w := fixedWire(c)
	reg := wire.NewRegistry()
	if err := reg.RegisterCodec(w); err != nil {
		t.Fatal(err)
	}
	f, x, err := send(t, w, reg)
	if err != nil {
		t.Fatal(err)
	}
	if f.Encoding != wire.EncodingLowRank || f.Codec != c.ShortID() || f.Length != 4 {
		t.Fatalf("header encoding %v codec %08x length %d; want lowrank, %08x, 4", f.Encoding, f.Codec, f.Length, c.ShortID())
	}
	if !slices.Equal(x, handDecoded) {
		t.Fatalf("received %v, want %v", x, handDecoded)
	}
}

func TestWireFramerRejectsUnknownCodec(t *testing.T) {
	w := fixedWire(handCodec(t))
	// The receiver holds a codec with the same parts but different
	// provenance: a different digest, so a different short id.
	other := handCodec(t)
	other.SetProvenance(codec.Provenance{Boundary: 3})
	if other.ShortID() == w.CodecID() {
		t.Fatal("provenance did not change the short id")
	}
	reg := wire.NewRegistry()
	if err := reg.RegisterCodec(fixedWire(other)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := send(t, w, reg); !errors.Is(err, wire.ErrEncoding) {
		t.Fatalf("frame with unknown codec %08x: got %v, want ErrEncoding", w.CodecID(), err)
	}
	if _, _, err := send(t, w, wire.NewRegistry()); !errors.Is(err, wire.ErrEncoding) {
		t.Fatalf("frame with a codec to a receiver holding none: got %v, want ErrEncoding", err)
	}
}

func TestWireFramerRejectsPayloadSizeMismatch(t *testing.T) {
	w := fixedWire(handCodec(t))
	reg := wire.NewRegistry()
	if err := reg.RegisterCodec(w); err != nil {
		t.Fatal(err)
	}
	_, _, err := send(t, wrongSize{w}, reg)
	if !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("5-byte payload for a 4-byte allocation: got %v, want ErrMalformed", err)
	}
}

func TestWireNoAllocation(t *testing.T) {
	if raceEnabled {
		// A CI run saw "Encode allocates 1 times per call" under -race: the
		// pool's dropped encoders, each several allocations. The plain run of
		// the suite asserts it.
		t.Skip("allocation counts are asserted without -race: its sync.Pool drops a quarter of what is put back")
	}
	w := fixedWire(handCodec(t))
	dst := make([]byte, 4)
	out := make([]float32, 8)
	_ = w.Encode(dst, handTokens, 2, 4) // warm the encoder pool
	if a := testing.AllocsPerRun(100, func() { _ = w.Encode(dst, handTokens, 2, 4) }); a != 0 {
		t.Errorf("Encode allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(100, func() { _ = w.Decode(out, dst, 2, 4) }); a != 0 {
		t.Errorf("Decode allocates %v times per call", a)
	}
}

// Concurrent calls on one Wire give the hand-computed results (run with
// -race to check the encoder pool).
func TestWireConcurrent(t *testing.T) {
	w := fixedWire(handCodec(t))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]byte, 4)
			out := make([]float32, 8)
			for range 200 {
				if err := w.Encode(dst, handTokens, 2, 4); err != nil {
					errs <- err
					return
				}
				if err := w.Decode(out, dst, 2, 4); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(dst, handPayload) || !slices.Equal(out, handDecoded) {
					errs <- errors.New("concurrent result differs from the hand-computed one")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkWire measures the wire adapter on a 64-token prefill frame at
// width 4096 with 512 kept components at 4 bits (256-byte payloads).
func BenchmarkWire(b *testing.B) {
	const d, k, tokens = 4096, 512, 64
	comps := make([]float32, k*d)
	for i := range k {
		comps[i*d+i] = 1 // axis components: the cost is the same as a dense basis
	}
	bits := make([]uint8, k)
	clips := make([]float32, k)
	for i := range bits {
		bits[i], clips[i] = 4, 3
	}
	c, err := codec.New(codec.Params{Mean: make([]float32, d), Components: comps, Bits: bits, Clips: clips})
	if err != nil {
		b.Fatal(err)
	}
	w := fixedWire(c)
	x := make([]float32, tokens*d)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	p := make([]byte, tokens*c.PayloadBytes())
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if err := w.Encode(p, x, tokens, d); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*tokens)/b.Elapsed().Seconds(), "tokens/s")
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if err := w.Decode(x, p, tokens, d); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*tokens)/b.Elapsed().Seconds(), "tokens/s")
	})
}

// FuzzWireDecode feeds arbitrary payloads to the lowrank wire decoder of the
// hand codec: it never panics, and any payload it accepts is one the encoder
// produces from the decoded values (axis components, mean 0: every level is
// the centre of its own cell, so re-encoding finds the same cells).
func FuzzWireDecode(f *testing.F) {
	f.Add(handPayload, uint8(2))
	f.Add([]byte{0xff, 0x0f}, uint8(1))
	f.Add([]byte{0xff, 0xff}, uint8(1))
	f.Add([]byte{}, uint8(0))
	c, err := codec.New(codec.Params{
		Mean:       []float32{0, 0, 0, 0},
		Components: []float32{1, 0, 0, 0, 0, 1, 0, 0},
		Bits:       []uint8{8, 4},
		Clips:      []float32{1, 1},
	})
	if err != nil {
		f.Fatal(err)
	}
	w := fixedWire(c)
	f.Fuzz(func(t *testing.T, payload []byte, tokens uint8) {
		n := int(tokens)
		dst := make([]float32, n*4)
		if err := w.Decode(dst, payload, n, 4); err != nil {
			return
		}
		again := make([]byte, len(payload))
		if err := w.Encode(again, dst, n, 4); err != nil {
			t.Fatalf("decoded values do not encode: %v", err)
		}
		if !bytes.Equal(again, payload) {
			t.Fatalf("accepted payload % x re-encodes to % x", payload, again)
		}
	})
}

// fixedWire is the wire encoding of a codec with fixed bits.
func fixedWire(c *codec.Codec) *codec.Wire { return codec.NewWire(c).(*codec.Wire) }
