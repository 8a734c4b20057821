package importer

import (
	"path/filepath"
	"testing"

	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
)

// Each architecture's GGUF (as `seam synth --arch` writes it) imports into
// a container of generation 2 whose every layer range maps only its own
// segments, whose logits are bit-identical to the GGUF's, and whose identity
// equals the one a head computes from the GGUF.
func TestImportArchitectures(t *testing.T) {
	tokens := []int{1, 403, 407, 261, 378, 306, 269, 400, 412, 334, 267, 30, 320, 2, 0, 511}
	for _, arch := range synth.Archs {
		for _, dt := range []tensor.DType{tensor.F32, tensor.Q4_K} {
			t.Run(arch+"-"+dt.String(), func(t *testing.T) {
				dir := t.TempDir()
				src := filepath.Join(dir, "m.gguf")
				cfg, err := synth.WriteArchFile(src, synth.ArchFile{Arch: arch, DType: dt, Layers: 3, Seed: 5, LogitStd: 6})
				if err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(dir, "c")
				if err := Import(src, out, Options{}); err != nil {
					t.Fatal(err)
				}
				rep, err := container.Verify(out)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Generation != 2 || rep.Config != cfg {
					t.Fatalf("generation %d, config %+v; want 2, %+v", rep.Generation, rep.Config, cfg)
				}
				testmodels.SameBits(t, "container against GGUF", logitsAt(t, out, tokens), logitsAt(t, src, tokens))

				srcModel, err := loader.Open(src, loader.Options{NoTokenizer: true})
				if err != nil {
					t.Fatal(err)
				}
				defer srcModel.Close()
				a, err := srcModel.Identity()
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := container.Identity(out); a != b {
					t.Fatalf("identity from GGUF %x, from container %x", a, b)
				}

				// A middle range maps its one layer segment, nothing else.
				r, err := container.OpenRange(out, 1, 2)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if got := r.MappedFiles(); len(got) != 1 || got[0] != "layer-001.seg" {
					t.Errorf("range [1, 2) mapped %v", got)
				}
				l := &r.Weights.Layers[1]
				for _, role := range cfg.LayerRoles() {
					if l.Tensor(role).Data == nil {
						t.Errorf("range [1, 2): layer 1 has no %s", role)
					}
				}
			})
		}
	}
}
