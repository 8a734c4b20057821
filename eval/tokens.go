package eval

import (
	"encoding/binary"
	"fmt"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/tokenizer"
	"github.com/zeebo/blake3"
)

// Progress is told how much of a long computation is done; done runs from 1
// to total. A nil Progress is allowed everywhere.
type Progress func(done, total int)

func (p Progress) report(done, total int) {
	if p != nil {
		p(done, total)
	}
}

// SampleTokens generates text from the model itself, for calibration or
// evaluation without a corpus. Each sequence starts with bos and continues
// with tokens sampled at the given temperature (0 is greedy; no nucleus
// truncation) until the model samples bos or eos, which ends the sequence and
// is kept as its last token, or the sequence fills the context. Sequences are
// generated until they hold n tokens in total, not counting the bos each
// starts with: exactly the n positions a teacher-forced evaluation scores (the
// last sequence is cut short to make the total exact). The result depends
// only on the model, the arguments and the machine's float arithmetic: the
// same seed gives the same tokens.
//
// The model must hold every layer.
func SampleTokens(m *model.Model, bos, eos, n int, seed uint64, temperature float64, progress Progress) ([][]int, error) {
	cfg := m.Config()
	if n < 1 {
		return nil, fmt.Errorf("sample tokens: n = %d, want at least 1", n)
	}
	for _, id := range []int{bos, eos} {
		if id < 0 || id >= cfg.VocabSize {
			return nil, fmt.Errorf("sample tokens: bos %d / eos %d outside the vocabulary of %d", bos, eos, cfg.VocabSize)
		}
	}
	smp, err := sample.New(temperature, 1, seed)
	if err != nil {
		return nil, fmt.Errorf("sample tokens: %w", err)
	}
	st, err := m.NewState(0, cfg.NLayers)
	if err != nil {
		return nil, fmt.Errorf("sample tokens: the model must hold every layer: %w", err)
	}
	x := make([]float32, cfg.Dim)
	logits := make([]float32, cfg.VocabSize)
	var seqs [][]int
	total := 0
	for total < n {
		st.Reset()
		seq := []int{bos}
		for pos := 0; total < n && len(seq) < cfg.SeqLen; pos++ {
			if err := step(m, st, seq[pos], pos, x, logits); err != nil {
				return nil, fmt.Errorf("sample tokens: sequence %d: %w", len(seqs), err)
			}
			next := smp.Sample(logits)
			seq = append(seq, next)
			total++
			progress.report(total, n)
			if next == bos || next == eos {
				break
			}
		}
		seqs = append(seqs, seq)
	}
	return seqs, nil
}

// step runs the whole model on token at pos and leaves the logits.
func step(m *model.Model, st *model.State, token, pos int, x, logits []float32) error {
	if err := m.Embed(token, x); err != nil {
		return fmt.Errorf("position %d: %w", pos, err)
	}
	if err := m.Layers(st, x, pos); err != nil {
		return fmt.Errorf("position %d: %w", pos, err)
	}
	return m.Head(x, logits)
}

// TokensFromText encodes text (without BOS) and cuts its tokens into
// sequences of at most seqLen tokens, each starting with the tokenizer's BOS
// followed by the next seqLen-1 tokens of the text. seqLen is usually the
// model's context length; a smaller one makes evaluation faster. It returns
// nil for an empty text or a seqLen below 2.
func TokensFromText(tok tokenizer.Tokenizer, text string, seqLen int) [][]int {
	if seqLen < 2 {
		return nil
	}
	ids := tok.Encode(text, false, false)
	var seqs [][]int
	for len(ids) > 0 {
		k := min(len(ids), seqLen-1)
		seq := make([]int, 0, k+1)
		if tok.BOS() >= 0 {
			seq = append(seq, tok.BOS())
		}
		seqs = append(seqs, append(seq, ids[:k]...))
		ids = ids[k:]
	}
	return seqs
}

// CountTokens is the total number of tokens in seqs.
func CountTokens(seqs [][]int) int {
	n := 0
	for _, s := range seqs {
		n += len(s)
	}
	return n
}

// Truncate returns the first n tokens of seqs (in order) as sequences: whole
// sequences while they fit, then the first part of the next one. The
// sequences share storage with seqs.
func Truncate(seqs [][]int, n int) [][]int {
	var out [][]int
	for _, s := range seqs {
		if n <= 0 {
			break
		}
		k := min(len(s), n)
		out = append(out, s[:k])
		n -= k
	}
	return out
}

// TokensDigest is the calibration-data digest of a token stream: BLAKE3-256
// over every sequence's length as a little-endian u32, then every token id as
// a little-endian u32 (the tokens section of a capture file, docs in
// capfile.go). Two streams with the same tokens cut differently into
// sequences have different digests. Lengths and ids must fit in a u32.
func TokensDigest(seqs [][]int) [32]byte {
	h := blake3.New()
	var b [4]byte
	for _, s := range seqs {
		binary.LittleEndian.PutUint32(b[:], uint32(len(s)))
		h.Write(b[:])
	}
	buf := make([]byte, 0, 4096)
	for _, s := range seqs {
		for _, id := range s {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(id))
			if len(buf) == cap(buf) {
				h.Write(buf)
				buf = buf[:0]
			}
		}
	}
	h.Write(buf)
	var d [32]byte
	h.Sum(d[:0])
	return d
}
