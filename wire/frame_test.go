package wire

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// crcRef is CRC32C computed in one pass over a copy of the frame with the
// CRC field zeroed, independently of the framer's incremental computation.
func crcRef(frame []byte) uint32 {
	c := slices.Clone(frame)
	copy(c[48:52], []byte{0, 0, 0, 0})
	return crc32.Checksum(c, crc32.MakeTable(crc32.Castagnoli))
}

func TestCastagnoliCheckValue(t *testing.T) {
	// The published CRC-32C check value: crc("123456789") = 0xe3069283.
	if got := crc32.Update(0, castagnoli, []byte("123456789")); got != 0xe3069283 {
		t.Fatalf("crc32c check value %#x", got)
	}
}

// A Reset frame built byte by byte from the layout in docs/wire.md.
func TestHeaderGoldenBytes(t *testing.T) {
	var buf bytes.Buffer
	fr := NewFramer(&buf, nil)
	if err := fr.WriteReset(Meta{Session: 0x0102030405060708, Request: 0x1112131415161718}); err != nil {
		t.Fatal(err)
	}
	want := []byte{
		'S', 'E', 'A', 'M', // magic
		1, 0, // generation 1
		6,          // kind reset
		0,          // flags
		0, 0, 0, 0, // payload length
		0, 0, 0, 0, // encoding, reserved x3
		0, 0, 0, 0, // codec
		0, 0, 0, 0, // tokens
		0, 0, 0, 0, // width
		0, 0, 0, 0, // start
		8, 7, 6, 5, 4, 3, 2, 1, // session
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, // request
		0, 0, 0, 0, // crc, filled below
	}
	le.PutUint32(want[48:], crcRef(want))
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("reset frame\n got % x\nwant % x", buf.Bytes(), want)
	}
	// A Decode frame with one q8 token: check every tensor field's offset.
	buf.Reset()
	if err := fr.WriteActivations(KindDecode, 0, Meta{Session: 9, Request: 10, Start: 0x01020304}, Q8, []float32{127, -1}, 1, 2); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	hdr := b[:HeaderSize]
	wantHdr := []byte{'S', 'E', 'A', 'M', 1, 0, 4, 0, 6, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,
		1, 0, 0, 0, 2, 0, 0, 0, 4, 3, 2, 1, 9, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(hdr[:48], wantHdr) {
		t.Fatalf("decode header\n got % x\nwant % x", hdr[:48], wantHdr)
	}
	if got := le.Uint32(hdr[48:]); got != crcRef(b) {
		t.Fatalf("crc %#x, want %#x", got, crcRef(b))
	}
	if payload := b[HeaderSize:]; !bytes.Equal(payload, append(le32(1), 0x7f, 0xff)) {
		t.Fatalf("payload % x", payload)
	}
}

func testHello() Hello {
	return Hello{
		Generation: 1, MinGeneration: 1, MaxGeneration: 1,
		Model:  Digest{1, 2, 3},
		Layers: LayerRange{0, 3}, PeerLayers: LayerRange{3, 6},
		Width: 64, Vocab: 512,
		Encodings: []EncodingID{EncodingF32, EncodingF16, EncodingQ8},
		Encoding:  EncodingQ8,
		Codecs:    []CodecDigest{{Boundary: 3, ID: 7, Digest: Digest{9}}},
		Name:      "head",
	}
}

// Every kind and encoding goes through a writer and a reader unchanged.
func TestRoundTripEveryKind(t *testing.T) {
	var buf bytes.Buffer
	w, r := NewFramer(&buf, nil), NewFramer(nil, &buf)
	m := Meta{Session: 42, Request: 7, Start: 5}
	x := make([]float32, 3*64)
	for i := range x {
		x[i] = float32(i%13) - 6 // small integers: exact in f32 and f16
	}
	hello := testHello()
	check := func(kind Kind, flags Flags, enc EncodingID, tokens, width uint32) *Frame {
		t.Helper()
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("read %v: %v", kind, err)
		}
		if f.Kind != kind || f.Flags != flags || f.Encoding != enc || f.Tokens != tokens || f.Width != width {
			t.Fatalf("read %+v, want kind %v flags %v enc %v shape %dx%d", f.Header, kind, flags, enc, tokens, width)
		}
		return f
	}
	mustNil := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	for _, kind := range []Kind{KindHello, KindHelloAck} {
		mustNil(w.WriteHello(kind, &hello))
		got, err := check(kind, 0, 0, 0, 0).Hello()
		mustNil(err)
		if !helloEqual(got, hello) {
			t.Fatalf("%v: %+v, want %+v", kind, got, hello)
		}
	}
	for _, e := range []Encoding{F32, F16, Q8, Q5, Q4} {
		mustNil(w.WriteActivations(KindPrefill, FlagAllLogits, m, e, x, 3, 64))
		f := check(KindPrefill, FlagAllLogits, e.ID(), 3, 64)
		if f.Start != 5 || f.Session != 42 || f.Request != 7 {
			t.Fatalf("meta %+v", f.Header)
		}
		y, err := f.Activations(nil)
		mustNil(err)
		// The quantizers' error bounds are tested in encoding_test.go; here
		// the frame must carry exactly what a direct encode+decode gives.
		want := roundTrip(t, e, x, 3, 64)
		if !slices.Equal(y, want) {
			t.Fatalf("%s: activations differ from a direct decode", e.Name())
		}
		if (e == F32 || e == F16) && !slices.Equal(y, x) {
			t.Fatalf("%s: integers not exact", e.Name())
		}
	}
	mustNil(w.WriteActivations(KindDecode, 0, m, F16, x[:64], 1, 64))
	y, err := check(KindDecode, 0, EncodingF16, 1, 64).Activations(make([]float32, 0, 64))
	mustNil(err)
	if !slices.Equal(y, x[:64]) {
		t.Fatal("decode activations differ")
	}
	mustNil(w.WriteActivations(KindResult, 0, m, F32, x[:128], 1, 128))
	y, err = check(KindResult, 0, EncodingF32, 1, 128).Activations(nil)
	mustNil(err)
	if !slices.Equal(y, x[:128]) {
		t.Fatal("logits differ")
	}
	for _, c := range []struct {
		kind  Kind
		flags Flags
		ids   []uint32
	}{{KindPrefill, FlagAllLogits, []uint32{1, 2, 511}}, {KindDecode, 0, []uint32{3}}, {KindResult, 0, []uint32{77}}} {
		mustNil(w.WriteTokenIDs(c.kind, c.flags, m, c.ids))
		ids, err := check(c.kind, c.flags|FlagTokenIDs, 0, uint32(len(c.ids)), 0).TokenIDs(nil)
		mustNil(err)
		if !slices.Equal(ids, c.ids) {
			t.Fatalf("%v ids %v, want %v", c.kind, ids, c.ids)
		}
	}
	mustNil(w.WriteReset(m))
	if f := check(KindReset, 0, 0, 0, 0); f.Session != 42 || f.Request != 7 || len(f.Payload) != 0 {
		t.Fatalf("reset %+v", f.Header)
	}
	mustNil(w.WriteClose(m))
	check(KindClose, 0, 0, 0, 0)
	mustNil(w.WriteError(Meta{Session: 42, Request: 7}, CodeNonFinite, "NaN at layer 3"))
	re, err := check(KindError, 0, 0, 0, 0).RemoteError()
	mustNil(err)
	if re.Code != CodeNonFinite || re.Message != "NaN at layer 3" || re.Session != 42 || re.Request != 7 {
		t.Fatalf("error %+v", re)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
}

func helloEqual(a, b Hello) bool {
	return slices.Equal(a.Encodings, b.Encodings) && slices.Equal(a.Codecs, b.Codecs) &&
		a.Generation == b.Generation && a.MinGeneration == b.MinGeneration && a.MaxGeneration == b.MaxGeneration &&
		a.Model == b.Model && a.Layers == b.Layers && a.PeerLayers == b.PeerLayers && a.Width == b.Width &&
		a.Vocab == b.Vocab && a.Encoding == b.Encoding && a.Codec == b.Codec && a.Name == b.Name
}

// validFrame returns the bytes of a one-token q8 Decode frame, width 4.
func validFrame(t *testing.T) []byte {
	var buf bytes.Buffer
	if err := NewFramer(&buf, nil).WriteActivations(KindDecode, 0, Meta{Session: 1, Request: 2}, Q8, []float32{1, 2, 3, 4}, 1, 4); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// resealed recomputes the CRC after a mutation, so that the header check,
// not the checksum, is what must catch it.
func resealed(b []byte, mutate func(h []byte)) []byte {
	b = slices.Clone(b)
	mutate(b[:HeaderSize])
	le.PutUint32(b[48:], crcRef(b))
	return b
}

func readOne(b []byte, l *Limits) error {
	fr := NewFramer(nil, bytes.NewReader(b))
	if l != nil {
		if err := fr.SetLimits(*l); err != nil {
			return err
		}
	}
	_, err := fr.ReadFrame()
	return err
}

func TestHeaderRejections(t *testing.T) {
	base := validFrame(t)
	u32 := func(off int, v uint32) func([]byte) { return func(h []byte) { le.PutUint32(h[off:], v) } }
	u8 := func(off int, v byte) func([]byte) { return func(h []byte) { h[off] = v } }
	huge := Limits{MaxPayload: math.MaxUint32, MaxTokens: math.MaxUint32, MaxWidth: math.MaxUint32, MaxVocab: math.MaxUint32}
	cases := []struct {
		name   string
		mutate func([]byte)
		limits *Limits
		want   error
		// words the message must contain
		words []string
	}{
		{"wrong magic", func(h []byte) { copy(h, "SEAN") }, nil, ErrMalformed, []string{`"SEAN"`, `"SEAM"`}},
		{"generation 0", func(h []byte) { le.PutUint16(h[4:], 0) }, nil, ErrGeneration, []string{"generation 0"}},
		{"generation 5", func(h []byte) { le.PutUint16(h[4:], 5) }, nil, ErrGeneration, []string{"generation 5", "1..4"}},
		{"kind 0", u8(offKind, 0), nil, ErrMalformed, []string{"unknown kind 0"}},
		{"kind 15", u8(offKind, 15), nil, ErrMalformed, []string{"unknown kind 15"}},
		{"ping in generation 1", u8(offKind, 10), nil, ErrMalformed, []string{"pings exist from generation 2"}},
		{"describe in generation 1", u8(offKind, 11), nil, ErrMalformed, []string{"pool frames exist from generation 3"}},
		{"kind 255", u8(offKind, 255), nil, ErrMalformed, []string{"unknown kind 255"}},
		{"unknown flag", u8(offFlags, 0x80), nil, ErrMalformed, []string{"flags 0x80"}},
		{"all-logits flag on decode", u8(offFlags, byte(FlagAllLogits)), nil, ErrMalformed, []string{"flags"}},
		{"reserved byte", u8(offReserved+1, 1), nil, ErrMalformed, []string{"reserved"}},
		{"payload over limit", u32(offLength, 64<<20+1), nil, ErrLimit, []string{"67108865", "67108864"}},
		{"payload 4 GiB", u32(offLength, math.MaxUint32), nil, ErrLimit, []string{"4294967295"}},
		{"length one short", u32(offLength, 7), nil, ErrMalformed, []string{"length 7", "needs 8"}},
		{"length one long", u32(offLength, 9), nil, ErrMalformed, []string{"length 9", "needs 8"}},
		{"tokens over limit", func(h []byte) { le.PutUint32(h[offTokens:], 8193); h[offKind] = byte(KindPrefill) }, nil, ErrLimit, []string{"8193", "8192"}},
		{"width over limit", u32(offWidth, 1<<16+1), nil, ErrLimit, []string{"65537", "65536"}},
		{"tokens x width overflow", func(h []byte) {
			h[offKind] = byte(KindPrefill)
			le.PutUint32(h[offTokens:], math.MaxUint32-1)
			le.PutUint32(h[offWidth:], math.MaxUint32)
		}, &huge, ErrLimit, []string{"4294967294 tokens x width 4294967295"}},
		{"decoded size over limit", func(h []byte) {
			h[offKind] = byte(KindPrefill)
			le.PutUint32(h[offTokens:], 8192)
			le.PutUint32(h[offWidth:], 4096)
		}, nil, ErrLimit, []string{"8192 tokens x width 4096"}},
		{"zero tokens", u32(offTokens, 0), nil, ErrMalformed, []string{"token count 0"}},
		{"decode with 2 tokens", u32(offTokens, 2), nil, ErrMalformed, []string{"2 tokens"}},
		{"zero width", u32(offWidth, 0), nil, ErrMalformed, []string{"width 0"}},
		{"positions overflow", u32(offStart, math.MaxUint32), nil, ErrMalformed, []string{"overflow"}},
		{"session 0", func(h []byte) { le.PutUint64(h[offSession:], 0) }, nil, ErrMalformed, []string{"session id 0"}},
		{"unknown encoding", u8(offEncoding, 99), nil, ErrEncoding, []string{"encoding id 99"}},
		{"encoding none", u8(offEncoding, 0), nil, ErrMalformed, []string{"encoding 0"}},
		{"codec with q8", u32(offCodec, 5), nil, ErrMalformed, []string{"codec id 5"}},
		{"lowrank without codec", u8(offEncoding, byte(EncodingLowRank)), nil, ErrMalformed, []string{"codec id 0"}},
		{"unregistered lowrank codec", func(h []byte) { h[offEncoding] = byte(EncodingLowRank); le.PutUint32(h[offCodec:], 77) }, nil, ErrEncoding, []string{"codec 77"}},
		{"token ids with width", u8(offFlags, byte(FlagTokenIDs)), nil, ErrMalformed, []string{"token ids"}},
		{"reset with tokens", u8(offKind, byte(KindReset)), nil, ErrMalformed, []string{"tokens 1"}},
		{"hello with session", func(h []byte) {
			h[offKind] = byte(KindHello)
			h[offEncoding] = 0
			for _, off := range []int{offTokens, offWidth, offRequest} {
				le.PutUint32(h[off:], 0)
			}
		}, nil, ErrMalformed, []string{"session 1"}},
	}
	for _, c := range cases {
		err := readOne(resealed(base, c.mutate), c.limits)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
			continue
		}
		for _, w := range c.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
}

func TestChecksumRejections(t *testing.T) {
	base := validFrame(t)
	if err := readOne(base, nil); err != nil {
		t.Fatalf("valid frame: %v", err)
	}
	for _, off := range []int{offRequest, offStart, offSession + 7, offCRC, offCRC + 3, HeaderSize, len(base) - 1} {
		b := slices.Clone(base)
		b[off] ^= 0x01
		if off == offStart { // keep positions in range: flip a low bit, still valid
			b[off] ^= 0x03
		}
		if err := readOne(b, nil); !errors.Is(err, ErrChecksum) {
			t.Errorf("byte %d flipped: %v, want ErrChecksum", off, err)
		}
	}
}

func TestTruncationAndStickiness(t *testing.T) {
	base := validFrame(t)
	for n := 1; n < len(base); n++ {
		if err := readOne(base[:n], nil); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("truncated to %d bytes: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
	// After a bad frame, a good one that follows is not read: the stream is
	// out of step and the error sticks.
	bad := resealed(base, func(h []byte) { h[offKind] = 99 })
	fr := NewFramer(nil, bytes.NewReader(append(bad, base...)))
	_, err1 := fr.ReadFrame()
	_, err2 := fr.ReadFrame()
	if err1 == nil || err2 != err1 {
		t.Fatalf("first %v, second %v: want the same error twice", err1, err2)
	}
}

// countingReader reports how many bytes were consumed.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func allocatedDuring(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// A header declaring ~4 GiB followed by a short stream fails at once, before
// reading or allocating any payload.
func TestDeclaredSizeNotAllocated(t *testing.T) {
	hdr := resealed(validFrame(t), func(h []byte) {
		h[offKind], h[offFlags], h[offEncoding] = byte(KindPrefill), byte(FlagTokenIDs), 0
		le.PutUint32(h[offWidth:], 0)
		le.PutUint32(h[offTokens:], 1<<30-1)
		le.PutUint32(h[offLength:], 4*(1<<30-1)) // 4 GiB - 4
	})[:HeaderSize]
	stream := append(slices.Clone(hdr), make([]byte, 100-HeaderSize)...)

	// Default limits: rejected from the header alone.
	cr := &countingReader{r: bytes.NewReader(stream)}
	var err error
	alloc := allocatedDuring(func() { _, err = NewFramer(nil, cr).ReadFrame() })
	if !errors.Is(err, ErrLimit) || cr.n != HeaderSize {
		t.Fatalf("default limits: err %v after %d bytes, want ErrLimit after %d", err, cr.n, HeaderSize)
	}
	// 64 KiB is far below the declared 4 GiB and above the few small
	// allocations (framer, error strings) this path makes.
	if alloc > 64<<10 {
		t.Fatalf("default limits: allocated %d bytes", alloc)
	}

	// Limits raised to the maximum: the header is acceptable, and the stream
	// ends after 48 payload bytes. The buffer grows only as bytes arrive.
	fr := NewFramer(nil, bytes.NewReader(stream))
	if err := fr.SetLimits(Limits{MaxPayload: math.MaxUint32, MaxTokens: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	alloc = allocatedDuring(func() { _, err = fr.ReadFrame() })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("raised limits: %v, want io.ErrUnexpectedEOF", err)
	}
	// One growth step (64 KiB) plus small change.
	if alloc > 128<<10 {
		t.Fatalf("raised limits: allocated %d bytes for a 48-byte payload", alloc)
	}
}

func TestSetLimitsValidates(t *testing.T) {
	fr := NewFramer(nil, nil)
	for _, l := range []Limits{{MaxPayload: -1}, {MaxTokens: math.MaxUint32 + 1}} {
		if err := fr.SetLimits(l); err == nil {
			t.Errorf("SetLimits(%+v) accepted", l)
		}
	}
	if err := fr.SetLimits(Limits{MaxTokens: 5}); err != nil || fr.Limits().MaxTokens != 5 || fr.Limits().MaxPayload != 64<<20 {
		t.Fatalf("SetLimits: %v, %+v", err, fr.Limits())
	}
}

func TestWriterAppliesReaderRules(t *testing.T) {
	var buf bytes.Buffer
	fr := NewFramer(&buf, nil)
	m := Meta{Session: 1}
	x := make([]float32, 8)
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"decode with 2 tokens", fr.WriteActivations(KindDecode, 0, m, F32, x, 2, 4), ErrMalformed},
		{"session 0", fr.WriteActivations(KindPrefill, 0, Meta{}, F32, x, 2, 4), ErrMalformed},
		{"width over limit", fr.WriteActivations(KindPrefill, 0, m, F32, make([]float32, 1<<16+1), 1, 1<<16+1), ErrLimit},
		{"flag on decode", fr.WriteActivations(KindDecode, FlagAllLogits, m, F32, x[:4], 1, 4), ErrMalformed},
		{"NaN", fr.WriteActivations(KindDecode, 0, m, F32, []float32{1, float32(math.NaN()), 0, 0}, 1, 4), ErrNonFinite},
		{"no ids", fr.WriteTokenIDs(KindPrefill, 0, m, nil), ErrMalformed},
		{"reset session 0", fr.WriteReset(Meta{}), ErrMalformed},
		{"error code 0", fr.WriteError(m, 0, "x"), ErrMalformed},
		{"hello kind", fr.WriteHello(KindReset, &Hello{}), ErrMalformed},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if buf.Len() != 0 {
		t.Fatalf("rejected writes wrote %d bytes", buf.Len())
	}
	// Too long a message is truncated on a rune boundary, not refused.
	long := strings.Repeat("é", MaxErrorMessage)
	if err := fr.WriteError(m, CodeInternal, long); err != nil {
		t.Fatal(err)
	}
	f, err := NewFramer(nil, &buf).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	re, err := f.RemoteError()
	if err != nil || len(re.Message) != MaxErrorMessage || re.Message != long[:MaxErrorMessage] {
		t.Fatalf("truncated message: %d bytes, %v", len(re.Message), err)
	}
}

// failWriter fails every write after the first n bytes.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, io.ErrClosedPipe
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteErrorIsSticky(t *testing.T) {
	fr := NewFramer(&failWriter{n: 10}, nil)
	err1 := fr.WriteClose(Meta{Session: 1})
	err2 := fr.WriteClose(Meta{Session: 1})
	if !errors.Is(err1, io.ErrClosedPipe) || err2 != err1 {
		t.Fatalf("write errors %v then %v", err1, err2)
	}
}

func TestErrorPayloadDecode(t *testing.T) {
	cases := []struct {
		src  []byte
		want error
	}{
		{[]byte{1, 0, 2, 0, 'h', 'i'}, nil},
		{[]byte{1, 0, 2, 0, 'h'}, ErrMalformed},
		{[]byte{1, 0, 1, 0, 'h', 'i'}, ErrMalformed},
		{[]byte{0, 0, 0, 0}, ErrMalformed},
		{[]byte{11, 0, 0, 0}, ErrMalformed},
		{[]byte{1, 0, 1, 0, 0xff}, ErrMalformed},
		{[]byte{1, 0}, ErrMalformed},
		{append([]byte{1, 0, 0x01, 0x04}, make([]byte, 1025)...), ErrLimit},
	}
	for _, c := range cases {
		p, err := DecodeErrorPayload(c.src)
		if c.want == nil {
			if err != nil || p.Code != CodeMalformed || p.Message != "hi" {
				t.Errorf("% x: %+v, %v", c.src, p, err)
			}
		} else if !errors.Is(err, c.want) {
			t.Errorf("% x: %v, want %v", c.src, err, c.want)
		}
	}
}

func TestCodeOf(t *testing.T) {
	wrapped := func(e error) error { return errors.Join(errors.New("context"), e) }
	cases := map[error]ErrorCode{
		wrapped(ErrChecksum): CodeChecksum, wrapped(ErrLimit): CodeLimit, wrapped(ErrNonFinite): CodeNonFinite,
		wrapped(ErrEncoding): CodeEncoding, wrapped(ErrMalformed): CodeMalformed, wrapped(ErrHandshake): CodeHandshake,
		wrapped(ErrSession): CodeSession, &RemoteError{Code: CodeSession}: CodeSession, errors.New("other"): CodeInternal,
	}
	for err, want := range cases {
		if got := CodeOf(err); got != want {
			t.Errorf("CodeOf(%v) = %v, want %v", err, got, want)
		}
	}
}

// A steady-state exchange of frames reuses the framers' buffers.
func TestFramerSteadyStateDoesNotAllocate(t *testing.T) {
	var buf bytes.Buffer
	w, r := NewFramer(&buf, nil), NewFramer(nil, &buf)
	x := make([]float32, 4*256)
	y := make([]float32, 0, len(x))
	m := Meta{Session: 1}
	allocs := testing.AllocsPerRun(20, func() {
		if err := w.WriteActivations(KindPrefill, 0, m, Q8, x, 4, 256); err != nil {
			t.Fatal(err)
		}
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if y, err = f.Activations(y); err != nil {
			t.Fatal(err)
		}
		buf.Reset()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame", allocs)
	}
}

func TestPinnedGenerationAndNames(t *testing.T) {
	fr := NewFramer(nil, bytes.NewReader(validFrame(t)))
	fr.Pin(Agreement{Generation: 2, Encoding: EncodingQ8, Width: 4, Vocab: 10})
	if _, err := fr.ReadFrame(); !errors.Is(err, ErrGeneration) || !strings.Contains(err.Error(), "generation 1, agreed 2") {
		t.Errorf("pinned generation: %v", err)
	}
	if KindDecode.String() != "decode" || Kind(42).String() != "kind(42)" || CodeLimit.String() != "limit" ||
		EncodingQ5.String() != "q5" || EncodingID(99).String() != "encoding(99)" {
		t.Error("names")
	}
	re := &RemoteError{Code: CodeSession, Message: "no session 4", Session: 4, Request: 1}
	if re.Error() != "peer error session (session 4, request 1): no session 4" {
		t.Errorf("remote error text %q", re.Error())
	}
	if got := TruncateMessage("a\xffb"); got != "a\uFFFDb" {
		t.Errorf("TruncateMessage of invalid UTF-8: %q", got)
	}
}
