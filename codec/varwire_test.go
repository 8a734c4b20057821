package codec_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/wire"
)

// entropyCodec fits an entropy-coded codec of width 16 on correlated
// Gaussian data.
func entropyCodec(t *testing.T) (*codec.Codec, []float32) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	const n, d = 600, 16
	x := make([]float32, n*d)
	for r := 0; r < n; r++ {
		a, b := rng.NormFloat64(), rng.NormFloat64()
		for j := 0; j < d; j++ {
			x[r*d+j] = float32(a*float64(j%5) + b*float64(j%3) + 0.1*rng.NormFloat64())
		}
	}
	c, err := codec.Fit(x, n, d, codec.FitOptions{Bytes: 8, Entropy: true})
	if err != nil {
		t.Fatal(err)
	}
	return c, x
}

// TestVarWireFrames sends entropy-coded frames through a framer pair: a
// frame's length is its stream's, below the maximum, and the receiver
// reconstructs exactly what the codec decodes.
func TestVarWireFrames(t *testing.T) {
	c, x := entropyCodec(t)
	enc := codec.NewWire(c)
	ve, ok := enc.(wire.VariableEncoding)
	if !ok || !wire.IsVariable(enc) {
		t.Fatalf("NewWire of an entropy-coded codec gives %T, not a variable encoding", enc)
	}
	reg := wire.NewRegistry()
	if err := reg.RegisterCodec(enc); err != nil {
		t.Fatal(err)
	}
	d := c.Width()
	for _, n := range []int{1, 2, 37} {
		var buf bytes.Buffer
		fw := wire.NewFramer(&buf, nil)
		fw.SetRegistry(reg)
		if err := fw.WriteActivations(wire.KindPrefill, 0, wire.Meta{Session: 3, Request: 1}, enc, x[:n*d], n, d); err != nil {
			t.Fatal(err)
		}
		max, err := enc.PayloadSize(n, d)
		if err != nil {
			t.Fatal(err)
		}
		stream, err := ve.AppendEncode(nil, x[:n*d], n, d)
		if err != nil {
			t.Fatal(err)
		}
		if fw.LastFrameBytes() != wire.HeaderSize+len(stream) || len(stream) >= max {
			t.Fatalf("%d tokens: frame %d bytes, stream %d, maximum payload %d", n, fw.LastFrameBytes(), len(stream), max)
		}
		fr := wire.NewFramer(nil, &buf)
		fr.SetRegistry(reg)
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Activations(nil)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, n*d)
		if err := c.DecodeTokens(want, stream); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%d tokens: value %d is %v through the framer, %v decoded", n, i, got[i], want[i])
			}
		}
	}
	if err := enc.Encode(make([]byte, 100), x[:d], 1, d); err == nil {
		t.Fatal("fixed-size Encode of an entropy-coded codec succeeded")
	}
	bad := append([]float32(nil), x[:d]...)
	bad[5] = float32(math.Inf(-1))
	if _, err := ve.AppendEncode(nil, bad, 1, d); !errors.Is(err, wire.ErrNonFinite) {
		t.Fatalf("infinity: %v, want ErrNonFinite", err)
	}
	max, _ := enc.PayloadSize(1, d)
	if err := enc.Decode(make([]float32, d), make([]byte, max+1), 1, d); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("stream above the maximum: %v, want ErrMalformed", err)
	}
	if err := enc.Decode(make([]float32, d), nil, 1, d); !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("empty stream: %v, want ErrMalformed", err)
	}
}

// TestVarWireFramerRefusesLongFrame: a frame declaring more bytes than the
// codec can write for its tokens is refused before its payload is read.
func TestVarWireFramerRefusesLongFrame(t *testing.T) {
	c, x := entropyCodec(t)
	enc := codec.NewWire(c)
	reg := wire.NewRegistry()
	if err := reg.RegisterCodec(enc); err != nil {
		t.Fatal(err)
	}
	long := longStream{enc.(*codec.VarWire)}
	own := wire.NewRegistry()
	if err := own.RegisterCodec(long); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	fw := wire.NewFramer(&buf, nil)
	fw.SetRegistry(own)
	d := c.Width()
	if err := fw.WriteActivations(wire.KindPrefill, 0, wire.Meta{Session: 3, Request: 1}, long, x[:2*d], 2, d); err != nil {
		t.Fatal(err)
	}
	fr := wire.NewFramer(nil, &buf)
	fr.SetRegistry(reg)
	_, err := fr.ReadFrame()
	if !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("frame above the maximum: %v, want ErrMalformed", err)
	}
}

// longStream writes streams padded past the codec's maximum.
type longStream struct{ *codec.VarWire }

func (w longStream) PayloadSize(tokens, width int) (int, error) {
	n, err := w.VarWire.PayloadSize(tokens, width)
	return n + 8, err
}

func (w longStream) AppendEncode(dst []byte, src []float32, tokens, width int) ([]byte, error) {
	n, _ := w.PayloadSize(tokens, width)
	return append(dst, make([]byte, n)...), nil
}
