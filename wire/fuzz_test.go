package wire

import (
	"bytes"
	"io"
	"slices"
	"testing"
)

// seedFrames is a stream with one frame of every kind.
func seedFrames(t testing.TB) []byte {
	var buf bytes.Buffer
	fr := NewFramer(&buf, nil)
	h := testHello()
	m := Meta{Session: 1, Request: 2, Start: 3}
	x := []float32{1, -2, 3, -4, 5, -6, 7, -8, 9}
	errs := []error{
		fr.WriteHello(KindHello, &h), fr.WriteHello(KindHelloAck, &h),
		fr.WriteTokenIDs(KindPrefill, FlagAllLogits, m, []uint32{1, 2}),
		fr.WriteTokenIDs(KindDecode, 0, m, []uint32{5}),
		fr.WriteActivations(KindResult, 0, m, F32, x, 1, 9),
		fr.WriteReset(m), fr.WriteClose(m), fr.WriteError(m, CodeLimit, "too big"),
	}
	for _, e := range []Encoding{F32, F16, Q8, Q5, Q4} {
		errs = append(errs, fr.WriteActivations(KindPrefill, 0, m, e, x, 1, 9))
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// FuzzReadFrame feeds arbitrary bytes to a Framer and decodes whatever it
// accepts. Nothing may panic, and an accepted frame must be exactly what a
// writer produces: re-writing its header and payload gives the same bytes.
func FuzzReadFrame(f *testing.F) {
	stream := seedFrames(f)
	f.Add(stream, false)
	for i := 0; i+HeaderSize <= len(stream); {
		n := HeaderSize + int(le.Uint32(stream[i+offLength:]))
		f.Add(slices.Clone(stream[i:i+n]), true)
		i += n
	}
	f.Fuzz(func(t *testing.T, data []byte, reseal bool) {
		if reseal {
			// Most mutations would die at the checksum; fixing it up lets
			// the fuzzer reach the header rules and payload decoders.
			data = resealAll(data)
		}
		fr := NewFramer(nil, bytes.NewReader(data))
		if err := fr.SetLimits(Limits{MaxPayload: 1 << 20, MaxTokens: 64, MaxWidth: 4096, MaxVocab: 4096}); err != nil {
			t.Fatal(err)
		}
		off := 0
		for {
			fm, err := fr.ReadFrame()
			if err == io.EOF {
				return
			}
			if err != nil {
				if _, err2 := fr.ReadFrame(); err2 != err {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				return
			}
			var hdr [HeaderSize]byte
			fm.Header.put(&hdr)
			size := HeaderSize + len(fm.Payload)
			if !bytes.Equal(hdr[:], data[off:off+HeaderSize]) || !bytes.Equal(fm.Payload, data[off+HeaderSize:off+size]) {
				t.Fatalf("accepted frame does not re-encode to its bytes")
			}
			off += size
			decodeAny(fm)
		}
	})
}

// resealAll recomputes the CRC of every complete frame in data, walking by
// declared lengths.
func resealAll(data []byte) []byte {
	data = slices.Clone(data)
	for i := 0; i+HeaderSize <= len(data); {
		n := HeaderSize + int(le.Uint32(data[i+offLength:]))
		if n > len(data)-i {
			break
		}
		hdr := (*[HeaderSize]byte)(data[i : i+HeaderSize])
		le.PutUint32(hdr[offCRC:], frameCRC(hdr, data[i+HeaderSize:i+n]))
		i += n
	}
	return data
}

// decodeAny runs every typed decoder that applies to the frame.
func decodeAny(f *Frame) {
	switch f.Kind {
	case KindHello, KindHelloAck:
		_, _ = f.Hello()
	case KindError:
		_, _ = f.RemoteError()
	case KindPrefill, KindDecode, KindResult:
		if f.Flags&FlagTokenIDs != 0 {
			_, _ = f.TokenIDs(nil)
		} else if y, err := f.Activations(nil); err == nil {
			for _, v := range y {
				if !finite32(v) {
					panic("decoded a non-finite value without error")
				}
			}
		}
	}
}

// FuzzHello decodes arbitrary handshake payloads. An accepted payload is
// canonical: encoding the decoded Hello gives back the same bytes.
func FuzzHello(f *testing.F) {
	h := testHello()
	b, err := AppendHello(nil, &h)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	up, down := helloPair()
	for _, x := range []Hello{up, down} {
		x.Encoding = EncodingF32
		b, err := AppendHello(nil, &x)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHello(data)
		if err != nil {
			return
		}
		again, err := AppendHello(nil, &h)
		if err != nil {
			t.Fatalf("decoded hello does not encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("hello not canonical:\n in % x\nout % x", data, again)
		}
		local := h
		if _, err := CheckHello(&local, &h); err == nil && h.Layers.End != h.Layers.Start {
			// A Hello checked against itself fails the boundary check unless
			// its range is empty; anything else is a CheckHello bug.
			t.Fatalf("self-check of %v passed", h.Layers)
		}
	})
}

// FuzzDecodeActivations decodes arbitrary bytes with each encoding: no
// panics, and no non-finite value returned without an error.
func FuzzDecodeActivations(f *testing.F) {
	f.Add(uint8(EncodingQ8), uint8(2), uint8(9), []byte{0, 0, 0x80, 0x3f, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(EncodingQ5), uint8(1), uint8(9), []byte{0, 0, 0x80, 0x3f, 0x2f, 0x86, 0x0f, 0x06, 0x32, 0x1e})
	f.Add(uint8(EncodingQ4), uint8(1), uint8(3), []byte{0, 0, 0x80, 0x3f, 0x97, 0x02})
	f.Add(uint8(EncodingF16), uint8(1), uint8(2), []byte{0, 0x3c, 0, 0x7c})
	f.Add(uint8(EncodingF32), uint8(1), uint8(1), []byte{0, 0, 0xc0, 0x7f})
	f.Fuzz(func(t *testing.T, id, tokens, width uint8, src []byte) {
		e, err := Default.Lookup(EncodingID(id%5+1), 0)
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]float32, int(tokens)*int(width))
		if e.Decode(dst, src, int(tokens), int(width)) != nil {
			return
		}
		for _, v := range dst {
			if !finite32(v) {
				t.Fatalf("%s decoded %v without error", e.Name(), v)
			}
		}
	})
}

// FuzzErrorPayload decodes arbitrary Error payloads; accepted ones re-encode
// to the same bytes.
func FuzzErrorPayload(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0, 'h', 'i'})
	f.Add([]byte{10, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodeErrorPayload(data)
		if err != nil {
			return
		}
		again, err := AppendErrorPayload(nil, p)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("error payload % x re-encodes to % x (%v)", data, again, err)
		}
	})
}
