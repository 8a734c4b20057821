package synth

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"

	"github.com/seamlm/seam/tokenizer"
)

// WriteLlama2cTokenizer writes t's vocabulary in llama2.c's tokenizer.bin
// layout (int32 max piece length, then per piece: f32 score, int32 length,
// bytes), so that llama2.c's run.c can load a synthetic model for A/B runs.
func WriteLlama2cTokenizer(w io.Writer, t *tokenizer.SentencePiece) error {
	v := t.Vocab()
	maxLen := 0
	for _, p := range v.Pieces {
		maxLen = max(maxLen, len(p))
	}
	bw := bufio.NewWriter(w)
	le := binary.LittleEndian
	bw.Write(le.AppendUint32(nil, uint32(maxLen)))
	for i, p := range v.Pieces {
		bw.Write(le.AppendUint32(nil, math.Float32bits(v.Scores[i])))
		bw.Write(le.AppendUint32(nil, uint32(len(p))))
		bw.WriteString(p)
	}
	return bw.Flush()
}
