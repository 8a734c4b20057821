package wire

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seamlm/seam/internal/half"
)

func le32(f float32) []byte { return le.AppendUint32(nil, math.Float32bits(f)) }

// Hand-worked encodings: scale chosen so that max/qmax = 1 exactly, so every
// code is x rounded half to even (2.5 -> 2, -63.5 -> -64, 5.5 -> 6, -2.5 -> -2).
func TestQuantKnownBytes(t *testing.T) {
	cases := []struct {
		enc  Encoding
		x    []float32
		want []byte
	}{
		{Q8, []float32{127, -63.5, 2.5, 0, -1.49}, append(le32(1), 0x7f, 0xc0, 0x02, 0x00, 0xff)},
		// q4 codes 7, -7, 2, -4, 0: nibbles 7|9<<4, 2|0xc<<4, 0 (+ zero pad nibble).
		{Q4, []float32{7, -7, 2.5, -3.5, 0.4}, append(le32(1), 0x97, 0xc2, 0x00)},
		// q5 codes 15,-15,1,-1,0,3,8,6,-2 as 5-bit fields, LSB-first bit stream
		// (worked bit by bit: byte 0 = 0x0f | (0x11&7)<<5 = 0x2f, ...).
		{Q5, []float32{15, -15, 1, -1, 0, 3, 8, 5.5, -2.5}, append(le32(1), 0x2f, 0x86, 0x0f, 0x06, 0x32, 0x1e)},
		// A scale of 2: max 254 / 127.
		{Q8, []float32{254, -3, 1}, append(le32(2), 0x7f, 0xfe, 0x00)}, // -1.5 -> -2, 0.5 -> 0
		// All zero: scale 0, codes 0.
		{Q4, []float32{0, 0, 0}, append(le32(0), 0x00, 0x00)},
	}
	for _, c := range cases {
		got := make([]byte, len(c.want))
		if err := c.enc.Encode(got, c.x, 1, len(c.x)); err != nil {
			t.Fatalf("%s encode %v: %v", c.enc.Name(), c.x, err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s encode %v = % x, want % x", c.enc.Name(), c.x, got, c.want)
		}
	}
}

func TestF32AndF16KnownBytes(t *testing.T) {
	x := []float32{1, -2, 0.5}
	want32 := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0, 0x3f}
	want16 := []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38}
	for _, c := range []struct {
		enc  Encoding
		want []byte
	}{{F32, want32}, {F16, want16}} {
		got := make([]byte, len(c.want))
		if err := c.enc.Encode(got, x, 1, 3); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: % x, want % x", c.enc.Name(), got, c.want)
		}
	}
}

// roundTrip encodes and decodes x, failing the test on any error.
func roundTrip(t *testing.T, e Encoding, x []float32, tokens, width int) []float32 {
	t.Helper()
	n, err := e.PayloadSize(tokens, width)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if err := e.Encode(b, x, tokens, width); err != nil {
		t.Fatalf("%s encode: %v", e.Name(), err)
	}
	y := make([]float32, len(x))
	if err := e.Decode(y, b, tokens, width); err != nil {
		t.Fatalf("%s decode: %v", e.Name(), err)
	}
	return y
}

func TestF32Exact(t *testing.T) {
	x := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, math.MaxFloat32, -math.MaxFloat32,
		1.1754942e-38, 3.14159265, -2.7182817, 1 << 20}
	y := roundTrip(t, F32, x, 2, 5)
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			t.Errorf("f32 index %d: %08x -> %08x", i, math.Float32bits(x[i]), math.Float32bits(y[i]))
		}
	}
}

// Every finite binary16 value is representable, so it must survive exactly
// (bit for bit, signed zeros and subnormals included).
func TestF16ExactOnRepresentable(t *testing.T) {
	var x []float32
	for h := range 1 << 16 {
		if uint16(h)&f16Inf != f16Inf {
			x = append(x, half.ToF32(uint16(h)))
		}
	}
	width := 1 << 10
	x = x[:len(x)/width*width]
	y := roundTrip(t, F16, x, len(x)/width, width)
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			t.Fatalf("f16 value %v (index %d) came back as %v", x[i], i, y[i])
		}
	}
}

// f16 rounds to nearest even: the midpoint between 1 and the next half
// (1 + 2^-10) is 1 + 2^-11, which rounds down to 1 (even mantissa).
func TestF16Rounding(t *testing.T) {
	y := roundTrip(t, F16, []float32{1 + 1.0/2048, 1 + 3.0/2048}, 1, 2)
	if y[0] != 1 || y[1] != 1+2.0/1024 {
		t.Fatalf("f16 rounding: got %v, want [1 %v]", y, 1+2.0/1024)
	}
}

// quantBound is the largest |x - decode(encode(x))| for a token with scale s
// and largest code qmax. With u = 2^-24 (float32 unit roundoff):
//   - encode computes r = fl(x/s) = (x/s)(1+d1), |d1| <= u, and |x/s| <=
//     qmax(1+2u) because s = fl(m/qmax) >= (m/qmax)(1-u); rounding r to an
//     integer q moves it by at most 1/2, so |x/s - q| <= 1/2 + qmax(1+2u)u;
//   - decode computes fl(q s), off from q s by at most qmax s u.
//
// Total: s (1/2 + qmax u (2 + 2u)). The step of the quantizer is s, so this
// is half a step plus a few float32 roundings of the largest value.
func quantBound(s float32, qmax float64) float64 {
	const u = 1.0 / (1 << 24)
	return float64(s) * (0.5 + qmax*u*(2+2*u))
}

func TestQuantErrorBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, e := range []*symQuant{Q8.(*symQuant), Q5.(*symQuant), Q4.(*symQuant)} {
		qmax := float64(e.qmax)
		for _, width := range []int{1, 2, 7, 8, 9, 13, 64, 100, 4096} {
			tokens := 3
			x := make([]float32, tokens*width)
			for i := range x {
				mag := math.Pow(10, float64(i/width*3-3)) // tokens at 1e-3, 1, 1e3
				x[i] = float32(rng.NormFloat64() * mag)
			}
			n, _ := e.PayloadSize(tokens, width)
			b := make([]byte, n)
			if err := e.Encode(b, x, tokens, width); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(x))
			if err := e.Decode(y, b, tokens, width); err != nil {
				t.Fatal(err)
			}
			rowBytes := n / tokens
			for tok := range tokens {
				row := x[tok*width : (tok+1)*width]
				var m float32
				for _, v := range row {
					m = max(m, float32(math.Abs(float64(v))))
				}
				s := m / e.qmax // the documented scale, computed here independently
				if got := math.Float32frombits(le.Uint32(b[tok*rowBytes:])); got != s {
					t.Fatalf("%s width %d token %d: scale %v, want max/qmax = %v", e.name, width, tok, got, s)
				}
				bound := quantBound(s, qmax)
				for i, v := range row {
					if d := math.Abs(float64(v) - float64(y[tok*width+i])); d > bound {
						t.Fatalf("%s width %d token %d index %d: |%v - %v| = %g > bound %g (step %g)",
							e.name, width, tok, i, v, y[tok*width+i], d, bound, s)
					}
				}
			}
		}
	}
}

// The largest value decodes to exactly +-qmax*s (the code is qmax).
func TestQuantExtremesAndMaxScale(t *testing.T) {
	for _, e := range []*symQuant{Q8.(*symQuant), Q5.(*symQuant), Q4.(*symQuant)} {
		if !finite32(e.qmax*e.maxScale) || finite32(e.qmax*math.Nextafter32(e.maxScale, math.MaxFloat32)) {
			t.Errorf("%s: maxScale %v is not the largest scale with a finite qmax*s", e.name, e.maxScale)
		}
		// An input at the float32 limit must either encode to finite values or
		// be refused at encode time; it must never decode to infinity.
		x := []float32{math.MaxFloat32, -1}
		n, _ := e.PayloadSize(1, 2)
		b := make([]byte, n)
		if err := e.Encode(b, x, 1, 2); err == nil {
			y := make([]float32, 2)
			if err := e.Decode(y, b, 1, 2); err != nil || !finite32(y[0]) {
				t.Errorf("%s: MaxFloat32 encoded but decodes to %v, %v", e.name, y, err)
			}
		} else if !errors.Is(err, ErrNonFinite) {
			t.Errorf("%s: MaxFloat32 refused with %v", e.name, err)
		}
	}
}

func TestEncodeRejectsNonFinite(t *testing.T) {
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	for _, e := range []Encoding{F32, F16, Q8, Q5, Q4} {
		for _, v := range bad {
			x := []float32{1, 2, v, 4}
			n, _ := e.PayloadSize(2, 2)
			if err := e.Encode(make([]byte, n), x, 2, 2); !errors.Is(err, ErrNonFinite) {
				t.Errorf("%s encode of %v: err %v, want ErrNonFinite", e.Name(), v, err)
			}
		}
	}
	if err := F16.Encode(make([]byte, 2), []float32{70000}, 1, 1); !errors.Is(err, ErrNonFinite) {
		t.Errorf("f16 encode of 70000 (beyond 65504): %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	nan := math.Float32bits(float32(math.NaN()))
	cases := []struct {
		name  string
		enc   Encoding
		width int
		src   []byte
		want  error
	}{
		{"f32 NaN", F32, 2, append(le32(1), le.AppendUint32(nil, nan)...), ErrNonFinite},
		{"f32 +Inf", F32, 1, le32(float32(math.Inf(1))), ErrNonFinite},
		{"f16 Inf", F16, 2, []byte{0, 0x3c, 0x00, 0x7c}, ErrNonFinite},
		{"f16 NaN", F16, 1, []byte{0x01, 0xfe}, ErrNonFinite},
		{"q8 NaN scale", Q8, 2, append(le.AppendUint32(nil, nan), 1, 2), ErrNonFinite},
		{"q8 Inf scale", Q8, 2, append(le32(float32(math.Inf(1))), 1, 2), ErrNonFinite},
		{"q8 negative scale", Q8, 2, append(le32(-1), 1, 2), ErrMalformed},
		{"q8 -0 scale", Q8, 2, append(le32(float32(math.Copysign(0, -1))), 0, 0), ErrMalformed},
		{"q8 huge scale", Q8, 2, append(le32(math.MaxFloat32), 1, 2), ErrNonFinite},
		{"q8 code -128", Q8, 2, append(le32(1), 0x80, 2), ErrMalformed},
		{"q8 zero scale, nonzero code", Q8, 2, append(le32(0), 0, 1), ErrMalformed},
		{"q4 code -8", Q4, 2, append(le32(1), 0x18), ErrMalformed},
		{"q4 pad nibble", Q4, 3, append(le32(1), 0x11, 0x11), ErrMalformed},
		{"q5 code -16", Q5, 2, append(le32(1), 0x10, 0x00), ErrMalformed},
		{"q5 code -16 in tail", Q5, 9, append(le32(1), 0, 0, 0, 0, 0, 0x10), ErrMalformed},
		{"q5 pad bits", Q5, 1, append(le32(1), 0x20), ErrMalformed},
		{"q5 pad bits in tail", Q5, 9, append(le32(1), 0, 0, 0, 0, 0, 0x20), ErrMalformed},
		{"q5 short", Q5, 9, append(le32(1), 0, 0, 0, 0, 0), ErrMalformed},
		{"q8 long", Q8, 2, append(le32(1), 1, 2, 3), ErrMalformed},
	}
	for _, c := range cases {
		err := c.enc.Decode(make([]float32, c.width), c.src, 1, c.width)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
}

// Bytes per token, hand-computed from the layouts in docs/wire.md: f32 4w,
// f16 2w, q8 4+w, q5 4+ceil(5w/8), q4 4+ceil(w/2); a one-token Decode frame
// adds the 52-byte header.
func TestBytesPerToken(t *testing.T) {
	want := map[int]map[string]int{
		64:   {"f32": 256, "f16": 128, "q8": 68, "q5": 44, "q4": 36},
		4096: {"f32": 16384, "f16": 8192, "q8": 4100, "q5": 2564, "q4": 2052},
	}
	t.Logf("%-6s %12s %12s %18s", "width", "encoding", "bytes/token", "decode frame bytes")
	for _, w := range []int{64, 4096} {
		for _, e := range []Encoding{F32, F16, Q8, Q5, Q4} {
			n, err := e.PayloadSize(1, w)
			if err != nil || n != want[w][e.Name()] {
				t.Errorf("%s width %d: %d bytes/token (%v), want %d", e.Name(), w, n, err, want[w][e.Name()])
			}
			t.Logf("%-6d %12s %12d %18d", w, e.Name(), n, n+HeaderSize)
			if n64, _ := e.PayloadSize(64, w); n64 != 64*n {
				t.Errorf("%s width %d: 64 tokens take %d bytes, want %d", e.Name(), w, n64, 64*n)
			}
		}
	}
}

func TestPayloadSizeOverflowAndShape(t *testing.T) {
	for _, e := range []Encoding{F32, F16, Q8, Q5, Q4} {
		for _, s := range [][2]int{{0, 4}, {4, 0}, {-1, 4}, {1 << 40, 1 << 30}, {math.MaxInt, 2}, {1, math.MaxInt}} {
			if n, err := e.PayloadSize(s[0], s[1]); err == nil {
				t.Errorf("%s PayloadSize(%d, %d) = %d, want an error", e.Name(), s[0], s[1], n)
			}
		}
	}
}

func TestEncodeDecodeDoNotAllocate(t *testing.T) {
	x := make([]float32, 4*4096)
	for i := range x {
		x[i] = float32(i%97) - 48
	}
	y := make([]float32, len(x))
	for _, e := range []Encoding{F32, F16, Q8, Q5, Q4} {
		n, _ := e.PayloadSize(4, 4096)
		b := make([]byte, n)
		allocs := testing.AllocsPerRun(10, func() {
			if err := e.Encode(b, x, 4, 4096); err != nil {
				t.Fatal(err)
			}
			if err := e.Decode(y, b, 4, 4096); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per encode+decode", e.Name(), allocs)
		}
	}
}
