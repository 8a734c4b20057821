package wire

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// halves is a toy learned codec for tests: it sends the first half of each
// token's values as f32 and reconstructs the second half as zeros.
type halves struct{ id uint32 }

func (halves) ID() EncodingID    { return EncodingLowRank }
func (halves) Name() string      { return "halves" }
func (h halves) CodecID() uint32 { return h.id }
func (halves) PayloadSize(tokens, width int) (int, error) {
	if width%2 != 0 {
		return 0, errors.New("halves: odd width")
	}
	return F32.PayloadSize(tokens, width/2)
}
func (halves) Encode(dst []byte, src []float32, tokens, width int) error {
	for t := range tokens {
		row := src[t*width : t*width+width/2]
		if err := F32.Encode(dst[t*width*2:(t+1)*width*2], row, 1, width/2); err != nil {
			return err
		}
	}
	return nil
}
func (halves) Decode(dst []float32, src []byte, tokens, width int) error {
	for t := range tokens {
		if err := F32.Decode(dst[t*width:t*width+width/2], src[t*width*2:(t+1)*width*2], 1, width/2); err != nil {
			return err
		}
		clear(dst[t*width+width/2 : (t+1)*width])
	}
	return nil
}

// plain is a registrable encoding with its own id: f16 under another name.
type plain struct{ f16Encoding }

func (plain) ID() EncodingID { return 200 }
func (plain) Name() string   { return "plain" }

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	if ids := r.IDs(); !slices.Equal(ids, []EncodingID{1, 2, 3, 4, 5}) {
		t.Fatalf("built-in ids %v", ids)
	}
	if err := r.Register(plain{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(plain{}); err == nil {
		t.Error("duplicate id 200 accepted")
	}
	if err := r.Register(halves{id: 1}); err == nil {
		t.Error("lowrank id accepted by Register")
	}
	if err := r.RegisterCodec(halves{id: 0}); err == nil {
		t.Error("codec short id 0 accepted")
	}
	if err := r.RegisterCodec(halves{id: 9}); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterCodec(halves{id: 9}); err == nil {
		t.Error("duplicate codec 9 accepted")
	}
	if ids := r.IDs(); !slices.Equal(ids, []EncodingID{1, 2, 3, 4, 5, 6, 200}) {
		t.Fatalf("ids %v", ids)
	}
	if e, err := r.Lookup(EncodingLowRank, 9); err != nil || e.Name() != "halves" {
		t.Fatalf("lookup codec 9: %v %v", e, err)
	}
	if _, err := r.Lookup(EncodingLowRank, 10); !errors.Is(err, ErrEncoding) {
		t.Fatalf("lookup codec 10: %v", err)
	}
	if _, err := Default.Lookup(200, 0); !errors.Is(err, ErrEncoding) {
		t.Fatal("a private registry leaked into Default")
	}
}

// Registered encodings travel through a Framer using that registry; a
// lowrank frame carries the codec's short id in the header.
func TestRegisteredEncodingsOnTheWire(t *testing.T) {
	reg := NewRegistry()
	if err := reg.Register(plain{}); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterCodec(halves{id: 9}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, r := NewFramer(&buf, nil), NewFramer(nil, &buf)
	w.SetRegistry(reg)
	r.SetRegistry(reg)
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	m := Meta{Session: 3}
	for _, e := range []Encoding{plain{}, halves{id: 9}} {
		if err := w.WriteActivations(KindPrefill, 0, m, e, x, 2, 4); err != nil {
			t.Fatal(err)
		}
	}
	wantCodec := []uint32{0, 9}
	wantX := [][]float32{x, {1, 2, 0, 0, 5, 6, 0, 0}}
	for i := range 2 {
		raw := slices.Clone(buf.Bytes()[:HeaderSize])
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if got := le.Uint32(raw[offCodec:]); got != wantCodec[i] || f.Codec != wantCodec[i] {
			t.Fatalf("frame %d: codec field %d, want %d", i, got, wantCodec[i])
		}
		y, err := f.Activations(nil)
		if err != nil || !slices.Equal(y, wantX[i]) {
			t.Fatalf("frame %d: %v %v", i, y, err)
		}
	}
	// Odd width: the codec refuses the shape, so the header is refused.
	if err := w.WriteActivations(KindPrefill, 0, m, halves{id: 9}, x[:6], 2, 3); err == nil {
		t.Fatal("codec accepted an odd width")
	}
}
