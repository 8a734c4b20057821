package codec

import (
	"bytes"
	"fmt"
	"github.com/seamlm/seam/kernels"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// axisCodec builds a codec whose components are signed unit vectors
// sign_i * e_{perm[i]}, with a dyadic mean and dyadic clips, so that every
// reconstruction level is exact in float32 and a token placed on the lattice
// survives Encode/Decode bit for bit.
func axisCodec(t testing.TB, rng *rand.Rand, d int, bits []uint8, gain bool) (*Codec, []int, []float32) {
	t.Helper()
	k := len(bits)
	perm := rng.Perm(d)
	signs := make([]float32, k)
	comps := make([]float32, k*d)
	clips := make([]float32, k)
	for i := 0; i < k; i++ {
		signs[i] = float32(1 - 2*rng.IntN(2))
		comps[i*d+perm[i]] = signs[i]
		clips[i] = float32(math.Ldexp(1, rng.IntN(6)-2)) // 1/4 .. 8
	}
	mean := make([]float32, d)
	for j := range mean {
		mean[j] = float32(rng.IntN(65)-32) / 16
	}
	c, err := New(Params{Mean: mean, Components: comps, Bits: bits, Clips: clips, Gain: gain})
	if err != nil {
		t.Fatal(err)
	}
	return c, perm, signs
}

// level is the reconstruction of cell j as docs/codec.md defines it:
// -clip + (j + 1/2) * 2 clip / 2^b, computed here in float64 (exact for the
// dyadic clips of axisCodec).
func level(j int, b uint8, clip float32) float64 {
	step := 2 * float64(clip) / float64(int(1)<<b)
	return -float64(clip) + (float64(j)+0.5)*step
}

// packRef packs fields LSB-first one bit at a time, the way docs/codec.md
// describes the payload: field bit t goes to stream bit p+t, stream bit q
// to bit q%8 of byte q/8.
func packRef(fields []uint64, widths []uint8) []byte {
	total := 0
	for _, w := range widths {
		total += int(w)
	}
	out := make([]byte, (total+7)/8)
	q := 0
	for f, v := range fields {
		for t := 0; t < int(widths[f]); t++ {
			if v>>t&1 == 1 {
				out[q/8] |= 1 << (q % 8)
			}
			q++
		}
	}
	return out
}

// TestPackRefHand anchors the reference packer to hand-worked examples from
// docs/codec.md §4.1.
func TestPackRefHand(t *testing.T) {
	cases := []struct {
		fields []uint64
		widths []uint8
		want   []byte
	}{
		{[]uint64{5, 2}, []uint8{3, 2}, []byte{0x15}},
		{[]uint64{0xAB, 0xC}, []uint8{8, 4}, []byte{0xAB, 0x0C}},
		// 1-bit fields 1,0,0,1,1,0,1,1,1: bits 0..7 = 0b11011001, bit 8 = 1.
		{[]uint64{1, 0, 0, 1, 1, 0, 1, 1, 1}, []uint8{1, 1, 1, 1, 1, 1, 1, 1, 1}, []byte{0xD9, 0x01}},
		// 7 ones then 6 ones: 13 ones, 0xFF then 0x1F.
		{[]uint64{0x7F, 0x3F}, []uint8{7, 6}, []byte{0xFF, 0x1F}},
		// A 16-bit gain code then a 5-bit index: 0x3C00 (1.0), 0x11.
		{[]uint64{0x3C00, 0x11}, []uint8{16, 5}, []byte{0x00, 0x3C, 0x11}},
	}
	for _, tc := range cases {
		if got := packRef(tc.fields, tc.widths); !bytes.Equal(got, tc.want) {
			t.Errorf("packRef(%x, %v) = %x, want %x", tc.fields, tc.widths, got, tc.want)
		}
		if got := unpackRef(tc.want, tc.widths); !slices.Equal(got, tc.fields) {
			t.Errorf("unpackRef(%x, %v) = %x, want %x", tc.want, tc.widths, got, tc.fields)
		}
	}
	// The codec itself on the first example: axis components with clip 4,
	// index 5 of 3 bits is level (2*5+1-8)/8*4 = 1.5, index 2 of 2 bits is
	// (2*2+1-4)/4*4 = 1.
	c, err := New(Params{Mean: []float32{0, 0}, Components: []float32{1, 0, 0, 1}, Bits: []uint8{3, 2}, Clips: []float32{4, 4}})
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 1)
	if err := c.Encode(p, []float32{1.5, 1}); err != nil || p[0] != 0x15 {
		t.Fatalf("Encode(1.5, 1) = %x (%v), want 15", p, err)
	}
}

// TestLatticeRoundTrip covers every bit width 1..8 and mixed allocations:
// tokens on the reconstruction lattice encode to the reference packing of
// their cell indices and decode back exactly, and reference-packed random
// indices decode to their levels.
func TestLatticeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var allocs [][]uint8
	for b := uint8(1); b <= MaxBits; b++ {
		bits := make([]uint8, 13) // 13 components: totals not byte multiples
		for i := range bits {
			bits[i] = b
		}
		allocs = append(allocs, bits)
	}
	for trial := 0; trial < 20; trial++ {
		bits := make([]uint8, 1+rng.IntN(20))
		for i := range bits {
			bits[i] = uint8(1 + rng.IntN(8))
		}
		allocs = append(allocs, bits)
	}
	for _, bits := range allocs {
		d := len(bits) + rng.IntN(5) // some coordinates not covered
		c, perm, signs := axisCodec(t, rng, d, bits, false)
		clips := c.Clips()
		mean := c.Mean()
		for rep := 0; rep < 10; rep++ {
			idx := make([]uint64, len(bits))
			x := append([]float32(nil), mean...)
			for i, b := range bits {
				idx[i] = uint64(rng.IntN(1 << b))
				x[perm[i]] += signs[i] * float32(level(int(idx[i]), b, clips[i]))
			}
			want := packRef(idx, bits)
			if len(want) != c.PayloadBytes() {
				t.Fatalf("bits %v: PayloadBytes %d, reference %d", bits, c.PayloadBytes(), len(want))
			}
			got := make([]byte, c.PayloadBytes())
			if err := c.Encode(got, x); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("bits %v indices %v: payload %x, reference %x", bits, idx, got, want)
			}
			back := make([]float32, d)
			if err := c.Decode(back, want); err != nil {
				t.Fatal(err)
			}
			for j := range x {
				if back[j] != x[j] {
					t.Fatalf("bits %v: decoded[%d] = %v, want lattice point %v", bits, j, back[j], x[j])
				}
			}
		}
	}
}

// naiveEncode is a reference for Encode written from docs/codec.md: center
// in float32, dot products summed in index order in float32, the cell index
// t = float32(y*invStep) + 2^(b-1) clamped to [0, 2^b - 1] (NaN -> 0), and
// the reference bit packer.
func naiveEncode(c *Codec, x []float32) []byte {
	d := c.Width()
	comps, clips, bits, mean := c.Components(), c.Clips(), c.Bits(), c.Mean()
	idx := make([]uint64, len(bits))
	for i, b := range bits {
		var y float32
		if c.Version() >= 2 { // the kernels' float order (docs/kernels.md §2)
			xc := make([]float32, d)
			for j := range xc {
				xc[j] = x[j] - mean[j]
			}
			y = kernels.Dot(comps[i*d:(i+1)*d], xc)
		} else {
			for j := 0; j < d; j++ {
				xc := x[j] - mean[j]
				y += float32(comps[i*d+j] * xc)
			}
		}
		half := float32(int(1) << (b - 1))
		inv := half / clips[i]
		tt := float32(y*inv) + half
		switch {
		case !(tt > 0):
			idx[i] = 0
		case tt >= 2*half:
			idx[i] = uint64(2*half) - 1
		default:
			idx[i] = uint64(tt)
		}
	}
	return packRef(idx, bits)
}

// TestEncodeMatchesReference compares Encode and EncodeBatch with the
// reference on a fitted codec and random tokens, including out-of-range and
// non-finite values, byte for byte.
func TestEncodeMatchesReference(t *testing.T) {
	for _, v1 := range []bool{true, false} {
		t.Run(fmt.Sprintf("version1=%v", v1), func(t *testing.T) { testEncodeMatchesReference(t, v1) })
	}
}

func testEncodeMatchesReference(t *testing.T, version1 bool) {
	rng := rand.New(rand.NewPCG(9, 10))
	d, n := 37, 400
	s := make([]float32, n*d)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * float64(1+i%d))
	}
	c, err := Fit(s, n, d, FitOptions{Bytes: 15, version1: version1})
	if err != nil {
		t.Fatal(err)
	}
	e := c.NewEncoder()
	p := c.PayloadBytes()
	tokens := 50
	xs := make([]float32, tokens*d)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64() * 40)
	}
	xs[3] = float32(math.NaN())
	xs[d+1] = float32(math.Inf(1))
	xs[2*d+5] = float32(math.Inf(-1))
	batch := make([]byte, tokens*p)
	if err := e.EncodeBatch(batch, xs); err != nil {
		t.Fatal(err)
	}
	for tk := 0; tk < tokens; tk++ {
		x := xs[tk*d : (tk+1)*d]
		want := naiveEncode(c, x)
		got := make([]byte, p)
		if err := e.Encode(got, x); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || !bytes.Equal(batch[tk*p:(tk+1)*p], want) {
			t.Fatalf("token %d: payload %x, batch %x, reference %x", tk, got, batch[tk*p:(tk+1)*p], want)
		}
	}
	// Decode and DecodeBatch agree with a reference: mean plus the levels
	// times the components, accumulated in component order in float32.
	out := make([]float32, tokens*d)
	if err := c.DecodeBatch(out, batch); err != nil {
		t.Fatal(err)
	}
	comps, clips, bits, mean := c.Components(), c.Clips(), c.Bits(), c.Mean()
	for tk := 0; tk < tokens; tk++ {
		idx := unpackRef(batch[tk*p:(tk+1)*p], bits)
		levels := make([]float32, len(bits))
		for i, b := range bits {
			levels[i] = float32(2*int(idx[i])+1-(1<<b)) * float32(math.Ldexp(float64(clips[i]), -int(b)))
		}
		for j := 0; j < d; j++ {
			v := mean[j]
			if !version1 { // column j of the components with the levels, then the mean
				col := make([]float32, len(bits))
				for i := range col {
					col[i] = comps[i*d+j]
				}
				v = kernels.Dot(col, levels) + mean[j]
			} else {
				for i := range bits {
					v += float32(levels[i] * comps[i*d+j])
				}
			}
			if out[tk*d+j] != v {
				t.Fatalf("token %d value %d: decoded %v, reference %v", tk, j, out[tk*d+j], v)
			}
		}
	}
}

func unpackRef(payload []byte, widths []uint8) []uint64 {
	out := make([]uint64, len(widths))
	q := 0
	for f, w := range widths {
		for t := 0; t < int(w); t++ {
			out[f] |= uint64(payload[q/8]>>(q%8)&1) << t
			q++
		}
	}
	return out
}

func TestDecodeRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	c, _, _ := axisCodec(t, rng, 6, []uint8{3, 2}, false) // 5 bits: 3 padding bits
	out := make([]float32, 6)
	cases := []struct {
		payload []byte
		dst     []float32
		want    string
	}{
		{[]byte{0x1f}, out, ""},
		{[]byte{0x20}, out, "padding bits"},
		{[]byte{0x1f, 0}, out, "payload has 2 bytes"},
		{nil, out, "payload has 0 bytes"},
		{[]byte{0}, make([]float32, 5), "destination has 5 values"},
	}
	for _, tc := range cases {
		err := c.Decode(tc.dst, tc.payload)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Decode(%x) = %v, want error containing %q", tc.payload, err, tc.want)
		}
	}
	g, _, _ := axisCodec(t, rng, 6, []uint8{8}, true) // gain + 8 bits: 3 bytes
	for _, code := range []uint16{0x7c00, 0x7e00, 0x8000, 0xbc00} {
		p := []byte{byte(code), byte(code >> 8), 0}
		if err := g.Decode(out, p); err == nil || !strings.Contains(err.Error(), "gain") {
			t.Errorf("gain %#04x: Decode = %v, want a gain error", code, err)
		}
	}
	if err := c.Encode(make([]byte, 2), make([]float32, 6)); err == nil {
		t.Error("Encode into 2 bytes of a 1-byte payload succeeded")
	}
	if err := c.Encode(make([]byte, 1), make([]float32, 7)); err == nil {
		t.Error("Encode of a width-7 token with a width-6 codec succeeded")
	}
	if err := c.DecodeBatch(make([]float32, 12), []byte{0x1f}); err == nil {
		t.Error("DecodeBatch of one payload into two tokens succeeded")
	}
}

// TestGainRoundTrip: with a gain, a token and the same token scaled by 2^s
// encode to the same indices (the gain absorbs the power of two exactly), and
// decoding reconstructs within the quantizer's cell.
func TestGainRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	d := 16
	bits := []uint8{6, 5, 4, 4, 3}
	c, perm, signs := axisCodec(t, rng, d, bits, true)
	if c.PayloadBytes() != (16+22+7)/8 {
		t.Fatalf("PayloadBytes %d, want %d", c.PayloadBytes(), (16+22+7)/8)
	}
	mean, clips := c.Mean(), c.Clips()
	x := append([]float32(nil), mean...)
	for i := range bits {
		// Dyadic offsets: mean + 4*offset is exact, so the scaled token's
		// coefficients are exactly 4 times the first's.
		x[perm[i]] += signs[i] * float32(rng.IntN(129)-64) / 128 * clips[i]
	}
	p1 := make([]byte, c.PayloadBytes())
	if err := c.Encode(p1, x); err != nil {
		t.Fatal(err)
	}
	x4 := append([]float32(nil), x...)
	for j := range x4 {
		x4[j] = mean[j] + 4*(x[j]-mean[j])
	}
	p4 := make([]byte, c.PayloadBytes())
	if err := c.Encode(p4, x4); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p1[2:], p4[2:]) {
		t.Fatalf("indices differ after scaling by 4: %x vs %x", p1, p4)
	}
	g1 := uint16(p1[0]) | uint16(p1[1])<<8
	g4 := uint16(p4[0]) | uint16(p4[1])<<8
	if g4 != g1+2<<10 { // binary16 exponent +2
		t.Fatalf("gain codes %#04x and %#04x do not differ by a factor 4", g1, g4)
	}
	back := make([]float32, d)
	if err := c.Decode(back, p1); err != nil {
		t.Fatal(err)
	}
	// Gain g = RMS of the coefficients, rounded to binary16 (relative error
	// <= 2^-11). Coefficients y_i/g within [-clip, clip] are reconstructed
	// within half a cell, clip/2^b, times g; the gain rounding adds at most
	// |y| * 2^-11 * 2.
	var ss float64
	for i := range bits {
		y := float64(signs[i] * (x[perm[i]] - mean[perm[i]]))
		ss += y * y
	}
	g := math.Sqrt(ss / float64(len(bits)))
	for i, b := range bits {
		j := perm[i]
		y := float64(x[j] - mean[j])
		if math.Abs(y/g) > float64(clips[i]) {
			continue // clipped: error bound does not apply
		}
		bound := g*float64(clips[i])/float64(int(1)<<b) + math.Abs(y)*2*0x1p-11 + 1e-6
		if e := math.Abs(float64(back[j]) - float64(x[j])); e > bound {
			t.Errorf("component %d: error %v exceeds %v", i, e, bound)
		}
	}
}
