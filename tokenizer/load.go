package tokenizer

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/seamlm/seam/gguf"
)

// Load opens the tokenizer at path, telling the format from the file:
// a GGUF model (its vocabulary), a Hugging Face tokenizer.json or a folder
// holding one, or a llama2.c tokenizer.bin (all the tokens it holds).
func Load(path string) (Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, HFTokenizerFile)); err != nil {
			return nil, fmt.Errorf("tokenizer: folder %s holds no %s", path, HFTokenizerFile)
		}
		return LoadHF(path)
	}
	head, err := readHead(path, 64)
	if err != nil {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(head, []byte("GGUF")):
		return LoadGGUF(path)
	case bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n\ufeff"), []byte("{")):
		return LoadHF(path)
	}
	return LoadLlama2c(path, -1)
}

func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return buf[:k], nil
}

// LoadGGUF reads the vocabulary of a GGUF file.
func LoadGGUF(path string) (Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := ReadGGUFVocab(f)
	if err != nil {
		return nil, err
	}
	return NewFromGGUF(v, path)
}
