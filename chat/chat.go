// Package chat renders a conversation into the prompt text a model expects,
// with the model's own chat template or, for models without one, a plain
// documented fallback. It marks which byte ranges of the prompt came from
// message content, so that a tokenizer can keep a user's text from ever
// becoming control tokens while the template's own markers do.
package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/seamlm/seam/tokenizer"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Options are the variables a template sees besides the messages.
type Options struct {
	AddGenerationPrompt bool   // end with the opening of an assistant turn
	BOS, EOS            string // the vocabulary's BOS and EOS token text
}

// Rendered is a prompt rendered from a conversation.
type Rendered struct {
	Text string
	// Literal lists the byte ranges of Text copied from message content, in
	// order and not overlapping. Special-token text inside them is text.
	Literal []tokenizer.Span
}

// Fallback renders a conversation for a model that carries no chat template:
//
//	SYSTEM\n\n            (the content of each system message, if any)
//	User: CONTENT\n
//	Assistant: CONTENT\n
//	Assistant:            (when AddGenerationPrompt is set)
//
// Roles other than system, user and assistant are written with their name
// capitalised ("Tool: ..."). No BOS is written: the tokenizer adds it by the
// vocabulary's own rule.
func Fallback(msgs []Message, opt Options) Rendered {
	var r Rendered
	var b strings.Builder
	lit := func(s string) {
		start := b.Len()
		b.WriteString(s)
		if b.Len() > start {
			r.Literal = append(r.Literal, tokenizer.Span{Start: start, End: b.Len()})
		}
	}
	for _, m := range msgs {
		if m.Role == "system" {
			lit(m.Content)
			b.WriteString("\n\n")
			continue
		}
		b.WriteString(roleLabel(m.Role))
		b.WriteString(": ")
		lit(m.Content)
		b.WriteString("\n")
	}
	if opt.AddGenerationPrompt {
		b.WriteString("Assistant:")
	}
	r.Text = b.String()
	return r
}

func roleLabel(role string) string {
	if role == "" {
		return "Unknown"
	}
	return strings.ToUpper(role[:1]) + role[1:]
}

// ParseMessages reads a conversation from JSON: an array of {"role": ...,
// "content": ...} objects, or an object {"messages": [...]} (the shape of an
// OpenAI chat request body). Fields Seam does not support (tool_calls, name,
// content given as a list of parts, ...) are refused by name rather than
// dropped.
func ParseMessages(data []byte) ([]Message, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' {
		var body map[string]json.RawMessage
		if err := json.Unmarshal(data, &body); err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
		for k := range body {
			if k != "messages" {
				return nil, fmt.Errorf("messages: field %q is not supported (only \"messages\")", k)
			}
		}
		data = body["messages"]
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("messages: want a JSON array of {\"role\", \"content\"} objects: %w", err)
	}
	if len(raw) > MaxMessages {
		return nil, fmt.Errorf("messages: %d messages, more than the %d allowed", len(raw), MaxMessages)
	}
	msgs := make([]Message, len(raw))
	for i, m := range raw {
		for k := range m {
			if k != "role" && k != "content" {
				return nil, fmt.Errorf("messages[%d]: field %q is not supported (only \"role\" and \"content\")", i, k)
			}
		}
		if err := json.Unmarshal(m["role"], &msgs[i].Role); err != nil || msgs[i].Role == "" {
			return nil, fmt.Errorf("messages[%d]: \"role\" must be a non-empty string", i)
		}
		if c, ok := m["content"]; ok && string(bytes.TrimSpace(c)) != "null" {
			if err := json.Unmarshal(c, &msgs[i].Content); err != nil {
				return nil, fmt.Errorf("messages[%d]: \"content\" must be a string (lists of content parts are not supported): %w", i, err)
			}
		}
	}
	return msgs, nil
}
