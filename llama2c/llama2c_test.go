package llama2c

import (
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/tensor"
)

func TestOpenShared(t *testing.T) {
	for _, tc := range []struct {
		file      string
		version   int
		dtype     tensor.DType
		groupSize int
	}{
		{testmodels.Stories260K, 0, tensor.F32, 0},
		{testmodels.Stories260KQ8, 2, tensor.Q8G, 8},
	} {
		c, err := Open(testmodels.Path(t, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cfg := c.Weights.Config
		// Values from the shared models' README.
		if cfg.Dim != 64 || cfg.HiddenDim != 172 || cfg.NLayers != 5 || cfg.NHeads != 8 || cfg.NKVHeads != 4 ||
			cfg.VocabSize != 512 || cfg.SeqLen != 512 || !cfg.TiedOutput {
			t.Errorf("%s: config %+v", tc.file, cfg)
		}
		if c.Version != tc.version || c.GroupSize != tc.groupSize {
			t.Errorf("%s: version %d group %d, want %d %d", tc.file, c.Version, c.GroupSize, tc.version, tc.groupSize)
		}
		if got := c.Weights.Layers[4].W2.Type; got != tc.dtype {
			t.Errorf("%s: w2 dtype %s, want %s", tc.file, got, tc.dtype)
		}
	}
}

func TestTruncatedAndCorrupt(t *testing.T) {
	c, err := Open(testmodels.Path(t, testmodels.Stories260KQ8))
	if err != nil {
		t.Fatal(err)
	}
	data := c.file.Bytes()
	defer c.Close()
	for _, n := range []int{0, 3, 27, 28, 100, 255, 256, 300, len(data) / 2, len(data) - 1} {
		if _, err := Parse(data[:n], "cut.bin"); err == nil {
			t.Errorf("prefix of %d bytes parsed without error", n)
		}
	}
	bad := append([]byte(nil), data...)
	bad[4] = 9 // version
	if _, err := Parse(bad, "v9.bin"); err == nil {
		t.Error("version 9 accepted")
	}
	bad = append([]byte(nil), data...)
	bad[37] = 0 // group size 0
	if _, err := Parse(bad, "gs0.bin"); err == nil {
		t.Error("group size 0 accepted")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte{64, 0, 0, 0, 172, 0, 0, 0, 5, 0, 0, 0, 8, 0, 0, 0, 4, 0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0})
	hdr := make([]byte, 300)
	copy(hdr, []byte{0x32, 0x34, 0x6b, 0x61, 2, 0, 0, 0, 64, 0, 0, 0, 172, 0, 0, 0, 5, 0, 0, 0, 8, 0, 0, 0, 4, 0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 1, 8, 0, 0, 0})
	f.Add(hdr)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.bin")
		if err == nil {
			if err := c.Weights.Validate(); err != nil {
				t.Fatalf("parsed but invalid: %v", err)
			}
		}
	})
}
