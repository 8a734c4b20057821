// Package tokenizer turns text into token ids and back for the vocabularies
// Seam runs:
//
//   - SentencePiece-style vocabularies (score-ordered merges with byte
//     fallback): llama2.c's tokenizer.bin and GGUF files whose
//     tokenizer.ggml.model is "llama" (type SentencePiece);
//   - byte-level BPE (the GPT-2 family: Llama 3, Qwen 2 and 3), from GGUF
//     files whose tokenizer.ggml.model is "gpt2" or from a Hugging Face
//     tokenizer.json, and the merge-ranked SentencePiece BPE of a Llama 2
//     style tokenizer.json (type BPE).
//
// Every tokenizer implements the Tokenizer interface. A vocabulary follows
// the semantics of the engine that defines its file format: llama2.c's
// run.c for tokenizer.bin, llama.cpp for GGUF, Hugging Face tokenizers for
// tokenizer.json. docs/tokenizer.md describes what is supported and the
// rules for special tokens, literal spans and decoding.
package tokenizer

// Tokenizer encodes text to token ids and decodes ids back to text.
// Implementations are immutable after construction and safe for concurrent
// use.
type Tokenizer interface {
	// Encode tokenizes text, with BOS first when bos is set and EOS last when
	// eos is set. Text that spells a special or added token becomes that
	// token (as Hugging Face's encode(text, add_special_tokens=False) and
	// llama.cpp's tokenize(text, parse_special=true) do), except for
	// llama2.c vocabularies, which never parse specials (as run.c).
	Encode(text string, bos, eos bool) []int
	// EncodeWith is Encode with options: inside opt.Literal spans no control
	// token is recognised, so user-supplied text cannot become control
	// tokens (added text tokens such as Qwen's <think> still are, as in
	// llama.cpp's parse_special=false and Hugging Face's
	// split_special_tokens=True).
	EncodeWith(text string, opt EncodeOptions) []int
	// Decode returns the raw bytes of token id following token prev (maybe
	// part of a UTF-8 character). Control tokens decode to "". prev matters
	// only for SentencePiece-style vocabularies, whose leading space is
	// dropped at the start of a text (prev < 0 or prev == BOS()).
	Decode(prev, id int) string
	// DecodeAll decodes a sequence as the start of a text: the raw bytes,
	// control tokens left out. DecodeAll(Encode(s, ...)) == s for text
	// without special tokens (after the vocabulary's normalisation, NFC for
	// Qwen's tokenizer.json).
	DecodeAll(ids []int) string
	// VocabSize is the number of ids (the highest id plus one).
	VocabSize() int
	// BOS and EOS are the beginning- and end-of-sequence ids, -1 when the
	// vocabulary has none.
	BOS() int
	EOS() int
	// AddBOS is the file's rule: whether a prompt starts with BOS.
	AddBOS() bool
	// IsEOG reports whether id ends generation (EOS, <|eot_id|>,
	// <|im_end|>, ...).
	IsEOG(id int) bool
	// Piece returns the text of token id: the decoded bytes of a normal
	// token (a SentencePiece word mark as a space, a byte piece spelled
	// <0xNN>), the content of a special token; "" when out of range.
	Piece(id int) string
}

// EncodeOptions control EncodeWith.
type EncodeOptions struct {
	BOS, EOS bool
	// Literal spans are byte ranges of the text in which no control token is
	// recognised (overlapping or unsorted spans are merged). Control tokens
	// are found only entirely outside them; text on both sides of a span
	// boundary is otherwise tokenized together, exactly as if the spans were
	// absent.
	Literal []Span
}

// Token types, as in GGUF's tokenizer.ggml.token_type and SentencePiece.
const (
	TypeUndefined   int32 = 0 // treated as normal
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4 // added text token: matched in text, decoded as its text
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// eogTexts are token texts that end generation whatever the file's EOS id,
// the list llama.cpp applies (llama-vocab.cpp, special_eog_ids) restricted to
// the families Seam runs, plus the end-of-turn and FIM separators it adds
// through eot/fim ids. A Hugging Face tokenizer.json gets the same list so
// that both sources of one model stop at the same tokens.
var eogTexts = map[string]bool{
	"<|eot_id|>":      true,
	"<|eom_id|>":      true,
	"<|im_end|>":      true,
	"<|end|>":         true,
	"<|endoftext|>":   true,
	"<|end_of_text|>": true,
	"<end_of_turn>":   true,
	"<EOT>":           true,
	"</s>":            true,
	"<|fim_pad|>":     true,
	"<|repo_name|>":   true,
	"<|file_sep|>":    true,
}
