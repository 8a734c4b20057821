package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestPoolPayloadsRoundTrip(t *testing.T) {
	d := Description{Free: 8 << 30, DecodeNanos: 3_100_000, PrefillNanos: 500_000, HeadNanos: 9_000_000}
	b, err := AppendDescription(nil, &d)
	if err != nil || len(b) != DescriptionSize {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	// Byte layout as docs/wire.md gives it: little-endian u64s in order.
	if want := []byte{0, 0, 0, 0, 2, 0, 0, 0}; !bytes.Equal(b[:8], want) {
		t.Fatalf("free encodes as % x, want % x", b[:8], want)
	}
	if got, err := DecodeDescription(b); err != nil || got != d {
		t.Fatalf("description: %+v, %v", got, err)
	}
	a := Assignment{Layers: LayerRange{Start: 3, End: 9}, MaxSessions: 4}
	b, err = AppendAssignment(nil, &a)
	if err != nil || !bytes.Equal(b, []byte{3, 0, 0, 0, 9, 0, 0, 0, 4, 0, 0, 0}) {
		t.Fatalf("assignment % x, %v", b, err)
	}
	if got, err := DecodeAssignment(b); err != nil || got != a {
		t.Fatalf("assignment: %+v, %v", got, err)
	}
	r := LinkReport{RTTNanos: 30_000_000, BitsPerSecond: 20e6}
	b, err = AppendLinkReport(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeLinkReport(b); err != nil || got != r {
		t.Fatalf("link report: %+v, %v", got, err)
	}
	b, err = AppendMeasure(nil, "198.19.0.3:7070")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeMeasure(b); err != nil || got != "198.19.0.3:7070" {
		t.Fatalf("measure: %q, %v", got, err)
	}
}

func TestPoolPayloadsRefuseNonsense(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"zero free", func() error { _, err := DecodeDescription(make([]byte, DescriptionSize)); return err }()},
		{"short description", func() error { _, err := DecodeDescription(make([]byte, 31)); return err }()},
		{"hour-long decode", func() error {
			_, err := AppendDescription(nil, &Description{Free: 1, DecodeNanos: 3600e9, PrefillNanos: 1, HeadNanos: 1})
			return err
		}()},
		{"empty range", func() error { _, err := DecodeAssignment([]byte{5, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0}); return err }()},
		{"no sessions", func() error { _, err := DecodeAssignment([]byte{0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0}); return err }()},
		{"zero bandwidth", func() error {
			_, err := DecodeLinkReport(append(make([]byte, 8), 1, 0, 0, 0, 0, 0, 0, 0)[:16])
			return err
		}()},
		{"length mismatch", func() error { _, err := DecodeMeasure([]byte{5, 0, 'a'}); return err }()},
		{"bad utf-8", func() error { _, err := DecodeMeasure([]byte{1, 0, 0xff}); return err }()},
	} {
		if !errors.Is(c.err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", c.name, c.err)
		}
	}
}

func FuzzPoolPayloads(f *testing.F) {
	f.Add(make([]byte, 32))
	f.Add([]byte{3, 0, 0, 0, 9, 0, 0, 0, 4, 0, 0, 0})
	f.Add([]byte{4, 0, 'a', ':', '1', '2'})
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := DecodeDescription(b); err == nil {
			if out, err := AppendDescription(nil, &d); err != nil || !bytes.Equal(out, b) {
				t.Fatalf("description does not re-encode: % x", b)
			}
		}
		if a, err := DecodeAssignment(b); err == nil {
			if out, err := AppendAssignment(nil, &a); err != nil || !bytes.Equal(out, b) {
				t.Fatalf("assignment does not re-encode: % x", b)
			}
		}
		if r, err := DecodeLinkReport(b); err == nil {
			if out, err := AppendLinkReport(nil, &r); err != nil || !bytes.Equal(out, b) {
				t.Fatalf("link report does not re-encode: % x", b)
			}
		}
		if addr, err := DecodeMeasure(b); err == nil {
			if out, err := AppendMeasure(nil, addr); err != nil || !bytes.Equal(out, b) {
				t.Fatalf("measure does not re-encode: % x", b)
			}
		}
	})
}

func TestPoolFrames(t *testing.T) {
	var buf bytes.Buffer
	w := NewFramer(&buf, nil)
	if err := w.WriteDescribe(1, nil); err == nil {
		t.Fatal("a pool frame was written before a generation-3 agreement")
	}
	buf.Reset()
	a := Agreement{Generation: PoolGeneration, Encoding: EncodingF32, Width: 8, Vocab: 8}
	w = NewFramer(&buf, nil)
	w.Pin(a)
	r := NewFramer(nil, &buf)
	r.Pin(a)
	d := Description{Free: 1 << 30, DecodeNanos: 1e6, PrefillNanos: 2e5, HeadNanos: 3e6}
	as := Assignment{Layers: LayerRange{Start: 2, End: 5}, MaxSessions: 4}
	lr := LinkReport{RTTNanos: 3e7, BitsPerSecond: 2e7}
	for _, write := range []func() error{
		func() error { return w.WriteDescribe(1, nil) },
		func() error { return w.WriteDescribe(1, &d) },
		func() error { return w.WriteProbe(2, 100000) },
		func() error { return w.WriteProbe(2, 0) },
		func() error { return w.WriteMeasure(3, "198.19.0.4:7070") },
		func() error { return w.WriteLinkReport(3, &lr) },
		func() error { return w.WriteAssign(4, &as) },
	} {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	read := func(k Kind, n int) *Frame {
		f, err := r.ReadFrame()
		if err != nil || f.Kind != k || len(f.Payload) != n {
			t.Fatalf("read %v (%d bytes): %v %d, %v", k, n, f.Kind, len(f.Payload), err)
		}
		return f
	}
	read(KindDescribe, 0)
	if got, err := read(KindDescribe, DescriptionSize).Description(); err != nil || got != d {
		t.Fatalf("description %+v %v", got, err)
	}
	read(KindProbe, 100000)
	read(KindProbe, 0)
	if got, err := read(KindMeasure, 17).MeasureAddr(); err != nil || got != "198.19.0.4:7070" {
		t.Fatalf("measure %q %v", got, err)
	}
	if got, err := read(KindMeasure, LinkReportSize).LinkReport(); err != nil || got != lr {
		t.Fatalf("link report %+v %v", got, err)
	}
	if got, err := read(KindAssign, AssignmentSize).Assignment(); err != nil || got != as {
		t.Fatalf("assignment %+v %v", got, err)
	}
	if err := w.WriteProbe(5, MaxProbeBytes+1); !errors.Is(err, ErrLimit) {
		t.Fatalf("oversized probe: %v", err)
	}
}
