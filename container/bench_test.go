package container

import (
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

// benchConfig is a mid-sized model (about 60 MiB of f16 weights): large
// enough that mapping cost, not just index parsing, shows.
func benchConfig() model.Config {
	return model.Config{Dim: 512, HiddenDim: 1376, NLayers: 8, NHeads: 8, NKVHeads: 8, VocabSize: 8000,
		SeqLen: 256, RopeTheta: 10000, RopeDim: 64, NormEps: 1e-5, TiedOutput: false}
}

// buildStreamed imports a model of cfg whose bytes come from a generator:
// norms f32, everything else f16, plus a vocabulary.
func buildStreamed(tb testing.TB, dir string, cfg model.Config) {
	tb.Helper()
	b, err := Create(dir, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	add := func(seg string, roles []string) {
		if err := b.BeginSegment(seg); err != nil {
			tb.Fatal(err)
		}
		for _, role := range roles {
			rows, cols, mustF32, err := roleShape(role, &cfg)
			if err != nil {
				tb.Fatal(err)
			}
			dt, size := tensor.F16, 2
			if mustF32 {
				dt, size = tensor.F32, 4
			}
			r := io.LimitReader(rngReader{rng}, int64(rows*cols*size))
			if err := b.AddRegion(RegionSpec{Name: seg + "." + role, Role: role, DType: dt, Rows: rows, Cols: cols}, r); err != nil {
				tb.Fatal(err)
			}
		}
		if err := b.EndSegment(); err != nil {
			tb.Fatal(err)
		}
	}
	add(EmbedSegment, []string{RoleEmbedding})
	for i := 0; i < cfg.NLayers; i++ {
		add(LayerSegment(i), model.LayerRoles)
	}
	add(HeadSegment, []string{RoleFinalNorm, RoleOutput})
	v := tokenizer.Vocab{BOS: 1, EOS: 2}
	for i := 0; i < cfg.VocabSize; i++ {
		v.Pieces = append(v.Pieces, fmt.Sprintf("p%d", i))
		v.Scores = append(v.Scores, float32(i))
	}
	if err := b.SetTokenizer(v); err != nil {
		tb.Fatal(err)
	}
	if err := b.Finish(); err != nil {
		tb.Fatal(err)
	}
}

type rngReader struct{ r *rand.Rand }

func (g rngReader) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return len(b), nil
}

// BenchmarkOpenRange measures what a stage does at start-up: read and
// validate the index, map its segments, check sizes and headers, build the
// weight views and validate them.
func BenchmarkOpenRange(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "m")
	cfg := benchConfig()
	buildStreamed(b, dir, cfg)
	for _, r := range [][2]int{{0, 3}, {3, 6}, {6, 8}, {0, 8}} {
		b.Run(fmt.Sprintf("layers=%d-%d", r[0], r[1]), func(b *testing.B) {
			for b.Loop() {
				rg, err := OpenRange(dir, r[0], r[1])
				if err != nil {
					b.Fatal(err)
				}
				rg.Close()
			}
		})
	}
}

// BenchmarkVerify measures hashing throughput over a whole container.
func BenchmarkVerify(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "m")
	buildStreamed(b, dir, benchConfig())
	c, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(c.WeightBytes())
	for b.Loop() {
		if _, err := Verify(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkImport measures streaming import throughput (including fsyncs).
func BenchmarkImport(b *testing.B) {
	cfg := benchConfig()
	cfg.NLayers = 2
	root := b.TempDir()
	i := 0
	for b.Loop() {
		buildStreamed(b, filepath.Join(root, fmt.Sprint(i)), cfg)
		i++
	}
}

// BenchmarkOpenRangeDeep opens a 10-layer range of an 80-layer model (small
// tensors): the index of a deep model is what dominates here.
func BenchmarkOpenRangeDeep(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "m")
	build(b, newFixtureLayers(false, 1, 80), dir)
	for b.Loop() {
		rg, err := OpenRange(dir, 40, 50)
		if err != nil {
			b.Fatal(err)
		}
		rg.Close()
	}
}
