package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestRouteRoundTripAndAck(t *testing.T) {
	var buf bytes.Buffer
	w := NewFramer(&buf, nil)
	r := Route{Addr: "127.0.0.1:9001", Peer: LayerRange{2, 5}, Encoding: EncodingQ8}
	if err := w.WriteRoute(Meta{Request: 7}, &r); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRouteAck(Meta{Request: 7}); err != nil {
		t.Fatal(err)
	}
	rd := NewFramer(nil, &buf)
	f, err := rd.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Route()
	if err != nil || got != r || f.Request != 7 {
		t.Fatalf("route %+v (request %d), %v; want %+v", got, f.Request, err, r)
	}
	// Payload bytes by hand: start 2, end 5, q8, codec 0, length 14, address.
	want := append([]byte{2, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 0, 14, 0}, "127.0.0.1:9001"...)
	if !bytes.Equal(f.Payload, want) {
		t.Fatalf("payload % x, want % x", f.Payload, want)
	}
	f, err = rd.ReadFrame()
	if err != nil || f.Kind != KindRoute || len(f.Payload) != 0 {
		t.Fatalf("ack: %+v, %v", f, err)
	}
	if _, err := f.Route(); err == nil {
		t.Fatal("an ack decoded as a route")
	}
}

func TestRouteRejections(t *testing.T) {
	good := append([]byte{2, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0, 3, 0}, "a:1"...)
	cases := map[string][]byte{
		"short":                 good[:10],
		"length too long":       append(append([]byte{}, good[:13]...), 9, 0, 'a', ':', '1'),
		"empty address":         append(append([]byte{}, good[:13]...), 0, 0),
		"empty range":           append([]byte{5, 0, 0, 0, 5, 0, 0, 0}, good[8:]...),
		"no encoding":           append(append(append([]byte{}, good[:8]...), 0), good[9:]...),
		"codec without lowrank": append(append(append([]byte{}, good[:9]...), 1, 0, 0, 0), good[13:]...),
		"bad utf8":              append(append([]byte{}, good[:15]...), 0xff, ':', '1'),
	}
	for name, b := range cases {
		if _, err := DecodeRoute(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want malformed", name, err)
		}
	}
	if _, err := DecodeRoute(good); err != nil {
		t.Fatalf("good route refused: %v", err)
	}
}

// A head holds no layers: its Hello skips the layer boundary checks, but
// every other field (model, width, vocab, generation) is still compared.
func TestHeadHello(t *testing.T) {
	_, down := helloPair()
	head := testHello()
	head.Layers, head.PeerLayers = LayerRange{}, LayerRange{}
	if _, err := CheckHello(&down, &head); err != nil {
		t.Fatalf("head refused: %v", err)
	}
	head.Model = Digest{0xee}
	_, err := CheckHello(&down, &head)
	if err == nil || !strings.Contains(err.Error(), "model digest") {
		t.Fatalf("head with another model: %v", err)
	}
}

func FuzzRoute(f *testing.F) {
	f.Add(append([]byte{2, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0, 3, 0}, "a:1"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRoute(b)
		if err != nil {
			return
		}
		out, err := AppendRoute(nil, &r)
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("accepted route does not re-encode to its bytes: %v", err)
		}
	})
}
