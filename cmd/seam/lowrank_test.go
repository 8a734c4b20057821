package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
	"github.com/zeebo/blake3"
)

// captureAt returns the hidden states entering layer boundary for the text.
func captureAt(t *testing.T, m *loader.Model, boundary int, text string) ([]float32, int) {
	t.Helper()
	mod, err := model.New(m.Weights)
	if err != nil {
		t.Fatal(err)
	}
	seqs := eval.TokensFromText(m.Tokenizer, text, m.Weights.Config.SeqLen)
	rows, n, err := eval.Capture(mod, seqs, boundary, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rows, n
}

func fitAt(t *testing.T, m *loader.Model, boundary int, text string, budget int) *codec.Codec {
	t.Helper()
	id, _ := m.Identity()
	rows, n := captureAt(t, m, boundary, text)
	c, err := codec.Fit(rows, n, m.Weights.Config.Dim, codec.FitOptions{Bytes: budget, Holdout: 0.1,
		Provenance: codec.Provenance{Model: id, Boundary: uint32(boundary)}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// --wire lowrank carries each boundary's own codec, through in-process and
// separate-process stages, and the text it produces stays close to f32's;
// stages holding different codecs for a shared boundary are refused.
func TestLowRankWire(t *testing.T) {
	ctr := importStories(t)
	ref, _ := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	m, err := loader.Open(ctr, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	calib := strings.Repeat(string(ref), 2)
	for _, b := range []int{2, 3} {
		c := fitAt(t, m, b, calib, 40)
		file := c.Marshal() // the container checks the file by its own BLAKE3 checksum
		if err := container.AddCodec(ctr, b, file, blake3.Sum256(file)); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()

	// In process, 3 stages: boundaries 1 and 3 — boundary 1 has no codec.
	_, err = seam(t, "run", "--model", ctr, "--split", "3", "--wire", "lowrank", "-n", "20", "--temperature", "0", "Once upon a time")
	if err == nil || !strings.Contains(err.Error(), "no codec is attached for the boundary at layer 1") {
		t.Fatalf("missing codec not reported: %v", err)
	}
	// Separate processes split at layers 2 and 3, both with codecs.
	text := lowrankThreeStages(t, ctr)
	t.Logf("lowrank text: %q", text)
	// Close to f32's: the f32 model's greedy text (the shared reference file)
	// and the lowrank one agree for their first 150 bytes, about 45 of the
	// 60 tokens. Measured: the whole 60-token text (175 bytes) agrees.
	same := agreeing(text, string(ref))
	if same < 150 {
		t.Fatalf("lowrank text leaves f32's after %d bytes (want at least 150):\n lowrank: %q\n     f32: %q", same, text, ref[:min(len(ref), len(text))])
	}

	// Different codecs at boundary 2 on the two sides: refused, naming both digests.
	m2, err := loader.Open(ctr, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	id, _ := m2.Identity()
	mine := fitAt(t, m2, 2, calib, 40)
	other := fitAt(t, m2, 2, "Tom had a big dog. The dog liked to run and jump in the sun. "+string(ref[:300]), 40)
	if mine.Digest() == other.Digest() {
		t.Fatal("codecs fitted on different data have the same digest")
	}
	ranges := [][2]int{{0, 2}, {2, 5}}
	up, err := stage.StartLocal(m2.Weights, ranges[:1], stage.Config{Identity: id, Timeout: 5 * time.Second}, map[int]*codec.Codec{2: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	down, err := stage.StartLocal(m2.Weights, ranges[1:], stage.Config{Identity: id, Timeout: 5 * time.Second}, map[int]*codec.Codec{2: other})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	_, err = pipeline.Dial(context.Background(), []string{up.Addrs[0], down.Addrs[0]}, pipeline.Options{
		Identity: id, Config: m2.Weights.Config, Encoding: wire.EncodingLowRank,
		Codecs: codec.Digests(map[int]*codec.Codec{2: mine}), Timeout: 5 * time.Second})
	if err == nil {
		t.Fatal("stages with different codecs for boundary 2 connected")
	}
	for _, d := range []wire.Digest{mine.Digest(), other.Digest()} {
		if !strings.Contains(err.Error(), d.String()) {
			t.Errorf("refusal does not name digest %s: %v", d, err)
		}
	}
}

// Teacher-forced, the lowrank wire at 40 bytes/token keeps the model's
// predictions: KL from the whole model stays small.
func TestLowRankQuality(t *testing.T) {
	ctr := importStories(t)
	ref, _ := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	m, err := loader.Open(ctr, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := fitAt(t, m, 2, string(ref), 40)
	id, _ := m.Identity()
	local, err := stage.StartLocal(m.Weights, [][2]int{{0, 2}, {2, 5}}, stage.Config{Identity: id, Timeout: 5 * time.Second}, map[int]*codec.Codec{2: c})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	chain, err := pipeline.Dial(context.Background(), local.Addrs, pipeline.Options{Identity: id, Config: m.Weights.Config,
		Encoding: wire.EncodingLowRank, Codecs: codec.Digests(map[int]*codec.Codec{2: c}), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	s, _ := chain.NewSession(context.Background())
	tokens := m.Tokenizer.Encode("Tom and his dog went to the park. They played with a ball and ran in the grass.", true, false)
	got, err := s.Forward(context.Background(), tokens, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	mod, _ := model.New(m.Weights)
	whole, _ := generate.NewLocal(mod)
	want, _ := whole.Forward(context.Background(), tokens, 0, true)
	var kl float64
	for p := range want {
		kl += generate.KL(want[p], got[p])
	}
	kl /= float64(len(want))
	t.Logf("lowrank (%d bytes/token) mean KL over %d positions: %.4f nats", c.PayloadBytes(), len(want), kl)
	// docs/codec-quality.md measures 40-byte codecs at 0.004-0.006 nats on
	// held-out text; this fit uses far less calibration data, so allow 20x.
	if kl <= 0 || kl > 0.1 {
		t.Fatalf("mean KL %.4f outside (0, 0.1]", kl)
	}
}

// --wire lowrank with entropy-coded codecs, through separate-process
// stages: frames of varying length cross two boundaries, and the greedy
// text stays with f32's.
func TestLowRankEntropyWire(t *testing.T) {
	ctr := importStories(t)
	ref, _ := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	m, err := loader.Open(ctr, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := m.Identity()
	calib := strings.Repeat(string(ref), 2)
	for _, b := range []int{2, 3} {
		rows, n := captureAt(t, m, b, calib)
		c, err := codec.Fit(rows, n, m.Weights.Config.Dim, codec.FitOptions{Bytes: 40, Holdout: 0.1, Entropy: true,
			Provenance: codec.Provenance{Model: id, Boundary: uint32(b)}})
		if err != nil {
			t.Fatal(err)
		}
		if !c.Variable() {
			t.Fatal("an entropy fit gave a codec with fixed bits")
		}
		file := c.Marshal()
		if err := container.AddCodec(ctr, b, file, blake3.Sum256(file)); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	text := lowrankThreeStages(t, ctr)
	same := agreeing(text, string(ref))
	t.Logf("entropy-coded lowrank text agrees with f32's for %d of its %d bytes: %q", same, len(text), text)
	// Measured: 174 of the 175 bytes agree (the last token differs); 150
	// leaves room for a near-tie late in the text, not for a broken codec.
	if same < 150 {
		t.Fatalf("lowrank text leaves f32's after %d bytes:\n lowrank: %q\n     f32: %q", same, text, ref[:min(len(ref), len(text))])
	}
}

// lowrankThreeStages runs 60 greedy tokens through three separate-process
// stages split at layers 2 and 3 with --wire lowrank, and returns the text.
func lowrankThreeStages(t *testing.T, ctr string) string {
	t.Helper()
	a1, _ := startStage(t, ctr, 0, 2)
	a2, _ := startStage(t, ctr, 2, 3)
	a3, _ := startStage(t, ctr, 3, 5)
	text, err := seam(t, append([]string{"run", "--model", ctr, "--stages", a1 + "," + a2 + "," + a3, "--wire", "lowrank", "-n", "60", "--temperature", "0", "Once upon a time"}, keyFlags(t)...)...)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// agreeing is the length of the common prefix of a and b.
func agreeing(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
