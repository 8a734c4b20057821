package container

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/seamlm/seam/tokenizer"
)

// tokenizerJSON is tokenizer.json. Pieces are stored as JSON strings when
// every piece is valid UTF-8 (the usual case, readable with any viewer) and
// as standard base64 otherwise: JSON strings cannot carry arbitrary bytes,
// and a llama2.c vocabulary may hold any.
type tokenizerJSON struct {
	PieceEncoding string    `json:"piece_encoding"` // "utf8" or "base64"
	Pieces        []string  `json:"pieces"`
	Scores        []float32 `json:"scores"`
	Types         []int32   `json:"types"` // null: inferred when loaded, see tokenizer.New
	BOS           int       `json:"bos"`
	EOS           int       `json:"eos"`
}

func encodeTokenizer(v tokenizer.Vocab) ([]byte, error) {
	tj := tokenizerJSON{PieceEncoding: "utf8", Pieces: v.Pieces, Scores: v.Scores, Types: v.Types, BOS: v.BOS, EOS: v.EOS}
	for _, p := range v.Pieces {
		if !utf8.ValidString(p) {
			tj.PieceEncoding = "base64"
			tj.Pieces = make([]string, len(v.Pieces))
			for i, p := range v.Pieces {
				tj.Pieces[i] = base64.StdEncoding.EncodeToString([]byte(p))
			}
			break
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep byte pieces readable: "<0x0A>", not "\u003c0x0A\u003e"
	if err := enc.Encode(&tj); err != nil {
		return nil, fmt.Errorf("encode tokenizer: %w", err)
	}
	return b.Bytes(), nil
}

// parseTokenizer decodes tokenizer.json into a vocabulary of vocabSize pieces
// and builds the tokenizer, which validates scores, types and BOS/EOS.
func parseTokenizer(data []byte, vocabSize int) (*tokenizer.Tokenizer, error) {
	var tj tokenizerJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tj); err != nil {
		return nil, fmt.Errorf("%s: %w", TokenizerFile, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: data after the JSON object", TokenizerFile)
	}
	if len(tj.Pieces) != vocabSize {
		return nil, fmt.Errorf("%s: %d pieces, the config's vocab_size is %d", TokenizerFile, len(tj.Pieces), vocabSize)
	}
	switch tj.PieceEncoding {
	case "utf8":
	case "base64":
		for i, p := range tj.Pieces {
			raw, err := base64.StdEncoding.DecodeString(p)
			if err != nil {
				return nil, fmt.Errorf("%s: piece %d: %w", TokenizerFile, i, err)
			}
			tj.Pieces[i] = string(raw)
		}
	default:
		return nil, fmt.Errorf("%s: piece_encoding %q, want \"utf8\" or \"base64\"", TokenizerFile, tj.PieceEncoding)
	}
	tok, err := tokenizer.New(tokenizer.Vocab{Pieces: tj.Pieces, Scores: tj.Scores, Types: tj.Types, BOS: tj.BOS, EOS: tj.EOS})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TokenizerFile, err)
	}
	return tok, nil
}
