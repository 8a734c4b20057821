package loader

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/llama2c"
)

// Formats Detect recognises but Seam does not load as a model. Each gets an
// error naming it, what Seam reads, and how to convert.
const (
	FormatSafetensors   Format = "safetensors"
	FormatHFFolder      Format = "hf-folder" // a Hugging Face model folder: config.json and weights
	FormatPyTorch       Format = "pytorch"   // a torch.save zip or pickle (.pt, .pth, pytorch_model.bin)
	FormatGGML          Format = "ggml"      // GGUF's predecessors: ggml, ggmf, ggjt, ggla
	FormatLlama2cTok    Format = "llama2c-tokenizer"
	FormatSentencePiece Format = "sentencepiece" // tokenizer.model, a SentencePiece protobuf
	FormatTokenizerJSON Format = "tokenizer-json"
	FormatSegment       Format = "seam-segment"   // one file of a container
	FormatPartialImport Format = "partial-import" // a folder an interrupted import left
	FormatUnknown       Format = "unknown"
)

// Accepted lists what Open loads as a model, for messages.
const Accepted = "Seam reads GGUF files, llama2.c checkpoints (versions 0, 1 and 2) and Seam container folders"

// IsModel reports whether Open loads this format as a model.
func (f Format) IsModel() bool {
	return f == FormatGGUF || f == FormatLlama2c || f == FormatContainer
}

// IsTokenizer reports whether the format is a vocabulary file rather than
// a model.
func (f Format) IsTokenizer() bool {
	return f == FormatLlama2cTok || f == FormatSentencePiece || f == FormatTokenizerJSON
}

// FormatError refuses a path whose content is not a model Seam loads,
// naming what it is, what Seam reads and how to get there.
type FormatError struct {
	Path   string
	Format Format
	Detail string // what was seen, e.g. the first bytes
}

func (e *FormatError) Error() string {
	what, how := describe(e.Format)
	msg := fmt.Sprintf("%s is %s, not a model Seam loads: %s", e.Path, what, Accepted)
	if e.Detail != "" {
		msg = fmt.Sprintf("%s is %s (%s), not a model Seam loads: %s", e.Path, what, e.Detail, Accepted)
	}
	if how != "" {
		msg += "; " + how
	}
	return msg
}

// describe names a format and says how to get from it to one Seam reads.
func describe(f Format) (what, how string) {
	const toGGUF = "convert it to GGUF with llama.cpp's convert_hf_to_gguf.py (python convert_hf_to_gguf.py MODEL_FOLDER --outtype f16), or download a GGUF of the same model with 'seam pull'"
	switch f {
	case FormatSafetensors:
		return "a safetensors file", "give its whole Hugging Face folder to llama.cpp's convert_hf_to_gguf.py (python convert_hf_to_gguf.py MODEL_FOLDER --outtype f16), or download a GGUF of the same model with 'seam pull'"
	case FormatHFFolder:
		return "a Hugging Face model folder (config.json and weights)", toGGUF
	case FormatPyTorch:
		return "a PyTorch checkpoint (torch.save)", "a llama2.c training checkpoint exports with llama2.c's export.py (python export.py model.bin --version 0 --checkpoint ckpt.pt); a Hugging Face model converts with llama.cpp's convert_hf_to_gguf.py"
	case FormatGGML:
		return "a GGML-era file (the format before GGUF)", "convert it with llama.cpp's convert_llama_ggml_to_gguf.py, or download a GGUF of the same model with 'seam pull'"
	case FormatLlama2cTok:
		return "a llama2.c tokenizer (tokenizer.bin)", "give it as --tokenizer, and the model as --model"
	case FormatSentencePiece:
		return "a SentencePiece tokenizer model (tokenizer.model)", "it is a vocabulary, not weights; give the model as --model"
	case FormatTokenizerJSON:
		return "a Hugging Face tokenizer.json", "it is a vocabulary, not weights; give the model as --model"
	case FormatSegment:
		return "one segment file of a Seam container", "give the container's folder (the one holding index.json)"
	case FormatPartialImport:
		return "the folder of an interrupted 'seam import' (segment files but no index.json)", "run the import again with --force to start it over"
	}
	return "in no format Seam recognises", "GGUF files come from Hugging Face (seam pull) or llama.cpp's converters"
}

// Detect tells the format of path from its type and first bytes, before any
// parser runs, so that a file of the wrong kind is named as such instead of
// failing deep inside a parser.
func Detect(path string) (Format, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return detectDir(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF {
		if err == io.EOF {
			return "", fmt.Errorf("%s: an empty file, not a model", path)
		}
		return "", err
	}
	return sniff(head[:n], st.Size()), nil
}

// sniff classifies a file by its first bytes and its size.
func sniff(b []byte, size int64) Format {
	le := binary.LittleEndian
	switch {
	case len(b) < 8:
		return FormatUnknown
	case bytes.HasPrefix(b, []byte("GGUF")):
		return FormatGGUF
	case le.Uint32(b) == llama2c.Magic:
		return FormatLlama2c
	case bytes.HasPrefix(b, []byte("SEAM-SEG")):
		return FormatSegment
	case isGGML(b):
		return FormatGGML
	case bytes.HasPrefix(b, []byte("PK\x03\x04")), b[0] == 0x80 && b[1] >= 2 && b[1] <= 5:
		return FormatPyTorch
	case isSafetensors(b, size):
		return FormatSafetensors
	case b[0] == 0x0a && bytes.Contains(b[:min(len(b), 64)], []byte("<unk>")):
		return FormatSentencePiece // field 1 (pieces), the first piece <unk>
	case bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{")):
		if isTokenizerJSON(b) {
			return FormatTokenizerJSON
		}
		return FormatUnknown
	case plausibleLegacy(b, size):
		return FormatLlama2c
	case plausibleLlama2cTokenizer(b):
		return FormatLlama2cTok
	}
	return FormatUnknown
}

func isGGML(b []byte) bool {
	// Written as a little-endian u32: "lmgg", "fmgg", "tjgg", "algg" on disk.
	switch string(b[:4]) {
	case "lmgg", "fmgg", "tjgg", "algg":
		return true
	}
	return false
}

// isSafetensors: a little-endian u64 header length, then a JSON object.
func isSafetensors(b []byte, size int64) bool {
	n := binary.LittleEndian.Uint64(b)
	return len(b) > 8 && n >= 2 && n < 100<<20 && int64(n)+8 <= size && b[8] == '{'
}

// isTokenizerJSON looks for the keys of a Hugging Face tokenizer.json in
// its first bytes ("model" comes after "added_tokens", which can be long, so
// also accept "added_tokens" with "normalizer" or "pre_tokenizer").
func isTokenizerJSON(b []byte) bool {
	s := string(b)
	return strings.Contains(s, `"added_tokens"`) || (strings.Contains(s, `"model"`) && strings.Contains(s, `"vocab"`))
}

// plausibleLegacy checks a llama2.c version 0 header: seven int32s that
// describe a model, and a file at least as large as its embedding.
func plausibleLegacy(b []byte, size int64) bool {
	if len(b) < 28 {
		return false
	}
	var v [7]int64
	for i := range v {
		v[i] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	dim, hidden, layers, heads, kv, vocab, seq := v[0], v[1], v[2], v[3], v[4], v[5], v[6]
	if vocab < 0 {
		vocab = -vocab
	}
	const lim = 1 << 20
	ok := dim > 0 && dim < lim && hidden > 0 && hidden < lim && layers > 0 && layers < 4096 &&
		heads > 0 && dim%heads == 0 && kv > 0 && kv <= heads && heads%kv == 0 &&
		vocab > 0 && vocab < lim*8 && seq > 0 && seq < lim*8
	return ok && size >= 28+4*vocab*dim
}

// plausibleLlama2cTokenizer checks the start of a llama2.c tokenizer file:
// max_token_length, then records of (f32 score, int32 length, bytes).
func plausibleLlama2cTokenizer(b []byte) bool {
	le := binary.LittleEndian
	maxLen := int64(int32(le.Uint32(b)))
	if maxLen < 1 || maxLen > 1<<16 {
		return false
	}
	off, records := 4, 0
	for off+8 <= len(b) && records < 8 {
		score := math.Float32frombits(le.Uint32(b[off:]))
		n := int64(int32(le.Uint32(b[off+4:])))
		if math.IsNaN(float64(score)) || math.IsInf(float64(score), 0) || n < 1 || n > maxLen {
			return false
		}
		off += 8 + int(n)
		records++
	}
	return records >= 3 || off == len(b)
}

// detectDir tells a container from a Hugging Face folder, a tokenizer
// folder or an interrupted import.
func detectDir(dir string) (Format, error) {
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	if has(container.IndexFile) {
		return FormatContainer, nil
	}
	if has("config.json") {
		var cfg struct {
			ModelType string `json:"model_type"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil && json.Unmarshal(b, &cfg) == nil {
			return FormatHFFolder, nil
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".seg") || strings.HasSuffix(e.Name(), ".seg.tmp") {
			return FormatPartialImport, nil
		}
		if strings.HasSuffix(e.Name(), ".safetensors") {
			return FormatHFFolder, nil
		}
	}
	if has("tokenizer.json") {
		return FormatTokenizerJSON, nil
	}
	return FormatUnknown, nil
}

// formatError builds the refusal for a path Detect classified as f.
func formatError(path string, f Format) error {
	var detail string
	if f == FormatUnknown {
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a folder without index.json, config.json or model files: %s", path, Accepted)
		}
		detail = firstBytes(path)
	}
	return &FormatError{Path: path, Format: f, Detail: detail}
}

func firstBytes(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 8)
	n, _ := io.ReadFull(f, b)
	return fmt.Sprintf("first bytes % x", b[:n])
}

// ErrNotModel matches every *FormatError with errors.Is.
var ErrNotModel = errors.New("not a model Seam loads")

func (e *FormatError) Is(target error) bool { return target == ErrNotModel }

// CheckTokenizerFile refuses, by name, a --tokenizer file whose content is
// a model or a format no tokenizer loader reads, before the llama2.c
// tokenizer parser misreads it. (GGUF files and tokenizer.json are loaded as
// vocabularies; see loadLlama2cTokenizer.)
func CheckTokenizerFile(path string) error {
	f, err := Detect(path)
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	switch {
	case f == FormatGGUF, f == FormatTokenizerJSON, f == FormatLlama2cTok, f == FormatUnknown:
		return nil // a loader reads it, or checks it in detail
	case f == FormatLlama2c || f == FormatContainer:
		return fmt.Errorf("%s is a model (%s), given as --tokenizer: give it as --model; --tokenizer takes a llama2.c tokenizer.bin, a GGUF or a tokenizer.json", path, f)
	}
	what, _ := describe(f)
	return fmt.Errorf("%s is %s, given as --tokenizer, which takes a llama2.c tokenizer.bin, a GGUF or a tokenizer.json", path, what)
}
