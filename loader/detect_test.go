package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/llama2c"
	"github.com/seamlm/seam/synth"
)

func write(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(7, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Every format is told by its content, whatever the file is called.
func TestDetect(t *testing.T) {
	safetensors := binary.LittleEndian.AppendUint64(nil, 60)
	safetensors = append(safetensors, []byte(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}      `)...)
	safetensors = append(safetensors, make([]byte, 8)...)
	var v1 bytes.Buffer
	w, err := synth.Weights(synth.DemoConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := llama2c.WriteLegacy(&v1, w); err != nil {
		t.Fatal(err)
	}
	hf := t.TempDir()
	os.WriteFile(filepath.Join(hf, "config.json"), []byte(`{"model_type":"llama"}`), 0o644)
	os.WriteFile(filepath.Join(hf, "model.safetensors"), safetensors, 0o644)
	partial := t.TempDir()
	os.WriteFile(filepath.Join(partial, "embed.seg"), []byte("SEAM-SEG"), 0o644)
	// A container is told by its index, even beside segments and a config.json.
	ctr := t.TempDir()
	os.WriteFile(filepath.Join(ctr, container.IndexFile), []byte(`{}`), 0o644)
	os.WriteFile(filepath.Join(ctr, "config.json"), []byte(`{"model_type":"llama"}`), 0o644)
	os.WriteFile(filepath.Join(ctr, "embed.seg"), []byte("SEAM-SEG"), 0o644)
	os.WriteFile(filepath.Join(partial, "layer-000.seg.tmp"), []byte("SEAM-SEG"), 0o644)
	cases := []struct {
		path string
		want Format
	}{
		{testmodels.Path(t, testmodels.Stories260KGGUF), FormatGGUF},
		{testmodels.Path(t, testmodels.Stories260K), FormatLlama2c},
		{testmodels.Path(t, testmodels.Stories260KQ8), FormatLlama2c},
		{write(t, "synthetic-v0.bin", v1.Bytes()), FormatLlama2c},
		{testmodels.Path(t, testmodels.Tok512), FormatLlama2cTok},
		{filepath.Join(testmodels.TokenizerDir(t, testmodels.Llama3), "tokenizer.json"), FormatTokenizerJSON},
		{write(t, "model.safetensors", safetensors), FormatSafetensors},
		{write(t, "model.bin", safetensors), FormatSafetensors},
		{write(t, "ckpt.pt", append([]byte("PK\x03\x04"), make([]byte, 100)...)), FormatPyTorch},
		{write(t, "old.pt", append([]byte{0x80, 0x02}, make([]byte, 100)...)), FormatPyTorch},
		{write(t, "old.bin", append([]byte("tjgg"), make([]byte, 100)...)), FormatGGML},
		{write(t, "tokenizer.model", append([]byte("\x0a\x0b\x0a\x05<unk>\x15\x00\x00\x00\x00"), make([]byte, 50)...)), FormatSentencePiece},
		{write(t, "random.bin", randomBytes(1<<16)), FormatUnknown},
		{write(t, "embed.seg", append([]byte("SEAM-SEG"), make([]byte, 56)...)), FormatSegment},
		{hf, FormatHFFolder},
		{partial, FormatPartialImport},
		{ctr, FormatContainer},
		{testmodels.TokenizerDir(t, testmodels.Qwen3), FormatTokenizerJSON},
	}
	for _, c := range cases {
		got, err := Detect(c.path)
		if err != nil || got != c.want {
			t.Errorf("Detect(%s) = %q, %v; want %q", c.path, got, err, c.want)
		}
	}
}

// A file that is not a model is refused by name, with the accepted formats
// and what to do, in one line, before any parser reads it.
func TestOpenRefusesOtherFormats(t *testing.T) {
	safetensors := binary.LittleEndian.AppendUint64(nil, 4)
	safetensors = append(safetensors, []byte(`{}  `)...)
	hf := t.TempDir()
	os.WriteFile(filepath.Join(hf, "config.json"), []byte(`{"model_type":"llama"}`), 0o644)
	os.WriteFile(filepath.Join(hf, "model.safetensors"), safetensors, 0o644)
	// Safetensors shards without a config.json are still a Hugging Face folder.
	shards := t.TempDir()
	os.WriteFile(filepath.Join(shards, "model-00001-of-00002.safetensors"), safetensors, 0o644)
	cases := []struct {
		path  string
		wants []string
	}{
		{write(t, "model.safetensors", safetensors), []string{"is a safetensors file", Accepted, "convert_hf_to_gguf.py"}},
		{write(t, "random.bin", randomBytes(4096)), []string{"in no format Seam recognises", "first bytes", Accepted}},
		{testmodels.Path(t, testmodels.Tok512), []string{"is a llama2.c tokenizer", "give it as --tokenizer"}},
		{filepath.Join(testmodels.TokenizerDir(t, testmodels.Llama3), "tokenizer.json"), []string{"tokenizer.json", "not weights"}},
		{write(t, "ckpt.pt", append([]byte("PK\x03\x04"), make([]byte, 100)...)), []string{"PyTorch checkpoint", "export.py"}},
		{write(t, "old.bin", append([]byte("lmgg"), make([]byte, 100)...)), []string{"GGML", "convert_llama_ggml_to_gguf.py"}},
		{hf, []string{"is a Hugging Face model folder", Accepted, "convert_hf_to_gguf.py", "seam pull"}},
		{shards, []string{"is a Hugging Face model folder", Accepted, "convert_hf_to_gguf.py"}},
	}
	for _, c := range cases {
		for name, open := range map[string]func() error{
			"Open":     func() error { _, err := Open(c.path, Options{}); return err },
			"OpenHead": func() error { _, err := OpenHead(c.path, Options{}); return err },
		} {
			err := open()
			if !errors.Is(err, ErrNotModel) {
				t.Errorf("%s(%s): %v, want a format refusal", name, c.path, err)
				continue
			}
			msg := err.Error()
			for _, w := range c.wants {
				if !strings.Contains(msg, w) {
					t.Errorf("%s(%s): %q does not say %q", name, c.path, msg, w)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, "dim =") {
				t.Errorf("%s(%s): %q", name, c.path, msg)
			}
		}
	}
	t.Logf("e.g. %v", formatError(cases[0].path, FormatSafetensors))
	t.Logf("a folder: %v", formatError(hf, FormatHFFolder))
}

// sniff reads untrusted bytes: it must classify anything without panicking.
func FuzzSniff(f *testing.F) {
	f.Add([]byte("GGUF\x03\x00\x00\x00"), int64(8))
	f.Add([]byte("\x07\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00<unk>"), int64(17))
	f.Add(binary.LittleEndian.AppendUint64(nil, 2), int64(10))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		got := sniff(b, size)
		if got == "" {
			t.Fatal("empty format")
		}
	})
}
