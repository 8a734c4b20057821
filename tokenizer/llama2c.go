package tokenizer

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// llama2.c's tokenizer.bin has fixed special ids (run.c hard-codes them).
const (
	llama2cBOS = 1
	llama2cEOS = 2
)

// LoadLlama2c reads a llama2.c tokenizer.bin holding vocabSize tokens (the
// file does not record its size; it comes from the model). vocabSize < 0
// reads every token the file holds (for tools that have no model).
func LoadLlama2c(path string, vocabSize int) (*SentencePiece, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open llama2.c tokenizer: %w", err)
	}
	defer f.Close()
	if vocabSize < 0 {
		if vocabSize, err = countLlama2cTokens(f, path); err != nil {
			return nil, err
		}
	}
	if err := checkFileSize(f, path, vocabSize); err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", path, err)
	}
	return ParseLlama2c(data, path, vocabSize)
}

// maxLlama2cFile bounds a tokenizer.bin read without a model's vocab size.
const maxLlama2cFile = 64 << 20

// countLlama2cTokens walks the records of a tokenizer.bin to count them.
func countLlama2cTokens(f *os.File, path string) (int, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxLlama2cFile+1))
	if err != nil {
		return 0, fmt.Errorf("%s: read: %w", path, err)
	}
	if len(data) > maxLlama2cFile {
		return 0, fmt.Errorf("%s: larger than %d bytes; not a llama2.c tokenizer", path, maxLlama2cFile)
	}
	if len(data) < 4 {
		return 0, fmt.Errorf("%s: file is %d bytes, too short for the 4-byte max_token_length header", path, len(data))
	}
	maxLen := int64(int32(binary.LittleEndian.Uint32(data)))
	n := 0
	for off := 4; off < len(data); n++ {
		_, _, next, err := parseLlama2cToken(data, off, maxLen)
		if err != nil {
			return 0, fmt.Errorf("%s: token %d: %w (is it a llama2.c tokenizer?)", path, n, err)
		}
		off = next
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// checkFileSize refuses, before reading it whole, a file larger than
// vocabSize tokens of at most max_token_length bytes can be (say a model
// checkpoint passed by mistake).
func checkFileSize(f *os.File, path string, vocabSize int) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var head [4]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return fmt.Errorf("%s: reading max_token_length: %w", path, err)
	}
	maxLen := int64(int32(binary.LittleEndian.Uint32(head[:])))
	if vocabSize <= 0 || maxLen < 0 || maxLen > math.MaxInt32 {
		return nil // ParseLlama2c reports these precisely
	}
	// Both factors are below 2^31 here, so the product fits in an int64.
	limit := 4 + int64(vocabSize)*(8+maxLen)
	if st.Size() > limit {
		return fmt.Errorf("%s: file is %d bytes, more than %d tokens of at most %d bytes can take (%d); is it a llama2.c tokenizer for a vocabulary of %d?",
			path, st.Size(), vocabSize, maxLen, limit, vocabSize)
	}
	return nil
}

// ParseLlama2c parses the bytes of a llama2.c tokenizer.bin: int32
// max_token_length, then per token an f32 score, an int32 length and that
// many bytes. name is used in error messages. BOS is 1 and EOS 2, as in
// llama2.c; their pieces, exported as "\n<s>\n" and "\n</s>\n", are trimmed to
// "<s>" and "</s>" so that the vocabulary matches the GGUF spelling.
func ParseLlama2c(data []byte, name string, vocabSize int) (*SentencePiece, error) {
	v, err := parseLlama2cVocab(data, name, vocabSize)
	if err != nil {
		return nil, err
	}
	t, err := New(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

func parseLlama2cVocab(data []byte, name string, vocabSize int) (Vocab, error) {
	if vocabSize <= llama2cEOS {
		return Vocab{}, fmt.Errorf("%s: vocabulary size %d is too small: llama2.c tokenizers need at least 3 tokens (<unk>, <s>, </s>)", name, vocabSize)
	}
	if len(data) < 4 {
		return Vocab{}, fmt.Errorf("%s: file is %d bytes, too short for the 4-byte max_token_length header", name, len(data))
	}
	maxLen := int64(int32(binary.LittleEndian.Uint32(data)))
	if maxLen < 0 {
		return Vocab{}, fmt.Errorf("%s: max_token_length %d is negative", name, maxLen)
	}
	// Every token takes at least 8 bytes, which bounds the allocation by the
	// file size whatever vocabSize claims.
	capacity := min(vocabSize, (len(data)-4)/8)
	v := Vocab{Pieces: make([]string, 0, capacity), Scores: make([]float32, 0, capacity), BOS: llama2cBOS, EOS: llama2cEOS}
	off := 4
	for i := range vocabSize {
		piece, score, next, err := parseLlama2cToken(data, off, maxLen)
		if err != nil {
			return Vocab{}, fmt.Errorf("%s: token %d of %d: %w", name, i, vocabSize, err)
		}
		v.Pieces = append(v.Pieces, piece)
		v.Scores = append(v.Scores, score)
		off = next
	}
	if off != len(data) {
		return Vocab{}, fmt.Errorf("%s: %d trailing bytes after token %d at offset %d: the file holds more than the model's %d tokens",
			name, len(data)-off, vocabSize-1, off, vocabSize)
	}
	v.Pieces[llama2cBOS] = strings.TrimSpace(v.Pieces[llama2cBOS])
	v.Pieces[llama2cEOS] = strings.TrimSpace(v.Pieces[llama2cEOS])
	return v, nil
}

// parseLlama2cToken reads one token record at off and returns the offset
// after it.
func parseLlama2cToken(data []byte, off int, maxLen int64) (string, float32, int, error) {
	if len(data)-off < 8 {
		return "", 0, 0, fmt.Errorf("file ends at offset %d, %d bytes short of the score and length", len(data), off+8-len(data))
	}
	score := math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
	length := int64(int32(binary.LittleEndian.Uint32(data[off+4:])))
	off += 8
	if math.IsNaN(float64(score)) || math.IsInf(float64(score), 0) {
		return "", 0, 0, fmt.Errorf("score %v is not finite", score)
	}
	if length < 0 || length > maxLen {
		return "", 0, 0, fmt.Errorf("length %d outside [0, max_token_length %d]", length, maxLen)
	}
	if length > int64(len(data)-off) {
		return "", 0, 0, fmt.Errorf("length %d at offset %d runs past the end of the file (%d bytes)", length, off-4, len(data))
	}
	end := off + int(length)
	return string(data[off:end]), score, end, nil
}
