package container

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

func TestFixtureHasStraddlingGroups(t *testing.T) {
	// Guards the fixture: at least one q8g tensor whose groups start mid-row.
	fx := newFixture(true, 1)
	found := false
	for _, s := range fx.segs {
		for _, ft := range s.tensors {
			if ft.t.Type == tensor.Q8G && ft.t.Cols%ft.t.GroupSize != 0 {
				found = true
			}
		}
	}
	if !found {
		t.Fatal("fixture has no q8g tensor with groups straddling rows")
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tied := range []bool{true, false} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) {
			fx := newFixture(tied, 2)
			dir := newContainer(t, fx)
			for _, r := range [][2]int{{0, 4}, {0, 1}, {1, 3}, {2, 4}, {3, 4}, {1, 2}} {
				checkRange(t, fx, dir, r[0], r[1])
			}
		})
	}
}

func checkRange(t *testing.T, fx *fixture, dir string, a, b int) {
	t.Helper()
	rg, err := OpenRange(dir, a, b)
	if err != nil {
		t.Fatalf("OpenRange(%d, %d): %v", a, b, err)
	}
	defer rg.Close()
	w := rg.Weights
	if w.First != a || w.Last != b || len(w.Layers) != fx.cfg.NLayers || w.Config != fx.cfg {
		t.Fatalf("range [%d,%d): weights First %d Last %d, %d layers, config %+v", a, b, w.First, w.Last, len(w.Layers), w.Config)
	}
	for i := range w.Layers {
		for _, role := range fx.cfg.LayerRoles() {
			got := w.Layers[i].Tensor(role)
			if i < a || i >= b {
				if got.Data != nil {
					t.Errorf("range [%d,%d): layer %d %s is filled, want empty", a, b, i, role)
				}
				continue
			}
			sameTensor(t, got, fx.tensor(fmt.Sprintf("layer-%03d", i), role))
		}
	}
	if a == 0 {
		sameTensor(t, &w.Embedding, fx.tensor("embed", RoleEmbedding))
	}
	if b == fx.cfg.NLayers {
		sameTensor(t, &w.FinalNorm, fx.tensor("head", RoleFinalNorm))
		if fx.cfg.TiedOutput {
			sameTensor(t, &w.Output, fx.tensor("embed", RoleEmbedding))
		} else {
			sameTensor(t, &w.Output, fx.tensor("head", RoleOutput))
		}
	}
	if a > 0 && !(b == fx.cfg.NLayers && fx.cfg.TiedOutput) && w.Embedding.Data != nil {
		t.Errorf("range [%d,%d) holds the embedding", a, b)
	}
	if b < fx.cfg.NLayers && (w.FinalNorm.Data != nil || w.Output.Data != nil) {
		t.Errorf("range [%d,%d) holds the head", a, b)
	}
}

func sameTensor(t *testing.T, got, want *tensor.Tensor) {
	t.Helper()
	if got.Name != want.Name || got.Type != want.Type || got.Rows != want.Rows || got.Cols != want.Cols || got.GroupSize != want.GroupSize {
		t.Errorf("tensor %s %s %dx%d g%d, want %s %s %dx%d g%d", got.Name, got.Type, got.Rows, got.Cols, got.GroupSize,
			want.Name, want.Type, want.Rows, want.Cols, want.GroupSize)
	}
	if !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Scales, want.Scales) {
		t.Errorf("tensor %s: bytes differ from what was imported", want.Name)
	}
	if want.Type == tensor.F32 && uintptrOf(got.Data)%64 != 0 {
		t.Errorf("tensor %s: data not 64-byte aligned in memory", want.Name)
	}
}

func TestRegionsOnDisk(t *testing.T) {
	// The index's offsets and checksums, read back from the files by hand.
	fx := newFixture(false, 3)
	dir := newContainer(t, fx, WithAlignment(256))
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := fx.regionBytes()
	seen := 0
	for _, s := range c.Segments() {
		data, err := os.ReadFile(filepath.Join(dir, s.Name+".seg"))
		if err != nil {
			t.Fatal(err)
		}
		if string(data[:8]) != "SEAM-SEG" || binary.LittleEndian.Uint32(data[8:]) != 1 || string(bytes.TrimRight(data[32:64], "\x00")) != s.Name {
			t.Errorf("%s: header %q", s.Name, data[:64])
		}
		for _, r := range s.Regions {
			w, ok := want[[2]string{s.Name, r.Name}]
			if !ok {
				t.Fatalf("unexpected region %s/%s", s.Name, r.Name)
			}
			seen++
			if r.Offset%256 != 0 {
				t.Errorf("%s/%s: offset %d not 256-aligned", s.Name, r.Name, r.Offset)
			}
			if !bytes.Equal(data[r.Offset:r.Offset+r.Length], w) {
				t.Errorf("%s/%s: file bytes differ", s.Name, r.Name)
			}
			if r.Checksum != blake3.Sum256(w) {
				t.Errorf("%s/%s: checksum %x, want %x", s.Name, r.Name, r.Checksum, blake3.Sum256(w))
			}
		}
	}
	if seen != len(want) {
		t.Errorf("index lists %d regions, imported %d", seen, len(want))
	}
	rep, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Regions != len(want) || rep.Bytes != fx.totalBytes() || !rep.Tokenizer || rep.Segments != 6 {
		t.Errorf("report %+v, want %d regions, %d bytes, tokenizer, 6 segments", rep, len(want), fx.totalBytes())
	}
}

func TestMappedFiles(t *testing.T) {
	cases := []struct {
		tied bool
		a, b int
		want []string
	}{
		{false, 1, 3, []string{"layer-001.seg", "layer-002.seg"}},
		{true, 1, 3, []string{"layer-001.seg", "layer-002.seg"}},
		{false, 0, 1, []string{"embed.seg", "layer-000.seg"}},
		{false, 3, 4, []string{"layer-003.seg", "head.seg"}},
		{true, 3, 4, []string{"embed.seg", "layer-003.seg", "head.seg"}}, // tied: the classifier is the embedding
	}
	dirs := map[bool]string{true: newContainer(t, newFixture(true, 4)), false: newContainer(t, newFixture(false, 4))}
	for _, tc := range cases {
		rg, err := OpenRange(dirs[tc.tied], tc.a, tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := rg.MappedFiles(); !slices.Equal(got, tc.want) {
			t.Errorf("tied %v, OpenRange(%d, %d) mapped %v, want %v", tc.tied, tc.a, tc.b, got, tc.want)
		}
		if err := rg.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A range needs only its own files: remove the others and it still opens.
	dir := copyDir(t, dirs[false])
	for _, f := range []string{"embed.seg", "layer-000.seg", "layer-003.seg", "head.seg", "tokenizer.json"} {
		os.Remove(filepath.Join(dir, f))
	}
	rg, err := OpenRange(dir, 1, 3)
	if err != nil {
		t.Fatalf("OpenRange(1, 3) without the other segments: %v", err)
	}
	rg.Close()
}

// entryPoints runs every entry point that reads a container.
func entryPoints(dir string) map[string]error {
	errs := map[string]error{}
	_, errs["Open"] = Open(dir)
	_, errs["OpenRange"] = OpenRange(dir, 0, 1)
	_, errs["Verify"] = Verify(dir)
	_, errs["Tokenizer"] = Tokenizer(dir)
	_, errs["Identity"] = Identity(dir)
	errs["AddCodec"] = AddCodec(dir, 1, []byte{1}, blake3.Sum256([]byte{1}))
	return errs
}

func TestInterruptedImport(t *testing.T) {
	fx := newFixture(false, 5)
	total := fx.totalBytes()
	for _, stop := range []int64{0, 1, total / 3, total / 2, total - 1} {
		dir := filepath.Join(t.TempDir(), "model")
		b, err := Create(dir, fx.cfg, WithInterruptAfter(stop), WithBufferSize(4096))
		if err != nil {
			t.Fatal(err)
		}
		err = addAll(b, fx, -1)
		if err == nil {
			err = b.Finish()
		}
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("stop at %d: import returned %v, want ErrInterrupted", stop, err)
		}
		if err := b.Finish(); !errors.Is(err, ErrInterrupted) {
			t.Fatalf("Finish after interruption: %v", err)
		}
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".seg.tmp") }) || slices.Contains(names, "index.json") {
			t.Fatalf("stop at %d: directory holds %v, want a temporary segment and no index", stop, names)
		}
		for name, err := range entryPoints(dir) {
			if !errors.Is(err, ErrNotContainer) || !strings.Contains(err.Error(), "not a Seam container (no index; an import may have been interrupted)") {
				t.Errorf("stop at %d: %s: %v, want not a container", stop, name, err)
			}
		}
		if err := b.Abort(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after Abort the directory Create made still exists: %v", err)
		}
	}
}

func TestUnfinishedImport(t *testing.T) {
	// Every segment and the tokenizer written, Finish never called: a process
	// killed just before the index rename.
	fx := newFixture(true, 6)
	dir := filepath.Join(t.TempDir(), "model")
	b, err := Create(dir, fx.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := addAll(b, fx, -1); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTokenizer(fx.vocab); err != nil {
		t.Fatal(err)
	}
	for name, err := range entryPoints(dir) {
		if !errors.Is(err, ErrNotContainer) {
			t.Errorf("%s: %v, want ErrNotContainer", name, err)
		}
	}
	// Abort into a directory that existed before Create leaves it, empty.
	dir2 := t.TempDir()
	b2, err := Create(dir2, fx.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := addAll(b2, fx, 3); err != nil {
		t.Fatal(err)
	}
	if err := b2.BeginSegment("layer-002"); err != nil {
		t.Fatal(err)
	}
	if err := b2.Abort(); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(dir2); err != nil || len(entries) != 0 {
		t.Errorf("after Abort: %v entries, err %v; want an empty directory", len(entries), err)
	}
}

func TestFlipEveryRegion(t *testing.T) {
	fx := newFixture(true, 7)
	dir := newContainer(t, fx)
	want := fx.regionBytes()
	flipped := 0
	for _, s := range mustOpen(t, dir).Segments() {
		path := filepath.Join(dir, s.Name+".seg")
		for _, r := range s.Regions {
			if _, ok := want[[2]string{s.Name, r.Name}]; !ok {
				t.Fatalf("unknown region %s/%s", s.Name, r.Name)
			}
			for _, at := range []int64{r.Offset, r.Offset + r.Length/2, r.Offset + r.Length - 1} {
				flipByte(t, path, at)
				_, err := Verify(dir)
				var re *RegionError
				if !errors.As(err, &re) || re.Segment != s.Name || re.Region != r.Name || !strings.Contains(err.Error(), "blake3") {
					t.Errorf("byte %d of %s/%s flipped: Verify says %v", at, s.Name, r.Name, err)
				}
				flipByte(t, path, at)
				flipped++
			}
		}
	}
	if flipped != 3*len(want) {
		t.Errorf("flipped in %d places, want %d", flipped, 3*len(want))
	}
	if _, err := Verify(dir); err != nil {
		t.Fatalf("restored container: %v", err)
	}
}

func TestFlipPaddingAndHeader(t *testing.T) {
	fx := newFixture(false, 8)
	dir := newContainer(t, fx, WithAlignment(4096)) // regions of the fixture are not 4096-byte multiples
	s := mustOpen(t, dir).Segments()[2]             // layer-001
	path := filepath.Join(dir, s.Name+".seg")
	gap := int64(-1)
	for i := 1; i < len(s.Regions); i++ {
		if end := s.Regions[i-1].Offset + s.Regions[i-1].Length; end < s.Regions[i].Offset {
			gap = end
		}
	}
	if gap < 0 {
		t.Fatal("fixture segment has no padding")
	}
	flipByte(t, path, gap)
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "padding") {
		t.Errorf("padding byte flipped: Verify says %v", err)
	}
	flipByte(t, path, gap)
	for _, at := range []int64{0, 8, 20, 33} { // magic, generation, import id, name
		flipByte(t, path, at)
		if _, err := Verify(dir); err == nil {
			t.Errorf("header byte %d flipped: Verify passed", at)
		}
		if _, err := OpenRange(dir, 1, 2); err == nil {
			t.Errorf("header byte %d flipped: OpenRange passed", at)
		}
		flipByte(t, path, at)
	}
}

func TestSegmentFromAnotherImport(t *testing.T) {
	// Same model imported twice: the segments are byte-identical apart from
	// the import id, and each index refuses the other's files.
	fx := newFixture(false, 9)
	d1, d2 := newContainer(t, fx), newContainer(t, fx)
	data, err := os.ReadFile(filepath.Join(d2, "layer-001.seg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d1, "layer-001.seg"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRange(d1, 1, 2); err == nil || !strings.Contains(err.Error(), "another import") {
		t.Errorf("OpenRange with a foreign segment: %v", err)
	}
}

func TestLengthDisagreesWithShape(t *testing.T) {
	fx := newFixture(false, 10)
	dir := newContainer(t, fx)
	editIndex(t, dir, func(m map[string]any) {}) // the helper alone changes nothing that matters
	if _, err := Verify(dir); err != nil {
		t.Fatalf("re-digested unchanged index: %v", err)
	}
	m := indexBody(t, dir)
	r := regionOf(m, 2, 1) // layer-001, second region
	name := r["name"].(string)
	editIndex(t, dir, func(m map[string]any) {
		r := regionOf(m, 2, 1)
		r["length"] = jsonNum(num(r["length"]) - 2)
	})
	for what, err := range map[string]error{"Verify": second(Verify(dir)), "Open": second(Open(dir))} {
		var re *RegionError
		if !errors.As(err, &re) || re.Segment != "layer-001" || re.Region != name || !strings.Contains(err.Error(), "needs") {
			t.Errorf("%s: %v, want a length/shape error naming layer-001/%s", what, err, name)
		}
	}
}

func TestStructuralDamage(t *testing.T) {
	fx := newFixture(false, 11)
	base := newContainer(t, fx)
	cases := []struct {
		name string
		edit func(t *testing.T, dir string)
		want string
	}{
		{"index digest mismatch", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "index.json")
			data, _ := os.ReadFile(path)
			i := bytes.Index(data, []byte(`"seq_len": 32`))
			if i < 0 {
				t.Fatal("seq_len not found in index.json")
			}
			data[i+len(`"seq_len": 3`)] = '3'
			os.WriteFile(path, data, 0o644)
		}, "index digest mismatch"},
		{"truncated index", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "index.json")
			data, _ := os.ReadFile(path)
			os.WriteFile(path, data[:len(data)/2], 0o644)
		}, "truncated"},
		{"overlapping regions", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]any) {
				regionOf(m, 2, 1)["offset"] = regionOf(m, 2, 0)["offset"]
			})
		}, "overlaps"},
		{"misaligned offset", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]any) {
				r := regionOf(m, 2, 3)
				r["offset"] = jsonNum(num(r["offset"]) + 8)
			})
		}, "not a multiple of the alignment 64"},
		{"region past the end", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]any) {
				s := segmentOf(m, 2)
				s["size"] = jsonNum(num(s["size"]) - 1)
			})
		}, "run past"},
		{"unknown field", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]any) { m["extra"] = true })
		}, "unknown field"},
		{"wrong shape for role", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]any) { regionOf(m, 2, 0)["cols"] = jsonNum(32) })
		}, "config needs"},
		{"bad config", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]any) { m["config"].(map[string]any)["n_heads"] = jsonNum(3) })
		}, "config"},
		{"missing segment entry", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]any) {
				m["segments"] = slices.Delete(m["segments"].([]any), 2, 3)
			})
		}, "index lists 5 segments"},
		{"checksum edited", func(t *testing.T, dir string) {
			editIndex(t, dir, func(m map[string]any) { regionOf(m, 1, 0)["blake3"] = strings.Repeat("ab", 32) })
		}, "identity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, base)
			tc.edit(t, dir)
			for name, err := range entryPoints(dir) {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
				}
			}
		})
	}
}

func TestMissingAndTruncatedSegments(t *testing.T) {
	fx := newFixture(false, 12)
	base := newContainer(t, fx)

	dir := copyDir(t, base)
	os.Remove(filepath.Join(dir, "layer-002.seg"))
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "layer-002") {
		t.Errorf("missing segment: Verify says %v", err)
	}
	if _, err := OpenRange(dir, 2, 3); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing segment: OpenRange(2, 3) says %v", err)
	}
	if rg, err := OpenRange(dir, 0, 2); err != nil {
		t.Errorf("OpenRange(0, 2) needs no layer 2: %v", err)
	} else {
		rg.Close()
	}

	for _, delta := range []int64{-1, +1} {
		dir := copyDir(t, base)
		path := filepath.Join(dir, "layer-001.seg")
		st, _ := os.Stat(path)
		if err := os.Truncate(path, st.Size()+delta); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%d bytes, the index declares %d", st.Size()+delta, st.Size())
		if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("size %+d: Verify says %v", delta, err)
		}
		if _, err := OpenRange(dir, 1, 2); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("size %+d: OpenRange says %v", delta, err)
		}
	}

	dir = copyDir(t, base)
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}\n"), 0o644)
	if _, err := Tokenizer(dir); err == nil || !strings.Contains(err.Error(), "declares") {
		t.Errorf("replaced tokenizer: %v", err)
	}
}

func TestFutureGeneration(t *testing.T) {
	fx := newFixture(false, 13)
	base := newContainer(t, fx)
	for _, variant := range []string{"same body", "garbage body"} {
		dir := copyDir(t, base)
		path := filepath.Join(dir, "index.json")
		data, _ := os.ReadFile(path)
		data = bytes.Replace(data, []byte(`{"generation":1,`), []byte(`{"generation":3,`), 1)
		if variant == "garbage body" {
			data = append([]byte(`{"generation":3,`), "\x00not json at all"...)
		}
		os.WriteFile(path, data, 0o644)
		// No segment, tokenizer or codec can be read: an attempt would fail
		// with an I/O error instead of the generation error.
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "index.json" {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
		for name, err := range entryPoints(dir) {
			var ge *GenerationError
			if !errors.As(err, &ge) || ge.Found != 3 || !slices.Equal(ge.Supported, []int{1, 2}) ||
				!strings.Contains(err.Error(), "generation 3") || !strings.Contains(err.Error(), "[1 2]") {
				t.Errorf("%s, %s: %v, want a generation 3 error", variant, name, err)
			}
		}
	}
}

func TestRangeRefusedBeforeIO(t *testing.T) {
	fx := newFixture(false, 14)
	dir := copyDir(t, newContainer(t, fx))
	for i := 0; i < fx.cfg.NLayers; i++ {
		os.Remove(filepath.Join(dir, fmt.Sprintf("layer-%03d.seg", i)))
	}
	os.Remove(filepath.Join(dir, "embed.seg"))
	os.Remove(filepath.Join(dir, "head.seg"))
	for _, r := range [][2]int{{-1, 2}, {0, 0}, {2, 2}, {3, 2}, {0, 5}, {4, 5}, {5, 6}} {
		_, err := OpenRange(dir, r[0], r[1])
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("layer range [%d, %d) is not a non-empty range within the model's [0, 4)", r[0], r[1])) {
			t.Errorf("OpenRange(%d, %d): %v", r[0], r[1], err)
		}
	}
	if _, err := OpenRange(dir, 1, 2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("valid range on the stripped directory: %v, want a missing file", err)
	}
}

func TestNotAContainer(t *testing.T) {
	empty := t.TempDir()
	if _, err := Open(empty); !errors.Is(err, ErrNotContainer) {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := Verify(empty); !errors.Is(err, ErrNotContainer) {
		t.Errorf("empty directory: Verify %v", err)
	}
	if _, err := Open(filepath.Join(empty, "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent directory: %v", err)
	}
	file := filepath.Join(empty, "f")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := Open(file); err == nil || !strings.Contains(err.Error(), "not a container directory") {
		t.Errorf("file: %v", err)
	}
	os.WriteFile(filepath.Join(empty, "index.json"), []byte(`{"foo":1}`), 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "not a Seam container index") {
		t.Errorf("foreign index.json: %v", err)
	}
}

func TestVerifyNothing(t *testing.T) {
	// An index that passes structure always has regions, so "nothing to
	// verify" is reached only through a layout with no segments.
	c := &Container{dir: "x", l: &layout{cfg: testConfig(true)}}
	if _, err := c.Verify(); err == nil || !strings.Contains(err.Error(), "nothing to verify") {
		t.Errorf("empty layout: %v", err)
	}
}

func TestTokenizerRoundTrip(t *testing.T) {
	for _, raw := range []bool{false, true} {
		fx := newFixture(raw, 15) // the tied fixture's vocabulary has a non-UTF-8 piece
		dir := newContainer(t, fx)
		tok, err := Tokenizer(dir)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := tokenizer.New(fx.vocab)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tok.(*tokenizer.SentencePiece).Vocab(), ref.Vocab()) {
			t.Errorf("raw %v: tokenizer differs after the round trip", raw)
		}
		data, _ := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
		wantEnc := map[bool]string{false: `"piece_encoding":"utf8"`, true: `"piece_encoding":"base64"`}[raw]
		if !bytes.Contains(data, []byte(wantEnc)) {
			t.Errorf("raw %v: tokenizer.json lacks %s", raw, wantEnc)
		}
	}
	// Without SetTokenizer there is none.
	fx := newFixture(false, 16)
	dir := filepath.Join(t.TempDir(), "m")
	b, _ := Create(dir, fx.cfg)
	if err := addAll(b, fx, -1); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := Tokenizer(dir); !errors.Is(err, ErrNoTokenizer) {
		t.Errorf("no tokenizer: %v", err)
	}
	if rep, err := Verify(dir); err != nil || rep.Tokenizer {
		t.Errorf("verify without tokenizer: %+v %v", rep, err)
	}
}

// referenceIdentity follows docs/container.md's identity preimage, written
// out from the fixture rather than from the index.
func referenceIdentity(fx *fixture) [32]byte {
	var b []byte
	le := binary.LittleEndian
	c := fx.cfg
	ext := c.HeadSize != 0 || c.RopeNeox || c.RopeLinear != 0 || c.RopeFreqs || c.QKVBias || c.QKNorm
	if ext {
		b = append(b, "seam model identity 2\n"...)
	} else {
		b = append(b, "seam model identity 1\n"...)
	}
	for _, v := range []int{c.Dim, c.HiddenDim, c.NLayers, c.NHeads, c.NKVHeads, c.VocabSize, c.SeqLen} {
		b = le.AppendUint64(b, uint64(v))
	}
	b = le.AppendUint32(b, math.Float32bits(c.RopeTheta))
	b = le.AppendUint64(b, uint64(c.RopeDim))
	b = le.AppendUint32(b, math.Float32bits(c.NormEps))
	flag := map[bool]byte{false: 0, true: 1}
	b = append(b, flag[c.TiedOutput])
	if ext {
		b = le.AppendUint64(b, uint64(c.HeadSize))
		b = append(b, flag[c.RopeNeox])
		b = le.AppendUint32(b, math.Float32bits(c.RopeLinear))
		b = append(b, flag[c.RopeFreqs], flag[c.QKVBias], flag[c.QKNorm])
	}
	type rec struct {
		layer int
		role  string
	}
	recs := []rec{{-1, "embedding"}}
	for i := 0; i < c.NLayers; i++ {
		roles := []string{"attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"}
		if c.QKVBias {
			roles = append(roles, "bq", "bk", "bv")
		}
		if c.QKNorm {
			roles = append(roles, "q_norm", "k_norm")
		}
		if c.RopeFreqs {
			roles = append(roles, "rope_freqs")
		}
		for _, r := range roles {
			recs = append(recs, rec{i, r})
		}
	}
	recs = append(recs, rec{-1, "final_norm"})
	if !c.TiedOutput {
		recs = append(recs, rec{-1, "output"})
	}
	b = le.AppendUint64(b, uint64(len(recs)))
	for _, r := range recs {
		seg := map[string]string{"embedding": "embed", "final_norm": "head", "output": "head"}[r.role]
		if r.layer >= 0 {
			seg = fmt.Sprintf("layer-%03d", r.layer)
		}
		t := fx.tensor(seg, r.role)
		b = le.AppendUint64(b, uint64(int64(r.layer)))
		b = append(b, byte(len(r.role)))
		b = append(b, r.role...)
		b = append(b, byte(len(t.Type.String())))
		b = append(b, t.Type.String()...)
		b = le.AppendUint64(b, uint64(t.Rows))
		b = le.AppendUint64(b, uint64(t.Cols))
		b = le.AppendUint64(b, uint64(t.GroupSize))
		d := blake3.Sum256(t.Data)
		b = append(b, d[:]...)
		var s [32]byte
		if t.Scales != nil {
			s = blake3.Sum256(t.Scales)
		}
		b = append(b, s[:]...)
	}
	return blake3.Sum256(b)
}

func TestIdentity(t *testing.T) {
	for _, tied := range []bool{true, false} {
		fx := newFixture(tied, 17)
		d1 := newContainer(t, fx)
		d2 := newContainer(t, fx, WithAlignment(4096), WithBufferSize(100))
		id1, err := Identity(d1)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceIdentity(fx); id1 != want {
			t.Errorf("tied %v: identity %x, reference %x", tied, id1, want)
		}
		id2, err := Identity(d2)
		if err != nil || id2 != id1 {
			t.Errorf("tied %v: same weights, other layout: identity %x (%v), want %x", tied, id2, err, id1)
		}
		fx.segs[2].tensors[4].t.Data[7] ^= 1
		if id3 := mustOpen(t, newContainer(t, fx)).Identity(); id3 == id1 {
			t.Errorf("tied %v: one weight byte changed, identity unchanged", tied)
		}
	}
}

func TestConfigFieldsCovered(t *testing.T) {
	// The identity preimage and the index encode model.Config field by field.
	// A new field needs a new identity version and container generation.
	if n := reflect.TypeOf(model.Config{}).NumField(); n != 17 {
		t.Fatalf("model.Config has %d fields; container identity and generation cover 17: update both", n)
	}
}

func TestCodecs(t *testing.T) {
	fx := newFixture(false, 18)
	dir := newContainer(t, fx)
	id0 := mustOpen(t, dir).Identity()
	c1, c2 := []byte("codec one"), []byte("codec two, longer")
	if err := AddCodec(dir, 2, c1, blake3.Sum256(c1)); err != nil {
		t.Fatal(err)
	}
	if err := AddCodec(dir, 1, c2, blake3.Sum256(c2)); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, dir)
	if got, err := c.Codec(2); err != nil || !bytes.Equal(got, c1) {
		t.Errorf("Codec(2) = %q, %v", got, err)
	}
	if got := c.Codecs(); len(got) != 2 || got[0].Boundary != 1 || got[1].Boundary != 2 {
		t.Errorf("Codecs() = %+v", got)
	}
	if _, err := c.Codec(3); !errors.Is(err, ErrNoCodec) {
		t.Errorf("Codec(3): %v", err)
	}
	if c.Identity() != id0 {
		t.Error("attaching codecs changed the model identity")
	}
	d1 := blake3.Sum256(c1)
	oldFile := filepath.Join(dir, fmt.Sprintf("codec-002-%x.bin", d1[:8]))
	if _, err := os.Stat(oldFile); err != nil {
		t.Fatalf("codec file name: %v", err)
	}
	// Replacing boundary 2 removes the old file.
	if err := AddCodec(dir, 2, c2, blake3.Sum256(c2)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(oldFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("replaced codec file remains: %v", err)
	}
	rep, err := Verify(dir)
	if err != nil || rep.Codecs != 2 {
		t.Fatalf("Verify with codecs: %+v %v", rep, err)
	}
	for _, bad := range []struct {
		b    int
		data []byte
		d    [32]byte
		want string
	}{
		{0, c1, blake3.Sum256(c1), "boundary 0"},
		{4, c1, blake3.Sum256(c1), "boundary 4"},
		{1, c1, blake3.Sum256(c2), "caller's digest"},
		{1, nil, blake3.Sum256(nil), "0 bytes"},
	} {
		if err := AddCodec(dir, bad.b, bad.data, bad.d); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("AddCodec(%d): %v, want %q", bad.b, err, bad.want)
		}
	}
	// A corrupted codec file is refused by Codec and Verify.
	d2 := blake3.Sum256(c2)
	path := filepath.Join(dir, fmt.Sprintf("codec-002-%x.bin", d2[:8]))
	flipByte(t, path, 3)
	if _, err := mustOpen(t, dir).Codec(2); err == nil || !strings.Contains(err.Error(), "blake3") {
		t.Errorf("corrupted codec: %v", err)
	}
	if _, err := Verify(dir); err == nil {
		t.Error("Verify passed a corrupted codec")
	}
}

func TestProgress(t *testing.T) {
	fx := newFixture(false, 19)
	var calls int
	var last, declared int64 = 0, 12345
	ok := true
	build(t, fx, filepath.Join(t.TempDir(), "m"), WithTotal(declared), WithBufferSize(1000), WithProgress(func(done, total int64) {
		calls++
		if done < last || total != declared {
			ok = false
		}
		last = done
	}))
	if !ok || last != fx.totalBytes() || calls < int(fx.totalBytes()/1000) {
		t.Errorf("progress: %d calls, last %d, monotonic+total %v; want last %d", calls, last, ok, fx.totalBytes())
	}
}

func TestBuilderRefuses(t *testing.T) {
	fx := newFixture(false, 20)
	wq := fx.tensor("layer-000", "wq")
	cases := []struct {
		name string
		run  func(b *Builder) error
		want string
	}{
		{"short reader", func(b *Builder) error {
			b.BeginSegment("layer-000")
			return b.AddRegion(RegionSpec{Name: "x", Role: "wq", DType: wq.Type, Rows: 64, Cols: 64}, bytes.NewReader(wq.Data[:100]))
		}, "reader ended after 100 bytes"},
		{"long reader", func(b *Builder) error {
			b.BeginSegment("layer-000")
			return b.AddRegion(RegionSpec{Name: "x", Role: "wq", DType: wq.Type, Rows: 64, Cols: 64}, bytes.NewReader(append(slices.Clone(wq.Data), 0)))
		}, "more than"},
		{"shape", func(b *Builder) error {
			b.BeginSegment("layer-000")
			return b.AddRegion(RegionSpec{Name: "x", Role: "wq", DType: tensor.F32, Rows: 32, Cols: 64}, bytes.NewReader(nil))
		}, "config needs 64x64"},
		{"role in wrong segment", func(b *Builder) error {
			b.BeginSegment("head")
			return b.AddRegion(RegionSpec{Name: "x", Role: "wq", DType: tensor.F32, Rows: 64, Cols: 64}, bytes.NewReader(nil))
		}, "does not belong"},
		{"norm not f32", func(b *Builder) error {
			b.BeginSegment("layer-000")
			return b.AddRegion(RegionSpec{Name: "x", Role: "attn_norm", DType: tensor.F16, Rows: 1, Cols: 64}, bytes.NewReader(nil))
		}, "not allowed"},
		{"q8_0 partial block", func(b *Builder) error {
			b.BeginSegment("layer-000")
			return b.AddRegion(RegionSpec{Name: "x", Role: "wk", DType: tensor.Q4_K, Rows: 32, Cols: 64}, bytes.NewReader(nil))
		}, "whole number"},
		{"q8g bad group", func(b *Builder) error {
			b.BeginSegment("layer-000")
			return b.AddRegion(RegionSpec{Name: "x", Role: "wq", DType: tensor.Q8G, Rows: 64, Cols: 64, GroupSize: 3}, bytes.NewReader(nil))
		}, "group size 3"},
		{"duplicate role", func(b *Builder) error {
			b.BeginSegment("layer-000")
			b.AddTensor("a", "wq", wq)
			return b.AddTensor("b", "wq", wq)
		}, "already added"},
		{"bad name", func(b *Builder) error {
			b.BeginSegment("layer-000")
			return b.AddTensor("../x", "wq", wq)
		}, "name"},
		{"unknown segment", func(b *Builder) error { return b.BeginSegment("layer-004") }, "layer-NNN"},
		{"duplicate segment", func(b *Builder) error {
			addAll(b, fx, 2)
			return b.BeginSegment("layer-000")
		}, "already written"},
		{"incomplete segment", func(b *Builder) error {
			b.BeginSegment("layer-000")
			b.AddTensor("a", "wq", wq)
			return b.EndSegment()
		}, "no attn_norm tensor"},
		{"missing segment", func(b *Builder) error {
			addAll(b, fx, 3)
			return b.Finish()
		}, "segment layer-002 was not written"},
		{"tokenizer size", func(b *Builder) error { return b.SetTokenizer(testVocab(47, false)) }, "47 pieces"},
	}
	for _, tc := range cases {
		dir := filepath.Join(t.TempDir(), "m")
		b, err := Create(dir, fx.cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = tc.run(b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if err2 := b.Finish(); err2 == nil {
			t.Errorf("%s: Finish succeeded after a failure", tc.name)
		}
		if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
			t.Errorf("%s: index written", tc.name)
		}
		if err := b.Abort(); err != nil {
			t.Errorf("%s: Abort: %v", tc.name, err)
		}
	}
	// Create refuses a non-empty directory and a bad config.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x"), nil, 0o644)
	if _, err := Create(dir, fx.cfg); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("non-empty directory: %v", err)
	}
	bad := fx.cfg
	bad.NHeads = 3
	if _, err := Create(filepath.Join(t.TempDir(), "m"), bad); err == nil {
		t.Error("invalid config accepted")
	}
	if _, err := Create(filepath.Join(t.TempDir(), "m"), fx.cfg, WithAlignment(96)); err == nil {
		t.Error("alignment 96 accepted")
	}
}

func TestBuilderMemoryBounded(t *testing.T) {
	// A 32 MiB embedding streams through the builder's buffer: the heap
	// allocated while adding it must not grow with the tensor. The bound,
	// 256 KiB, is far below the tensor and above the few small allocations
	// (hasher, error paths) an AddRegion makes.
	if testing.Short() {
		t.Skip("writes 32 MiB")
	}
	cfg := model.Config{Dim: 1024, HiddenDim: 1024, NLayers: 1, NHeads: 8, NKVHeads: 8, VocabSize: 8192,
		SeqLen: 16, RopeTheta: 10000, RopeDim: 128, NormEps: 1e-5, TiedOutput: true}
	b, err := Create(filepath.Join(t.TempDir(), "m"), cfg, WithBufferSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Abort()
	if err := b.BeginSegment(EmbedSegment); err != nil {
		t.Fatal(err)
	}
	var before, after runtimeMem
	before.read()
	err = b.AddRegion(RegionSpec{Name: "emb", Role: RoleEmbedding, DType: tensor.F32, Rows: 8192, Cols: 1024}, &patternReader{n: 32 << 20})
	after.read()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("adding a 32 MiB region allocated %d bytes", after.total-before.total)
	if grew := after.total - before.total; grew > 256<<10 {
		t.Errorf("adding a 32 MiB region allocated %d bytes", grew)
	}
}

// patternReader yields n deterministic bytes without allocating.
type patternReader struct{ n, off int }

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, errEOF
	}
	k := min(len(b), p.n-p.off)
	for i := range b[:k] {
		b[i] = byte((p.off + i) * 7)
	}
	p.off += k
	return k, nil
}

func flipByte(t testing.TB, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b[:], at); err != nil {
		t.Fatal(err)
	}
}

func mustOpen(t testing.TB, dir string) *Container {
	t.Helper()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func second[T any](_ T, err error) error { return err }

// VerifyProgress reports every region's bytes, ending at the total.
func TestVerifyProgress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	build(t, newFixture(false, 3), dir)
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var last, calls int64
	var total int64
	rep, err := c.VerifyProgress(func(done, all int64) {
		if done < last {
			t.Fatalf("progress went back from %d to %d", last, done)
		}
		last, total = done, all
		calls++
	})
	if err != nil {
		t.Fatal(err)
	}
	if last != rep.Bytes || total != rep.Bytes || calls != int64(rep.Regions) {
		t.Fatalf("progress ended at %d of %d after %d calls; report: %d bytes, %d regions", last, total, calls, rep.Bytes, rep.Regions)
	}
}

// A model using generation 2's config fields and layer roles round-trips;
// its index is generation 2 (segment headers too) while a model without
// them stays generation 1, readable by older builds; its identity follows
// the version 2 preimage of docs/container.md.
func TestExtendedConfig(t *testing.T) {
	fx := newFixtureConfig(extendedConfig(), 31)
	dir := newContainer(t, fx)
	for _, r := range [][2]int{{0, 4}, {0, 1}, {1, 3}, {2, 4}, {3, 4}} {
		checkRange(t, fx, dir, r[0], r[1])
	}
	c := mustOpen(t, dir)
	if c.Generation() != 2 || c.Config() != fx.cfg {
		t.Fatalf("generation %d, config %+v", c.Generation(), c.Config())
	}
	if want := referenceIdentity(fx); c.Identity() != want {
		t.Errorf("identity %x, reference %x", c.Identity(), want)
	}
	rep, err := Verify(dir)
	if err != nil || rep.Generation != 2 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, IndexFile))
	if !bytes.HasPrefix(data, []byte(`{"generation":2,`)) || !bytes.Contains(data, []byte(`"qk_norm": true`)) {
		t.Errorf("index starts %q", data[:40])
	}
	seg, _ := os.ReadFile(filepath.Join(dir, "layer-002.seg"))
	if g := binary.LittleEndian.Uint32(seg[8:]); g != 2 {
		t.Errorf("segment header generation %d", g)
	}
	classic := newContainer(t, newFixture(false, 32))
	data, _ = os.ReadFile(filepath.Join(classic, IndexFile))
	if !bytes.HasPrefix(data, []byte(`{"generation":1,`)) || bytes.Contains(data, []byte(`head_dim`)) {
		t.Errorf("classic index starts %q", data[:40])
	}

	// Generation 1 cannot describe the model: its index is refused, whatever
	// its digest (the generation lies outside it).
	old := copyDir(t, dir)
	data, _ = os.ReadFile(filepath.Join(old, IndexFile))
	os.WriteFile(filepath.Join(old, IndexFile), bytes.Replace(data, []byte(`{"generation":2,`), []byte(`{"generation":1,`), 1), 0o644)
	if _, err := Open(old); err == nil || !strings.Contains(err.Error(), "fields of generation 2") {
		t.Errorf("generation 1 index of an extended model: %v", err)
	}
	// A segment written for generation 1 in this generation 2 container.
	other := copyDir(t, dir)
	binary.LittleEndian.PutUint32(seg[8:], 1)
	os.WriteFile(filepath.Join(other, "layer-002.seg"), seg, 0o644)
	if _, err := OpenRange(other, 2, 3); err == nil || !strings.Contains(err.Error(), "segment of generation 1 in a generation 2 container") {
		t.Errorf("generation 1 segment: %v", err)
	}

	// The builder refuses a generation 2 role in a generation 1 model, and
	// requires every role of the extended one.
	b, err := Create(filepath.Join(t.TempDir(), "c"), testConfig(false))
	must(t, err)
	must(t, b.BeginSegment(LayerSegment(0)))
	if err := b.AddTensor("b", "bq", &tensor.Tensor{Type: tensor.F32, Rows: 1, Cols: 64, Data: make([]byte, 256)}); err == nil ||
		!strings.Contains(err.Error(), `role "bq" does not belong in segment layer-000`) {
		t.Errorf("bq in a classic model: %v", err)
	}
	b.Abort()
	b, err = Create(filepath.Join(t.TempDir(), "c"), fx.cfg)
	must(t, err)
	must(t, b.BeginSegment(LayerSegment(0)))
	for _, ft := range fx.segs[1].tensors {
		if ft.role != "k_norm" {
			must(t, b.AddTensor(ft.t.Name, ft.role, &ft.t))
		}
	}
	if err := b.EndSegment(); err == nil || !strings.Contains(err.Error(), "no k_norm tensor") {
		t.Errorf("layer without k_norm: %v", err)
	}
	b.Abort()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
