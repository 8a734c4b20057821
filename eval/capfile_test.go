package eval_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seamlm/seam/eval"
	"github.com/zeebo/blake3"
)

// tinyCapture is two sequences, (7, 9) and (5), of width 2 at boundary 3.
func tinyCapture() *eval.CaptureFile {
	return &eval.CaptureFile{
		Boundary: 3, Width: 2, Model: [32]byte{0xAA, 31: 0xBB},
		Seqs: [][]int{{7, 9}, {5}},
		Rows: []float32{1, -2, 0.5, 0, 3, 1e-3},
	}
}

// tinyBytes is tinyCapture's file, laid out by hand from the format
// comment in capfile.go.
func tinyBytes() []byte {
	le := binary.LittleEndian
	var toks []byte
	for _, v := range []uint32{2, 1, 7, 9, 5} { // lengths, then ids
		toks = le.AppendUint32(toks, v)
	}
	b := []byte("SEAMCAPT")
	b = le.AppendUint32(b, 1) // version
	b = le.AppendUint32(b, 2) // width
	b = le.AppendUint32(b, 3) // boundary
	b = le.AppendUint32(b, 2) // sequences
	b = le.AppendUint64(b, 3) // rows
	model := [32]byte{0xAA, 31: 0xBB}
	b = append(b, model[:]...)
	calib := blake3.Sum256(toks)
	b = append(b, calib[:]...)
	b = append(b, toks...)
	for _, v := range []float32{1, -2, 0.5, 0, 3, 1e-3} {
		b = le.AppendUint32(b, math.Float32bits(v))
	}
	sum := blake3.Sum256(b)
	return append(b, sum[:]...)
}

func marshal(t testing.TB, c *eval.CaptureFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := c.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reports %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestCaptureFileLayout(t *testing.T) {
	got := marshal(t, tinyCapture())
	if want := tinyBytes(); !bytes.Equal(got, want) {
		t.Fatalf("file\n% x\nwant\n% x", got, want)
	}
	c, err := eval.UnmarshalCapture(got)
	if err != nil {
		t.Fatal(err)
	}
	want := tinyCapture()
	if c.Boundary != want.Boundary || c.Width != want.Width || c.Model != want.Model ||
		!slices.EqualFunc(c.Seqs, want.Seqs, slices.Equal) || !slices.Equal(c.Rows, want.Rows) {
		t.Fatalf("read back %+v, want %+v", c, want)
	}
	if c.CalibDigest() != eval.TokensDigest(want.Seqs) || c.N() != 3 {
		t.Fatal("calibration digest or row count differs")
	}
}

func TestCaptureFileRoundTripOnDisk(t *testing.T) {
	m := smallModel(t)
	cf := calibration(t, m, 300, 5)
	path := filepath.Join(t.TempDir(), "c.capture")
	if err := cf.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := eval.ReadCaptureFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Rows, cf.Rows) || !slices.EqualFunc(got.Seqs, cf.Seqs, slices.Equal) || got.Model != cf.Model {
		t.Fatal("capture read back differs")
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

// restamp recomputes the calibration digest and the file digest of a
// capture file whose header is intact, so that a test reaches the checks
// behind them.
func restamp(b []byte) []byte {
	le := binary.LittleEndian
	s, n := int(le.Uint32(b[20:])), int(le.Uint64(b[24:]))
	toks := b[96 : 96+4*(s+n)]
	calib := blake3.Sum256(toks)
	copy(b[64:], calib[:])
	sum := blake3.Sum256(b[:len(b)-32])
	copy(b[len(b)-32:], sum[:])
	return b
}

func TestCaptureFileRejects(t *testing.T) {
	le := binary.LittleEndian
	edit := func(f func(b []byte) []byte) []byte { return f(tinyBytes()) }
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "shorter than"},
		{"bad magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), "magic"},
		{"version 2", edit(func(b []byte) []byte { le.PutUint32(b[8:], 2); return b }), "version 2"},
		{"width 0", edit(func(b []byte) []byte { le.PutUint32(b[12:], 0); return b }), "width 0"},
		{"width beyond the limit", edit(func(b []byte) []byte { le.PutUint32(b[12:], 1<<17); return b }), "width 131072"},
		{"boundary 0", edit(func(b []byte) []byte { le.PutUint32(b[16:], 0); return b }), "boundary 0"},
		{"more sequences than rows", edit(func(b []byte) []byte { le.PutUint32(b[20:], 4); return b }), "4 sequences for 3 rows"},
		{"huge row count", edit(func(b []byte) []byte { le.PutUint64(b[24:], 1<<62); return b }), "rows in a"},
		{"truncated", tinyBytes()[:len(tinyBytes())-1], "make 172 bytes, but the file has 171"},
		{"extended", append(tinyBytes(), 0), "but the file has 173"},
		{"corrupt row", edit(func(b []byte) []byte { b[120] ^= 1; return b }), "digest"},
		{"NaN row", edit(func(b []byte) []byte {
			le.PutUint32(b[116+4*2:], math.Float32bits(float32(math.NaN())))
			return restamp(b)
		}), "row 1, index 0: value NaN is not finite"},
		{"infinite row", edit(func(b []byte) []byte {
			le.PutUint32(b[116+4*5:], math.Float32bits(float32(math.Inf(-1))))
			return restamp(b)
		}), "row 2, index 1"},
		{"wrong calibration digest", edit(func(b []byte) []byte {
			b[64] ^= 1
			sum := blake3.Sum256(b[:len(b)-32])
			copy(b[len(b)-32:], sum[:])
			return b
		}), "calibration-data digest"},
		{"lengths short of the rows", edit(func(b []byte) []byte { le.PutUint32(b[96:], 1); return restamp(b) }), "sum to 2"},
		{"length beyond the rows", edit(func(b []byte) []byte { le.PutUint32(b[96:], 4); return restamp(b) }), "sequence 0 has length 4"},
		{"empty sequence", edit(func(b []byte) []byte { le.PutUint32(b[100:], 0); return restamp(b) }), "length 0"},
		{"token id beyond int32", edit(func(b []byte) []byte { le.PutUint32(b[104:], 1<<31); return restamp(b) }), "token id 2147483648"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := eval.UnmarshalCapture(c.b)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}

func TestCaptureWriteRejects(t *testing.T) {
	for name, f := range map[string]func(c *eval.CaptureFile){
		"NaN":            func(c *eval.CaptureFile) { c.Rows[3] = float32(math.NaN()) },
		"rows too short": func(c *eval.CaptureFile) { c.Rows = c.Rows[:5] },
		"empty sequence": func(c *eval.CaptureFile) { c.Seqs = append(c.Seqs, nil) },
		"no sequences":   func(c *eval.CaptureFile) { c.Seqs = nil },
		"negative token": func(c *eval.CaptureFile) { c.Seqs[0][1] = -1 },
		"width 0":        func(c *eval.CaptureFile) { c.Width = 0 },
		"boundary 0":     func(c *eval.CaptureFile) { c.Boundary = 0 },
	} {
		c := tinyCapture()
		f(c)
		if _, err := c.WriteTo(&bytes.Buffer{}); err == nil {
			t.Errorf("%s: written", name)
		}
	}
}

func FuzzReadCapture(f *testing.F) {
	f.Add(tinyBytes())
	f.Add(tinyBytes()[:100])
	f.Add(marshal(f, &eval.CaptureFile{Boundary: 1, Width: 1, Seqs: [][]int{{1}}, Rows: []float32{0}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, restampIfPlausible(b)} {
			c, err := eval.UnmarshalCapture(in)
			if err != nil {
				continue
			}
			// Whatever the reader accepts, the writer writes back identically.
			if out := marshal(t, c); !bytes.Equal(out, in) {
				t.Fatalf("accepted file does not round-trip:\n% x\n% x", in, out)
			}
		}
	})
}

// restampIfPlausible restamps a copy of b when its header's sizes fit in b,
// so the fuzzer reaches the checks behind the digests.
func restampIfPlausible(b []byte) []byte {
	if len(b) < 128 {
		return nil
	}
	le := binary.LittleEndian
	s, n := le.Uint32(b[20:]), le.Uint64(b[24:])
	if uint64(s)+n > uint64(len(b)) || 96+4*(uint64(s)+n) > uint64(len(b)-32) {
		return nil
	}
	return restamp(slices.Clone(b))
}

func TestPlotKL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kl.png")
	curve := eval.Series{Label: "codec", Results: []eval.Result{{BytesPerToken: 16, KL: 0.2}, {BytesPerToken: 32, KL: 0.01}}}
	points := []eval.Result{{Wire: "f32", BytesPerToken: 256}, {Wire: "q4", BytesPerToken: 36, KL: 0.03}, {Wire: "f16", BytesPerToken: 128, KL: 4e-8}}
	if err := eval.PlotKL(path, "test", []eval.Series{curve}, points); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// 8 x 5.5 inches at gonum's default 96 dots per inch.
	if b := img.Bounds(); b.Dx() != 768 || b.Dy() != 528 {
		t.Fatalf("image %v, want 768 x 528", b)
	}
	if err := eval.PlotKL(path, "empty", nil, points[:1]); err == nil {
		t.Error("a plot with nothing drawable was written")
	}
}
