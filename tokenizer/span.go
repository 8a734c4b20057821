package tokenizer

// Span is a byte range [Start, End) of a text. Encoders take spans of text
// that must be tokenized as literal text, never as special (control) tokens:
// the content a user wrote inside a chat message, for example.
type Span struct {
	Start, End int
}
