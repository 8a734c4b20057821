package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/importer"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/wire"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"2GiB": 2147483648, "1.5GiB": 1610612736, "500MiB": 524288000, "64KiB": 65536,
		"3GB": 3000000000, "2 MB": 2000000, "1000": 1000, "17B": 17, "1TiB": 1099511627776,
	} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1GiB", "0", "0.5", "2XB", "NaN", "Inf", "1e30GiB"} {
		if got, err := ParseByteSize(bad); err == nil {
			t.Errorf("ParseByteSize(%q) = %d, want an error", bad, got)
		}
	}
}

// parseByteSize never panics, and what it accepts is a positive size.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"2GiB", "1.5GB", "0x10MiB", "1e3KB", "-0B", " 7 ", "NaN", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseByteSize(s); err == nil && n < 1 {
			t.Fatalf("ParseByteSize(%q) = %d", s, n)
		}
	})
}

func tinyGGUF(t *testing.T) string {
	t.Helper()
	cfg := model.Config{Dim: 64, HiddenDim: 96, NLayers: 3, NHeads: 4, NKVHeads: 2, VocabSize: 300, SeqLen: 64,
		RopeTheta: 10000, RopeDim: 16, NormEps: 1e-5}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	res, err := MakeGGUF(path, cfg, synth.GGUFOptions{Matrices: tensor.Q8_0, Embedding: tensor.F16, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Size < res.TensorBytes || res.Tensors != 3*9+3 {
		t.Fatalf("%+v", res)
	}
	return path
}

// Split measures every link and encoding, in the order given, with
// positive rates; a budget beyond the context is refused.
func TestSplit(t *testing.T) {
	m, err := loader.Open(tinyGGUF(t), loader.Options{NoTokenizer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var logs bytes.Buffer
	var calls [][2]int
	o := SplitOptions{Stages: 3, Encodings: []wire.EncodingID{wire.EncodingF32, wire.EncodingQ8}, Links: []Link{{1000, 0}, {100, 1}},
		PromptTokens: 8, DecodeTokens: 4, Rounds: 1, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Progress: func(done, total int) { calls = append(calls, [2]int{done, total}) }}
	rows, err := Split(context.Background(), m, o)
	if err != nil {
		t.Fatal(err)
	}
	// 2 links x 2 encodings x 2 rounds (the warm-up included): the progress
	// is told after each run, and each run is one Info line.
	const runs = 8
	if len(calls) != runs {
		t.Errorf("Progress called %d times, want %d: %v", len(calls), runs, calls)
	}
	for i, c := range calls {
		if c != [2]int{i + 1, runs} {
			t.Errorf("Progress call %d: (done, total) = %v, want (%d, %d)", i, c, i+1, runs)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	warmups := 0
	for _, line := range lines {
		var rec struct {
			Msg, Level, Stage, Wire, Link string
			Session                       *int
			Warmup                        bool
			Decode                        float64 `json:"decode_tok_s"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Msg != "bench split" || rec.Level != "INFO" || rec.Stage != "bench" || rec.Session == nil || rec.Wire == "" || rec.Link == "" || !(rec.Decode > 0) {
			t.Errorf("log line %s", line)
		}
		if rec.Warmup {
			warmups++
		}
	}
	if len(lines) != runs || warmups != runs/2 {
		t.Errorf("%d log lines (%d warm-ups), want %d (%d):\n%s", len(lines), warmups, runs, runs/2, logs.String())
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, r := range rows {
		if r.Link != o.Links[i/2] || r.Encoding != o.Encodings[i%2] || !(r.PrefillTokS > 0) || !(r.DecodeTokS > 0) || r.FrameBytes <= wire.HeaderSize {
			t.Errorf("row %d: %+v", i, r)
		}
	}
	if rows[0].FrameBytes != wire.HeaderSize+64*4 {
		t.Errorf("f32 frame of a 64-wide model: %d bytes", rows[0].FrameBytes)
	}
	o.PromptTokens = 60
	if _, err := Split(context.Background(), m, o); err == nil {
		t.Error("prompt and decode beyond the context accepted")
	}
}

// OpenRange maps exactly the range's files.
func TestOpenRange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	if err := importer.Import(tinyGGUF(t), dir, importer.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{0, 1}, {1, 2}, {2, 3}} {
		res, err := OpenRange(dir, r[0], r[1], 3)
		if err != nil {
			t.Fatal(err)
		}
		var out testWriter
		if err := res.Report(&out, time.Minute); err != nil {
			t.Fatalf("[%d,%d): %v", r[0], r[1], err)
		}
		if len(res.Want) == 0 || len(res.Opens) != 3 {
			t.Errorf("%+v", res)
		}
	}
}

type testWriter struct{ n int }

func (w *testWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
