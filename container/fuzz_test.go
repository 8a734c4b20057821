package container

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/seamlm/seam/tokenizer"
)

// FuzzParseIndex feeds the index parser three ways: the input as a whole
// index.json (envelope and digest checks); the input as a body wrapped in a
// correct envelope; and the input as a list of edits applied to the body of
// a real index, re-wrapped with a fresh digest, so that small inputs reach
// the structural checks. (Go's minimiser is quadratic in input length, so
// whole multi-kilobyte indexes as seeds would stall the fuzzer.)
func FuzzParseIndex(f *testing.F) {
	var bodies [][]byte
	for _, tied := range []bool{true, false} {
		dir := filepath.Join(f.TempDir(), fmt.Sprint(tied))
		build(f, newFixtureLayers(tied, 21, 1), dir)
		data, err := os.ReadFile(filepath.Join(dir, IndexFile))
		if err != nil {
			f.Fatal(err)
		}
		start := len(testEnvelopePrefix) + 64 + len(`","index":`)
		bodies = append(bodies, data[start:len(data)-2])
	}
	f.Add(byte(2), []byte{})                              // a valid index
	f.Add(byte(2), []byte{0, 0, 200, '9', 1, 1, 44, ' '}) // a digit changed, a space inserted
	f.Add(byte(3), []byte{2, 3, 0, 0})                    // a byte deleted
	f.Add(byte(0), []byte(`{"generation":1,"index_blake3":"`))
	f.Add(byte(0), []byte(`{"generation":2,"index_blake3":"00","index":{}}`+"\n"))
	f.Add(byte(1), []byte(`{"import_id":"00","segments":[{"regions":[{}]}]}`))
	f.Fuzz(func(t *testing.T, mode byte, in []byte) {
		var data []byte
		switch mode % 4 {
		case 0:
			data = in
		case 1:
			data = wrapBody(in)
		default:
			data = wrapBody(applyEdits(bodies[mode%2], in))
		}
		l, err := parseIndex(data, "fuzz")
		if err != nil {
			return
		}
		checkAccepted(t, l)
	})
}

func wrapBody(body []byte) []byte {
	return fmt.Appendf(nil, "%s%x\",\"index\":%s}\n", testEnvelopePrefix, blake3.Sum256(body), body)
}

// applyEdits interprets in as 4-byte edits (kind, position hi, lo, value):
// kind%3 == 0 sets a byte, 1 inserts one, 2 deletes one.
func applyEdits(body, in []byte) []byte {
	b := bytes.Clone(body)
	for ; len(in) >= 4 && len(b) > 0; in = in[4:] {
		pos := (int(in[1])<<8 | int(in[2])) % len(b)
		switch in[0] % 3 {
		case 0:
			b[pos] = in[3]
		case 1:
			b = append(b[:pos], append([]byte{in[3]}, b[pos:]...)...)
		case 2:
			b = append(b[:pos], b[pos+1:]...)
		}
	}
	return b
}

// checkAccepted asserts the invariants readers rely on for an index the
// parser accepted.
func checkAccepted(t *testing.T, l *layout) {
	if len(l.segments) != l.cfg.NLayers+2 {
		t.Fatalf("accepted %d segments for %d layers", len(l.segments), l.cfg.NLayers)
	}
	if computeIdentity(&l.cfg, l.segments) != l.identity {
		t.Fatal("accepted an index whose identity does not match its regions")
	}
	for _, s := range l.segments {
		end := int64(SegmentHeaderLen)
		for _, r := range s.Regions {
			want, err := shapeBytes(r.DType, r.Rows, r.Cols)
			if err != nil || want != r.Length || r.Offset < end || r.Offset%int64(l.alignment) != 0 || r.Offset+r.Length > s.Size {
				t.Fatalf("accepted region %s/%s %s %dx%d at [%d, +%d) in %d bytes", s.Name, r.Name, r.DType, r.Rows, r.Cols, r.Offset, r.Length, s.Size)
			}
			end = r.Offset + r.Length
		}
	}
}

func FuzzParseTokenizer(f *testing.F) {
	for _, raw := range []bool{false, true} {
		data, err := encodeTokenizer(testVocab(48, raw))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, 48)
	}
	f.Add([]byte(`{"piece_encoding":"utf8","pieces":["a"],"scores":[0],"types":null,"bos":0,"eos":0}`), 1)
	if data, err := encodeTokenizerSpec(smallGGUFSpec()); err == nil {
		f.Add(data, 258)
	}
	f.Add([]byte(`{"version":2,"kind":"hf","hf":{"tokenizer":{"model":{"type":"BPE","vocab":{"a":0},"merges":[]}},"config":null}}`), 1)
	f.Add([]byte(`{"piece_encoding":"base64","pieces":["!!"],"scores":[0],"types":[9],"bos":5,"eos":0}`), 1)
	f.Fuzz(func(t *testing.T, data []byte, vocab int) {
		tok, err := parseTokenizer(data, vocab)
		if err != nil {
			return
		}
		if tok.VocabSize() != vocab {
			t.Fatalf("accepted %d pieces for vocab %d", tok.VocabSize(), vocab)
		}
		// What was accepted encodes and parses back to the same vocabulary.
		spec, err := tokenizer.SpecOf(tok)
		if err != nil {
			t.Fatal(err)
		}
		again, err := encodeTokenizerSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		tok2, err := parseTokenizer(again, vocab)
		if err != nil {
			t.Fatalf("re-encoded tokenizer refused: %v", err)
		}
		spec2, err := tokenizer.SpecOf(tok2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mustEncodeSpec(t, spec2), again) {
			t.Fatal("tokenizer round trip is not stable")
		}
	})
}

func FuzzCheckHeader(f *testing.F) {
	id := [16]byte{1, 2, 3}
	f.Add(encodeHeader(1, "layer-001", id), "layer-001")
	f.Add([]byte("SEAM-SEG"), "head")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		if checkHeader(data, 1, "fuzz", name, id) == nil {
			if !bytes.Equal(data[:SegmentHeaderLen], encodeHeader(1, name, id)) {
				t.Fatalf("accepted header %x for %q", data[:SegmentHeaderLen], name)
			}
		}
	})
}

func mustEncodeSpec(t *testing.T, s tokenizer.Spec) []byte {
	t.Helper()
	data, err := encodeTokenizerSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
