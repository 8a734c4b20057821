package codec

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/blake3"
)

// smallCodec fits a width-4 codec with a held-out set, provenance and KL:
// every field of the file is populated.
func smallCodec(t testing.TB, gain bool) *Codec {
	t.Helper()
	rng := rand.New(rand.NewPCG(21, 22))
	const n, d = 200, 4
	s := make([]float32, n*d)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * float64(4-i%d))
	}
	bytes := 1
	if gain {
		bytes = 3
	}
	c, err := Fit(s, n, d, FitOptions{Bytes: bytes, Holdout: 0.25, Gain: gain, version1: true,
		Provenance: Provenance{Model: [32]byte{1, 2, 3}, Boundary: 3, CalibData: [32]byte{9, 8, 7}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetHeldoutKL(0.0123); err != nil {
		t.Fatal(err)
	}
	return c
}

// Offsets of a file with d and k, from docs/codec.md.
func layout(d, k int) (meanOff, compOff, clipOff, provOff, digestOff int) {
	meanOff = 28 + (k+3)/4*4
	compOff = meanOff + 4*d
	clipOff = compOff + 4*k*d
	provOff = clipOff + 4*k
	digestOff = provOff + 112
	return
}

// reseal recomputes the trailing BLAKE3 digest so that a deliberate edit
// reaches the field checks behind the digest check.
func reseal(b []byte) []byte {
	sum := blake3.Sum256(b[:len(b)-32])
	copy(b[len(b)-32:], sum[:])
	return b
}

func TestFileRoundTrip(t *testing.T) {
	for _, gain := range []bool{false, true} {
		c := smallCodec(t, gain)
		b := c.Marshal()
		d, k := c.Width(), c.Kept()
		_, _, _, _, digestOff := layout(d, k)
		if len(b) != digestOff+32 {
			t.Fatalf("file is %d bytes, layout says %d", len(b), digestOff+32)
		}
		if string(b[:8]) != "SEAMCODC" || binary.LittleEndian.Uint32(b[8:]) != 1 {
			t.Fatalf("header %x", b[:12])
		}
		if sum := blake3.Sum256(b[:digestOff]); sum != c.Digest() || !bytes.Equal(sum[:], b[digestOff:]) {
			t.Fatal("digest is not BLAKE3 of the content")
		}
		if c.ShortID() != binary.LittleEndian.Uint32(b[digestOff:]) {
			t.Fatal("ShortID is not the digest's first 4 bytes, little-endian")
		}
		path := filepath.Join(t.TempDir(), "b.codec")
		if err := c.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		r, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Marshal(), b) || r.Digest() != c.Digest() {
			t.Fatal("read codec differs from the written one")
		}
		if r.Provenance() != c.Provenance() || r.Stats() != c.Stats() || r.Gain() != gain {
			t.Fatalf("provenance/stats lost: %+v %+v", r.Provenance(), r.Stats())
		}
		// Both read back and original produce the same payloads.
		x := []float32{1, -2, 3, 0.5}
		p1, p2 := make([]byte, c.PayloadBytes()), make([]byte, r.PayloadBytes())
		if c.Encode(p1, x) != nil || r.Encode(p2, x) != nil || !bytes.Equal(p1, p2) {
			t.Fatal("payloads differ after a file round trip")
		}
	}
}

// TestFileSizeExample checks the size worked out in docs/codec.md §2:
// d = 64, k = 64: M = 28 + 64 = 92, C = 92 + 256 + 16384 = 16732,
// R = 16732 + 256 = 16988, total R + 144 = 17132.
func TestFileSizeExample(t *testing.T) {
	bits := make([]uint8, 64)
	for i := range bits {
		bits[i] = 4
	}
	c, _, _ := axisCodec(t, rand.New(rand.NewPCG(3, 3)), 64, bits, false)
	if n := len(c.Marshal()); n != 17132 {
		t.Fatalf("d=64 k=64 file is %d bytes, want 17132", n)
	}
	// k = 3 needs one padding byte: M = 28 + 3 + 1 = 32.
	c, _, _ = axisCodec(t, rand.New(rand.NewPCG(3, 3)), 5, []uint8{1, 2, 3}, false)
	b := c.Marshal()
	if b[31] != 0 || math.Float32frombits(binary.LittleEndian.Uint32(b[32:])) != c.Mean()[0] {
		t.Fatalf("mean does not start at offset 32 after one padding byte")
	}
}

func TestProvenanceChangesDigest(t *testing.T) {
	c := smallCodec(t, false)
	d0 := c.Digest()
	p := c.Provenance()
	p.Boundary++
	c.SetProvenance(p)
	if c.Digest() == d0 {
		t.Fatal("changing the boundary layer kept the digest")
	}
	d1 := c.Digest()
	if err := c.SetHeldoutKL(0.5); err != nil || c.Digest() == d1 {
		t.Fatalf("SetHeldoutKL: %v, digest changed %v", err, c.Digest() != d1)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), -1e-9} {
		if err := c.SetHeldoutKL(bad); err == nil {
			t.Errorf("SetHeldoutKL(%v) accepted", bad)
		}
	}
	if _, err := Unmarshal(c.Marshal()); err != nil {
		t.Fatal(err)
	}
}

// TestEveryFlipRejected flips each byte (all bits) and each single bit of a
// small codec file: every corrupted file must be rejected.
func TestEveryFlipRejected(t *testing.T) {
	for _, gain := range []bool{false, true} {
		b := smallCodec(t, gain).Marshal()
		for i := range b {
			for _, mask := range []byte{0xff, 1, 2, 4, 8, 16, 32, 64, 128} {
				cb := append([]byte(nil), b...)
				cb[i] ^= mask
				if _, err := Unmarshal(cb); err == nil {
					t.Fatalf("flip %#x at byte %d of %d accepted", mask, i, len(b))
				}
			}
		}
	}
}

func TestTruncatedAndExtended(t *testing.T) {
	b := smallCodec(t, false).Marshal()
	for n := 0; n < len(b); n++ {
		if _, err := Unmarshal(b[:n]); err == nil {
			t.Fatalf("file truncated to %d of %d bytes accepted", n, len(b))
		}
	}
	if _, err := Unmarshal(append(append([]byte(nil), b...), 0)); err == nil {
		t.Fatal("file with a trailing byte accepted")
	}
	path := filepath.Join(t.TempDir(), "t.codec")
	c, _ := Unmarshal(b)
	if err := c.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short.codec")
	if err := writeBytes(short, b[:len(b)-1]); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(short); err == nil || !strings.Contains(err.Error(), "implies") {
		t.Fatalf("ReadFile of a truncated file: %v", err)
	}
}

// TestFieldChecks edits one field at a time, reseals the digest, and checks
// that the reader rejects the file with an error naming the field.
func TestFieldChecks(t *testing.T) {
	c := smallCodec(t, false)
	d, k := c.Width(), c.Kept()
	if k < 2 {
		t.Fatalf("test needs 2 kept components, has %d (bits %v)", k, c.Bits())
	}
	meanOff, compOff, clipOff, provOff, _ := layout(d, k)
	f32 := func(off int, v float32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[off:], math.Float32bits(v)) }
	}
	u32 := func(off int, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[off:], v) }
	}
	f64 := func(off int, v float64) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint64(b[off:], math.Float64bits(v)) }
	}
	bits := c.Bits()
	total := 0
	for _, b := range bits {
		total += int(b)
	}
	if total != 8 || bits[1] == 8 {
		t.Fatalf("test needs a full 8-bit allocation with room on component 1, has %v", bits)
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name, want string
		edit       func([]byte)
		reseal     bool
	}{
		{"digest", "digest mismatch", func(b []byte) { b[meanOff] ^= 1 }, false},
		{"magic", "magic", func(b []byte) { b[0] = 'X' }, true},
		{"version", "version", u32(8, 2), true},
		{"flags", "flags", u32(12, 4), true},
		{"width 0", "width", u32(16, 0), true},
		{"width too big", "width", u32(16, MaxWidth+1), true},
		{"k > d", "kept components", u32(20, uint32(d+1)), true},
		{"payload size", "payload size", u32(24, uint32(c.PayloadBytes()+1)), true},
		// The allocation changes the payload size without changing the file
		// size: the budget of 1 byte is full, so one more bit on component 1
		// needs a second byte.
		{"bits vs payload", "payload size", func(b []byte) { b[29]++ }, true},
		{"bits 0", "bits[1]", func(b []byte) { b[29] = 0 }, true},
		{"bits 9", "bits[0]", func(b []byte) { b[28] = 9 }, true},
		{"mean NaN", "mean[2]", f32(meanOff+8, nan), true},
		{"mean Inf", "mean[0]", f32(meanOff, -inf), true},
		{"component NaN", "components[1][3]", f32(compOff+4*(d+3), nan), true},
		{"component Inf", "components[0][0]", f32(compOff, inf), true},
		{"component not unit", "components[0] has squared norm", f32(compOff, 5), true},
		{"clip zero", "clips[0]", f32(clipOff, 0), true},
		{"clip negative", "clips[1]", f32(clipOff+4, -1), true},
		{"clip NaN", "clips[1]", f32(clipOff+4, nan), true},
		{"clip Inf", "clips[0]", f32(clipOff, inf), true},
		{"stat flags", "stat flags", u32(provOff+84, 4), true},
		{"MSE flag without holdout", "held-out MSE flag", u32(provOff+84, 2), true},
		{"MSE NaN", "held-out MSE", f64(provOff+88, math.NaN()), true},
		{"MSE negative", "held-out MSE", f64(provOff+88, -1), true},
		{"variance Inf", "held-out variance", f64(provOff+96, math.Inf(1)), true},
		{"KL NaN", "held-out KL", f64(provOff+104, math.NaN()), true},
		{"KL unmeasured but set", "held-out KL", func(b []byte) {
			binary.LittleEndian.PutUint32(b[provOff+84:], statHasMSE)
		}, true},
	}
	for _, tc := range cases {
		b := c.Marshal()
		tc.edit(b)
		if tc.reseal {
			reseal(b)
		}
		_, err := Unmarshal(b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Unmarshal error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
	if _, err := Unmarshal(c.Marshal()); err != nil {
		t.Fatalf("unedited file rejected: %v", err)
	}
}

func TestNewRejects(t *testing.T) {
	unit := []float32{1, 0, 0}
	cases := []struct {
		name string
		p    Params
	}{
		{"no width", Params{}},
		{"components length", Params{Mean: make([]float32, 3), Components: unit[:2], Bits: []uint8{4}, Clips: []float32{1}}},
		{"clips length", Params{Mean: make([]float32, 3), Components: unit, Bits: []uint8{4}}},
		{"k > d", Params{Mean: make([]float32, 1), Components: make([]float32, 2), Bits: []uint8{4, 4}, Clips: []float32{1, 1}}},
		{"zero bits", Params{Mean: make([]float32, 3), Components: unit, Bits: []uint8{0}, Clips: []float32{1}}},
		{"not unit", Params{Mean: make([]float32, 3), Components: []float32{1, 1, 0}, Bits: []uint8{4}, Clips: []float32{1}}},
	}
	for _, tc := range cases {
		if _, err := New(tc.p); err == nil {
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
}

// FuzzUnmarshal: arbitrary bytes never panic; whatever is accepted
// re-marshals to the same bytes, and its payloads decode.
func FuzzUnmarshal(f *testing.F) {
	f.Add(smallCodec(f, false).Marshal())
	f.Add(smallCodec(f, true).Marshal())
	rng := rand.New(rand.NewPCG(1, 1))
	ax, _, _ := axisCodec(f, rng, 5, []uint8{3, 8, 1}, false)
	f.Add(ax.Marshal())
	empty, err := New(Params{Mean: []float32{1, 2}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(empty.Marshal())
	f.Add([]byte("SEAMCODC"))
	for _, c := range v2Codecs(f) {
		f.Add(c.Marshal())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkUnmarshal(t, b)
		// A random edit almost never passes the digest; resealing lets the
		// fuzzer reach the field checks behind it.
		if len(b) >= headerSize+digestSize {
			checkUnmarshal(t, reseal(append([]byte(nil), b...)))
		}
	})
}

// checkUnmarshal: whatever Unmarshal accepts re-marshals to the same bytes
// and encodes and decodes a token.
func checkUnmarshal(t *testing.T, b []byte) {
	c, err := Unmarshal(b)
	if err != nil {
		return
	}
	if !bytes.Equal(c.Marshal(), b) {
		t.Fatal("accepted file does not re-marshal to itself")
	}
	x := make([]float32, c.Width())
	p, err := c.AppendTokens(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DecodeTokens(x, p); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecode: arbitrary payloads never panic. For the lattice codec (no
// gain, axis components, dyadic values) an accepted payload decodes to a
// lattice point, which must re-encode to the same payload; the gain codec
// must accept exactly the payloads with a finite non-negative gain and zero
// padding.
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(2, 2))
	lat, _, _ := axisCodec(f, rng, 9, []uint8{5, 3, 8, 1, 2, 7}, false)
	gain, _, _ := axisCodec(f, rng, 9, []uint8{4, 4, 3}, true)
	f.Add([]byte{1, 2, 3, 4})
	f.Add(make([]byte, lat.PayloadBytes()))
	f.Add(make([]byte, gain.PayloadBytes()))
	f.Fuzz(func(t *testing.T, p []byte) {
		x := make([]float32, 9)
		if err := lat.Decode(x, p); err == nil {
			back := make([]byte, lat.PayloadBytes())
			if err := lat.Encode(back, x); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, p) {
				t.Fatalf("payload %x decodes to %v, which encodes to %x", p, x, back)
			}
		}
		err := gain.Decode(x, p)
		if len(p) != gain.PayloadBytes() {
			if err == nil {
				t.Fatal("wrong-length payload accepted")
			}
			return
		}
		code := binary.LittleEndian.Uint16(p)
		valid := code&0x8000 == 0 && code&0x7c00 != 0x7c00 && p[len(p)-1]>>3 == 0 // 16+11 bits: 5 padding
		if (err == nil) != valid {
			t.Fatalf("payload %x: error %v, want valid=%v", p, err, valid)
		}
	})
}

func writeBytes(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
