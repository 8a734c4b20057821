package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// refVocab is a raw vocabulary for the reference encoder, indexed the way
// llama2.c's str_lookup sees it: every piece (specials and "<0xNN>" spellings
// included) by its exact bytes, the first id winning on duplicates.
type refVocab struct {
	pieces []string
	scores []float32
	index  map[string]int
}

func newRefVocab(pieces []string, scores []float32) refVocab {
	v := refVocab{pieces: pieces, scores: scores, index: map[string]int{}}
	for i, p := range pieces {
		if _, dup := v.index[p]; !dup {
			v.index[p] = i
		}
	}
	return v
}

// refEncode is a direct transcription of llama2.c's encode() (quadratic, one
// best pair per pass): dummy-prefix " " token, one lookup per character with
// byte fallback to id byte+3, then merges of the highest-scoring pair, ties
// to the leftmost, with llama2.c's -1e10 floor. One deliberate difference:
// characters are split with Go's UTF-8 decoder, so each invalid byte stands
// alone (the package documents this).
func refEncode(v refVocab, text string, bos, eos bool) []int {
	var toks []int
	if bos {
		toks = append(toks, 1)
	}
	if text != "" {
		toks = append(toks, v.index[" "])
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		id, ok := v.index[text[i:i+size]]
		if ok && !(r == utf8.RuneError && size == 1) {
			toks = append(toks, id)
		} else {
			for j := i; j < i+size; j++ {
				toks = append(toks, int(text[j])+3)
			}
		}
		i += size
	}
	start := 0
	if bos {
		start = 1 // llama2.c also tries BOS+x pairs; they never match a real piece
	}
	for {
		bestScore, bestID, bestIdx := float32(-1e10), -1, -1
		for i := start; i+1 < len(toks); i++ {
			id, ok := v.index[v.pieces[toks[i]]+v.pieces[toks[i+1]]]
			if ok && v.scores[id] > bestScore {
				bestScore, bestID, bestIdx = v.scores[id], id, i
			}
		}
		if bestIdx < 0 {
			break
		}
		toks[bestIdx] = bestID
		toks = append(toks[:bestIdx+1], toks[bestIdx+2:]...)
	}
	if eos {
		toks = append(toks, 2)
	}
	return toks
}

// readRawLlama2c reads a llama2.c tokenizer.bin without any normalisation,
// independently of the package's parser, for the reference encoder.
func readRawLlama2c(data []byte, n int) ([]string, []float32, error) {
	off := 4
	var pieces []string
	var scores []float32
	for i := 0; i < n; i++ {
		if off+8 > len(data) {
			return nil, nil, fmt.Errorf("token %d: truncated", i)
		}
		scores = append(scores, math.Float32frombits(binary.LittleEndian.Uint32(data[off:])))
		l := int(binary.LittleEndian.Uint32(data[off+4:]))
		off += 8
		if l > len(data)-off {
			return nil, nil, fmt.Errorf("token %d: truncated", i)
		}
		pieces = append(pieces, string(data[off:off+l]))
		off += l
	}
	return pieces, scores, nil
}

// buildLlama2cFile writes a tokenizer.bin image, for parser tests.
func buildLlama2cFile(maxLen int32, pieces []string, scores []float32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(maxLen))
	for i, p := range pieces {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(scores[i]))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// syntheticRaw returns a llama2.c-layout vocabulary (<unk>, <s>, </s>, 256
// byte pieces, then text pieces) over a small alphabet, with scores drawn
// from a few values so that ties are common, and a few duplicate pieces.
func syntheticRaw(rng *rand.Rand, extra int) ([]string, []float32) {
	pieces := []string{"<unk>", "<s>", "</s>"}
	for b := 0; b < 256; b++ {
		pieces = append(pieces, fmt.Sprintf("<0x%02X>", b))
	}
	alphabet := []string{" ", "a", "b", "c", "é", "日", "\n"}
	pieces = append(pieces, alphabet[:len(alphabet)-1]...) // "\n" only via bytes
	for range extra {
		var sb strings.Builder
		for range 2 + rng.IntN(3) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		pieces = append(pieces, sb.String())
	}
	scores := make([]float32, len(pieces))
	for i := 259; i < len(pieces); i++ {
		scores[i] = -float32(rng.IntN(4))
	}
	return pieces, scores
}

// randomText mixes words, spaces, newlines, characters from several scripts
// and raw (often invalid) bytes.
func randomText(rng *rand.Rand, maxParts int) string {
	words := []string{"Once", " upon", " a", " time", "Lily", "the", "park", ",", ".", "<s>", "</s>", "<0x41>", "<unk>",
		"a", "b", "c", "ab", "ba", "cab", "é", "日", "日本"}
	var sb strings.Builder
	for range rng.IntN(maxParts + 1) {
		switch rng.IntN(7) {
		case 0:
			sb.WriteString(strings.Repeat(" ", 1+rng.IntN(3)))
		case 1:
			sb.WriteByte("\n\t\r"[rng.IntN(3)])
		case 2:
			sb.WriteByte(byte(rng.IntN(256)))
		case 3:
			ranges := [][2]rune{{0x20, 0x7e}, {0xa0, 0x24f}, {0x3040, 0x30ff}, {0x4e00, 0x4fff}, {0x1f300, 0x1f64f}, {0x2580, 0x2582}}
			rg := ranges[rng.IntN(len(ranges))]
			sb.WriteRune(rg[0] + rune(rng.IntN(int(rg[1]-rg[0]+1))))
		default:
			sb.WriteString(words[rng.IntN(len(words))])
		}
	}
	return sb.String()
}
