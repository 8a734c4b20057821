package tokenizer

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ToolOptions control Tokenize, the logic of `seam tokenize`.
type ToolOptions struct {
	JSON    bool // one JSON object per input: {"ids": [...]} or {"text": "..."}
	Decode  bool // inputs are ids (separated by spaces or commas); print text
	Special bool // add BOS/EOS as the vocabulary's rules say (AddBOS, AddEOS)
	Literal bool // recognise no special token in the text
}

// Tokenize writes, for each input, its ids (or with Decode, the text of its
// ids), one line per input.
func Tokenize(w io.Writer, tok Tokenizer, inputs []string, opt ToolOptions) error {
	for i, in := range inputs {
		if opt.Decode {
			ids, err := parseIDs(in, tok.VocabSize())
			if err != nil {
				return fmt.Errorf("input %d: %w", i+1, err)
			}
			text := ValidText(tok.DecodeAll(ids))
			if opt.JSON {
				if err := writeJSON(w, map[string]string{"text": text}); err != nil {
					return err
				}
				continue
			}
			if _, err := fmt.Fprintln(w, text); err != nil {
				return err
			}
			continue
		}
		eo := EncodeOptions{}
		if opt.Special {
			eo.BOS, eo.EOS = tok.AddBOS(), addEOS(tok)
		}
		if opt.Literal {
			eo.Literal = []Span{{0, len(in)}}
		}
		ids := tok.EncodeWith(in, eo)
		if opt.JSON {
			if ids == nil {
				ids = []int{}
			}
			if err := writeJSON(w, map[string][]int{"ids": ids}); err != nil {
				return err
			}
			continue
		}
		parts := make([]string, len(ids))
		for k, id := range ids {
			parts[k] = strconv.Itoa(id)
		}
		if _, err := fmt.Fprintln(w, strings.Join(parts, " ")); err != nil {
			return err
		}
	}
	return nil
}

// addEOS is the file's EOS rule, for the types that carry one.
func addEOS(tok Tokenizer) bool {
	if t, ok := tok.(interface{ AddEOS() bool }); ok {
		return t.AddEOS()
	}
	return false
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// parseIDs reads token ids separated by spaces or commas, with or without
// JSON brackets, each in [0, vocab).
func parseIDs(s string, vocab int) ([]int, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '[' || r == ']'
	})
	ids := make([]int, 0, len(fields))
	for _, f := range fields {
		id, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("token id %d is outside the vocabulary of %d", id, vocab)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
