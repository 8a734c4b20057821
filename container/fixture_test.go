package container

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"github.com/zeebo/blake3"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

// fixture is a small synthetic model whose bytes the tests own, so that what
// a container returns is compared with what was put in, not with itself.
type fixture struct {
	cfg   model.Config
	segs  []fixtureSegment // embed, layer-000 ..., head
	vocab tokenizer.Vocab
}

type fixtureSegment struct {
	name    string
	tensors []fixtureTensor
}

type fixtureTensor struct {
	role string
	t    tensor.Tensor // t.Name is the region name
}

func testConfig(tied bool) model.Config {
	// dim 64 and hidden 160 are multiples of 32 (q8_0, q4_0 blocks); kv dim 32.
	return model.Config{Dim: 64, HiddenDim: 160, NLayers: 4, NHeads: 4, NKVHeads: 2, VocabSize: 48,
		SeqLen: 32, RopeTheta: 10000, RopeDim: 16, NormEps: 1e-5, TiedOutput: tied}
}

var matrixTypes = []tensor.DType{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q8G, tensor.BF16, tensor.Q4_0}

// groupFor picks q8g group sizes; 40 over 64-wide rows (w1, w3) and 48 over
// the 64-wide embedding make groups straddle rows.
func groupFor(role string) int {
	switch role {
	case "w1", "w3":
		return 40
	case "w2":
		return 128
	case RoleEmbedding, RoleOutput:
		return 48
	}
	return 256
}

func newFixture(tied bool, seed uint64) *fixture {
	return newFixtureLayers(tied, seed, testConfig(tied).NLayers)
}

func newFixtureLayers(tied bool, seed uint64, layers int) *fixture {
	cfg := testConfig(tied)
	cfg.NLayers = layers
	return newFixtureConfig(cfg, seed)
}

// extendedConfig uses every field generation 2 adds: Qwen 3's head size
// (32, so queries are 128 wide, not dim 64) and norms, Qwen 2's biases,
// NeoX RoPE, Llama 3's factors and linear scaling.
func extendedConfig() model.Config {
	c := testConfig(false)
	c.HeadSize, c.RopeNeox, c.RopeLinear, c.RopeFreqs, c.QKVBias, c.QKNorm = 32, true, 2, true, true, true
	return c
}

func newFixtureConfig(cfg model.Config, seed uint64) *fixture {
	tied := cfg.TiedOutput
	rng := rand.New(rand.NewPCG(seed, 99))
	fx := &fixture{cfg: cfg}
	kv, q := 32, 64 // written out from the configs above: 2 kv heads of 16 (or 32), 4 query heads
	roles := model.LayerRoles
	if cfg.Extended() {
		kv, q = 64, 128
		roles = append(append([]string(nil), roles...), "bq", "bk", "bv", "q_norm", "k_norm", "rope_freqs")
	}
	shapes := map[string][2]int{"attn_norm": {1, 64}, "wq": {q, 64}, "wk": {kv, 64}, "wv": {kv, 64}, "wo": {64, q},
		"ffn_norm": {1, 64}, "w1": {160, 64}, "w2": {64, 160}, "w3": {160, 64},
		"bq": {1, q}, "bk": {1, kv}, "bv": {1, kv}, "q_norm": {1, 32}, "k_norm": {1, 32}, "rope_freqs": {1, 8}}
	embType := tensor.F16
	if tied {
		embType = tensor.Q8G
	}
	fx.segs = append(fx.segs, fixtureSegment{name: "embed", tensors: []fixtureTensor{
		{RoleEmbedding, randomTensor(rng, "token_embd.weight", embType, 48, 64, groupFor(RoleEmbedding))}}})
	for i := 0; i < cfg.NLayers; i++ {
		seg := fixtureSegment{name: fmt.Sprintf("layer-%03d", i)}
		k := 0
		for _, role := range roles {
			dt := tensor.F32
			if shapes[role][0] > 1 {
				dt = matrixTypes[(3*i+k)%len(matrixTypes)]
				k++
			}
			sh := shapes[role]
			t := randomTensor(rng, fmt.Sprintf("blk.%d.%s", i, role), dt, sh[0], sh[1], groupFor(role))
			if role == "rope_freqs" {
				// Opening a range validates them: positive, equal in every layer.
				t.Data = tensor.BytesOfF32([]float32{1, 1, 1.5, 2, 4, 8, 8, 8})
			}
			seg.tensors = append(seg.tensors, fixtureTensor{role, t})
		}
		fx.segs = append(fx.segs, seg)
	}
	head := fixtureSegment{name: "head", tensors: []fixtureTensor{{RoleFinalNorm, randomTensor(rng, "output_norm.weight", tensor.F32, 1, 64, 0)}}}
	if !tied {
		head.tensors = append(head.tensors, fixtureTensor{RoleOutput, randomTensor(rng, "output.weight", tensor.Q8_0, 48, 64, 0)})
	}
	fx.segs = append(fx.segs, head)
	fx.vocab = testVocab(cfg.VocabSize, tied)
	return fx
}

// randomTensor fills a tensor's bytes (and q8g scales) with random bytes; the
// container never interprets them. Sizes are worked out here from the block
// geometry, independently of the package.
func randomTensor(rng *rand.Rand, name string, dt tensor.DType, rows, cols, group int) tensor.Tensor {
	var n int
	switch dt {
	case tensor.F32:
		n = rows * cols * 4
	case tensor.F16, tensor.BF16:
		n = rows * cols * 2
	case tensor.Q8_0:
		n = rows * cols / 32 * 34
	case tensor.Q4_0:
		n = rows * cols / 32 * 18
	case tensor.Q8G:
		n = rows * cols
	}
	t := tensor.Tensor{Name: name, Type: dt, Rows: rows, Cols: cols, Data: randomBytes(rng, n)}
	if dt == tensor.Q8G {
		t.GroupSize = group
		t.Scales = randomBytes(rng, rows*cols/group*4)
	}
	return t
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// testVocab is a llama2.c-style vocabulary: <unk>, <s>, </s>, then pieces.
// With raw set, one piece is not valid UTF-8 (stored as base64).
func testVocab(n int, raw bool) tokenizer.Vocab {
	v := tokenizer.Vocab{Pieces: []string{"<unk>", "<s>", "</s>"}, BOS: 1, EOS: 2}
	for len(v.Pieces) < n {
		v.Pieces = append(v.Pieces, fmt.Sprintf(" w%d", len(v.Pieces)))
	}
	if raw {
		v.Pieces[10] = "\xff\xfe<"
	}
	for i := range v.Pieces {
		v.Scores = append(v.Scores, float32(-i)/3)
	}
	return v
}

func (fx *fixture) tensor(seg, role string) *tensor.Tensor {
	for i := range fx.segs {
		if fx.segs[i].name == seg {
			for j := range fx.segs[i].tensors {
				if fx.segs[i].tensors[j].role == role {
					return &fx.segs[i].tensors[j].t
				}
			}
		}
	}
	return nil
}

// regionBytes is every region's expected content by (segment, region name).
func (fx *fixture) regionBytes() map[[2]string][]byte {
	m := map[[2]string][]byte{}
	for _, s := range fx.segs {
		for _, ft := range s.tensors {
			m[[2]string{s.name, ft.t.Name}] = ft.t.Data
			if ft.t.Type == tensor.Q8G {
				m[[2]string{s.name, ft.t.Name + ".scales"}] = ft.t.Scales
			}
		}
	}
	return m
}

func (fx *fixture) totalBytes() int64 {
	var n int64
	for _, b := range fx.regionBytes() {
		n += int64(len(b))
	}
	return n
}

// build imports fx into dir, varying how bytes arrive: whole readers,
// half reads, one-byte reads, and a segment written in reverse role order.
func build(t testing.TB, fx *fixture, dir string, opts ...Option) {
	t.Helper()
	b, err := Create(dir, fx.cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := addAll(b, fx, -1); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTokenizer(fx.vocab); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
}

// addAll writes fx's segments in order, stopping (without EndSegment) after
// stopAfter segments when stopAfter >= 0.
func addAll(b *Builder, fx *fixture, stopAfter int) error {
	for si, s := range fx.segs {
		if si == stopAfter {
			return nil
		}
		if err := b.BeginSegment(s.name); err != nil {
			return err
		}
		order := s.tensors
		if si == 3 {
			order = append([]fixtureTensor(nil), s.tensors...)
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for k, ft := range order {
			if err := addOne(b, ft, si+k); err != nil {
				return err
			}
		}
		if err := b.EndSegment(); err != nil {
			return err
		}
	}
	return nil
}

func addOne(b *Builder, ft fixtureTensor, variant int) error {
	spec := RegionSpec{Name: ft.t.Name, Role: ft.role, DType: ft.t.Type, Rows: ft.t.Rows, Cols: ft.t.Cols, GroupSize: ft.t.GroupSize}
	var r io.Reader = io.MultiReader(bytes.NewReader(ft.t.Data), bytes.NewReader(ft.t.Scales))
	switch variant % 3 {
	case 0:
		return b.AddTensor(ft.t.Name, ft.role, &ft.t)
	case 1:
		r = iotest.HalfReader(r)
	case 2:
		if len(ft.t.Data) < 8000 {
			r = iotest.OneByteReader(r)
		}
	}
	return b.AddRegion(spec, r)
}

// newContainer builds fx in a fresh directory and returns it.
func newContainer(t testing.TB, fx *fixture, opts ...Option) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	build(t, fx, dir, opts...)
	return dir
}

// The tests edit index.json with this helper, written from the spec rather
// than with the package's encoder: the body is everything between the fixed
// envelope prefix and the final "}\n"; the digest is BLAKE3 of the body.
const testEnvelopePrefix = `{"generation":1,"index_blake3":"`

func indexBody(t testing.TB, dir string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte(testEnvelopePrefix)) || !bytes.HasSuffix(data, []byte("}\n")) {
		t.Fatalf("index.json envelope unexpected: %.80q", data)
	}
	start := len(testEnvelopePrefix) + 64 + len(`","index":`)
	body := data[start : len(data)-2]
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	sum := blake3.Sum256(body)
	if got := string(data[len(testEnvelopePrefix) : len(testEnvelopePrefix)+64]); got != fmt.Sprintf("%x", sum) {
		t.Fatalf("index digest %s, body hashes to %x", got, sum)
	}
	return m
}

func writeIndexBody(t testing.TB, dir string, m map[string]any) {
	t.Helper()
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("%s%x\",\"index\":%s}\n", testEnvelopePrefix, blake3.Sum256(body), body)
	if err := os.WriteFile(filepath.Join(dir, "index.json"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// editIndex applies edit to the index body and re-digests it, so that only
// the structural checks can catch the change.
func editIndex(t testing.TB, dir string, edit func(m map[string]any)) {
	t.Helper()
	m := indexBody(t, dir)
	edit(m)
	writeIndexBody(t, dir, m)
}

func segmentOf(m map[string]any, i int) map[string]any {
	return m["segments"].([]any)[i].(map[string]any)
}

func regionOf(m map[string]any, seg, i int) map[string]any {
	return segmentOf(m, seg)["regions"].([]any)[i].(map[string]any)
}

func num(v any) int64 {
	n, err := v.(json.Number).Int64()
	if err != nil {
		panic(err)
	}
	return n
}

// copyDir copies a container so each case can damage its own copy.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}
