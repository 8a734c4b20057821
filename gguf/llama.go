package gguf

import (
	"fmt"
	"math"
	"strings"
)

// Metadata keys of the llama architecture and the GGML tokenizer.
const (
	KeyArchitecture = "general.architecture"

	KeyTokenizerModel = "tokenizer.ggml.model"
	KeyTokens         = "tokenizer.ggml.tokens"
	KeyScores         = "tokenizer.ggml.scores"
	KeyTokenTypes     = "tokenizer.ggml.token_type"
	KeyBOS            = "tokenizer.ggml.bos_token_id"
	KeyEOS            = "tokenizer.ggml.eos_token_id"
)

// Defaults that llama.cpp applies when a llama file omits the key.
const (
	defaultRopeTheta = 10000
	defaultNormEps   = 1e-5
	defaultBOS       = 1
	defaultEOS       = 2
)

// oneLine joins a multi-line error (errors.Join) into one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// intKey reads a non-negative integer that must fit in an int.
func (f *File) intKey(key string) (int, error) {
	u, err := f.Uint(key)
	if err != nil {
		return 0, err
	}
	if u > math.MaxInt32 {
		return 0, fmt.Errorf("gguf %s: metadata %q is %d, beyond any model size Seam accepts", f.name, key, u)
	}
	return int(u), nil
}

func (f *File) intKeyOr(key string, def int) (int, error) {
	if !f.Has(key) {
		return def, nil
	}
	return f.intKey(key)
}

// float32KeyOr reads a number as float32, requiring it to be finite after the
// conversion (a float64 beyond float32's range becomes infinite).
func (f *File) float32KeyOr(key string, def float32) (float32, error) {
	if !f.Has(key) {
		return def, nil
	}
	x, err := f.Float(key)
	if err != nil {
		return 0, err
	}
	v := float32(x)
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return 0, fmt.Errorf("gguf %s: metadata %q is %v, not a finite float32", f.name, key, x)
	}
	return v, nil
}

// Vocab is the tokenizer vocabulary stored in a GGUF file. Scores and Types are
// nil when the file omits them; otherwise they have one entry per piece.
type Vocab struct {
	Model  string // tokenizer.ggml.model, e.g. "llama" (SentencePiece) or "gpt2"; "" when absent
	Pieces []string
	Scores []float32
	Types  []int32 // llama.cpp token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
	BOS    int
	EOS    int
}

// Vocab reads the tokenizer.ggml.* metadata. BOS and EOS default to 1 and 2.
func (f *File) Vocab() (*Vocab, error) {
	v := &Vocab{}
	var err error
	if f.Has(KeyTokenizerModel) {
		if v.Model, err = f.String(KeyTokenizerModel); err != nil {
			return nil, err
		}
	}
	if v.Pieces, err = f.Strings(KeyTokens); err != nil {
		return nil, err
	}
	n := len(v.Pieces)
	if n == 0 {
		return nil, fmt.Errorf("gguf %s: %s is empty", f.name, KeyTokens)
	}
	if f.Has(KeyScores) {
		if v.Scores, err = f.Float32s(KeyScores); err != nil {
			return nil, err
		}
		if err := f.checkScores(v.Scores, n); err != nil {
			return nil, err
		}
	}
	if f.Has(KeyTokenTypes) {
		if v.Types, err = f.Int32s(KeyTokenTypes); err != nil {
			return nil, err
		}
		if len(v.Types) != n {
			return nil, fmt.Errorf("gguf %s: %s has %d entries, %s has %d", f.name, KeyTokenTypes, len(v.Types), KeyTokens, n)
		}
	}
	if v.BOS, err = f.tokenID(KeyBOS, defaultBOS, n); err != nil {
		return nil, err
	}
	if v.EOS, err = f.tokenID(KeyEOS, defaultEOS, n); err != nil {
		return nil, err
	}
	return v, nil
}

func (f *File) checkScores(scores []float32, n int) error {
	if len(scores) != n {
		return fmt.Errorf("gguf %s: %s has %d entries, %s has %d", f.name, KeyScores, len(scores), KeyTokens, n)
	}
	for i, s := range scores {
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("gguf %s: %s[%d] is %v, not finite", f.name, KeyScores, i, s)
		}
	}
	return nil
}

// tokenID reads a token id (default def) and requires it to index the vocabulary.
func (f *File) tokenID(key string, def, n int) (int, error) {
	id, err := f.intKeyOr(key, def)
	if err != nil {
		return 0, err
	}
	if id >= n {
		return 0, fmt.Errorf("gguf %s: metadata %q is %d, outside the %d-token vocabulary", f.name, key, id, n)
	}
	return id, nil
}
