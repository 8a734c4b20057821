package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/wire"
)

// For each architecture (Llama 3's RoPE factors and untied classifier,
// Qwen 2's biases, Qwen 3's head size and Q/K norms, both tied), three
// stages over loopback with the f32 wire give logits bit-identical to the
// whole model at every position. (importer's TestImportArchitectures shows
// the container of each gives the GGUF's logits bit for bit.)
func TestArchSplitIsBitIdentical(t *testing.T) {
	tokens := []int{1, 70, 80, 90, 100, 300, 301, 7, 8, 9, 10, 11, 500, 2, 3}
	for _, arch := range synth.Archs {
		t.Run(arch, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), arch+".gguf")
			if _, err := synth.WriteArchFile(src, synth.ArchFile{Arch: arch, DType: tensor.Q8_0, Layers: 6, Seed: 9, LogitStd: 6}); err != nil {
				t.Fatal(err)
			}
			m, err := loader.Open(src, loader.Options{NoTokenizer: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			mod, err := model.New(m.Weights)
			if err != nil {
				t.Fatal(err)
			}
			whole, _ := generate.NewLocal(mod)
			want, err := whole.Forward(context.Background(), tokens, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			ranges, _ := stage.EvenRanges(m.Weights.Config.NLayers, 3)
			c, _ := startChain(t, m, ranges, wire.EncodingF32)
			s, err := c.NewSession(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Forward(context.Background(), tokens, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			testmodels.SameBits(t, fmt.Sprintf("%s: 3 stages %v against the whole model", arch, ranges), got, want)
			if len(got) != len(tokens) {
				t.Fatalf("%d positions", len(got))
			}
		})
	}
}
