package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/seamlm/seam/chat"
)

// Limits on a request's contents, beyond the body size.
const (
	maxStops       = 16
	maxStopBytes   = 256
	maxMessages    = 4096
	maxCompletionL = 5 // legacy completions: logprobs 0..5, as OpenAI
)

// Every field a request may carry is listed here with what Seam does with
// it. A field that is not listed is refused by name. A field accepted only
// at its default is refused, by name, at any other value: Seam never
// silently ignores a field that would change the answer.
var (
	// sampling and output fields shared by both endpoints.
	commonFields = []string{"model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "seed", "stop", "logprobs", "n"}
	chatFields   = append([]string{"messages", "max_completion_tokens", "top_logprobs"}, commonFields...)
	legacyFields = append([]string{"prompt", "echo", "best_of", "suffix"}, commonFields...)
	// defaults: fields accepted only at the value that changes nothing.
	defaultOnly = map[string]string{
		"frequency_penalty":   "0",
		"presence_penalty":    "0",
		"logit_bias":          "{}",
		"parallel_tool_calls": "false or absent",
		"store":               "false",
	}
	// ignored: accepted at any value because they change nothing in the
	// answer. user is an end-user id for a provider's abuse monitoring.
	ignoredFields = []string{"user"}
	// why, for the refusals clients meet most.
	refusalReasons = map[string]string{
		"tools": "Seam has no tool calling", "tool_choice": "Seam has no tool calling", "functions": "Seam has no tool calling",
		"function_call": "Seam has no tool calling", "response_format": "Seam has no constrained (JSON) output",
		"audio": "Seam generates text only", "modalities": "Seam generates text only",
	}
)

// decodeBody reads a JSON object of at most limit bytes into fields, and
// checks that it is valid UTF-8 and well-formed JSON.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64) (map[string]json.RawMessage, []byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, nil, &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalid, Code: ptr("request_too_large"),
			Message: fmt.Sprintf("request body is larger than this server's limit of %d bytes (--max-body)", limit)}
	case err != nil:
		return nil, nil, badRequest("", "reading the request body: %v", err)
	}
	if !utf8.Valid(body) {
		return nil, nil, badRequest("", "request body is not valid UTF-8 (first invalid byte at offset %d); JSON must be UTF-8", invalidUTF8At(body))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, nil, jsonError("", err)
	}
	if fields == nil {
		return nil, nil, badRequest("", "request body must be a JSON object, got null")
	}
	return fields, body, nil
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// jsonError turns a decoding error into a 400 that names the field, the
// type wanted and what was given.
func jsonError(where string, err error) *apiError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := strings.TrimPrefix(te.Field, "common.") // the embedded struct's name is not the client's
		if where != "" {
			field = strings.TrimSuffix(where+"."+field, ".")
		}
		if field == "" {
			return badRequest("", "request body must be a JSON object, got %s", te.Value)
		}
		e := badRequest(field, "%s: want %s, got %s", field, jsonType(te.Type.String()), te.Value)
		e.Code = ptr("invalid_type")
		return e
	case errors.As(err, &se):
		return badRequest("", "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "malformed JSON: the body ends in the middle of a value")
	}
	var ae *apiError
	if errors.As(err, &ae) { // from a custom decoder, complete with its code
		return ae
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return badRequest(fe.field, "%s", fe.msg)
	}
	return badRequest(where, "malformed request: %v", err)
}

func jsonType(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "int", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	}
	if strings.HasPrefix(goType, "[]") {
		return "an array"
	}
	return "an object"
}

// fieldError is a decoding error about one field, from custom decoders.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.msg }

// checkFields refuses, by name, every field that is not in allowed,
// defaultOnly or ignoredFields, and every defaultOnly field at another value.
func checkFields(fields map[string]json.RawMessage, allowed []string) *apiError {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names) // report the same field first every time
	for _, k := range names {
		v := fields[k]
		switch {
		case contains(allowed, k), contains(ignoredFields, k):
		case defaultOnly[k] != "":
			if !isDefault(v) {
				return unsupportedValue(k, fmt.Sprintf("only the default (%s) is accepted", defaultOnly[k]))
			}
		default:
			why := refusalReasons[k]
			if why == "" {
				why = "Seam does not implement this field"
			}
			return unsupported(k, why)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// isDefault: null, false, 0, an empty object or array.
func isDefault(v json.RawMessage) bool {
	switch s := string(bytes.TrimSpace(v)); s {
	case "null", "false", "{}", "[]":
		return true
	default:
		var f float64
		return json.Unmarshal(v, &f) == nil && f == 0
	}
}

// stopList is OpenAI's stop: a string, an array of strings, or null.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return &fieldError{"stop", "stop: want a string or an array of strings"}
	}
	*s = many
	return nil
}

func (s stopList) check() *apiError {
	if len(s) > maxStops {
		return badRequest("stop", "stop: %d sequences, at most %d", len(s), maxStops)
	}
	for i, x := range s {
		if x == "" || len(x) > maxStopBytes {
			return badRequest("stop", "stop[%d]: want 1..%d bytes, got %d", i, maxStopBytes, len(x))
		}
	}
	return nil
}

// streamOptions is OpenAI's stream_options.
type streamOptions struct {
	IncludeUsage       bool
	IncludeObfuscation *bool
}

// UnmarshalJSON decodes stream_options strictly, like the request itself:
// a key other than include_usage and include_obfuscation, spelled exactly
// (Go's decoder would match "Include_Usage" too), is refused by name, so
// that a misspelt option is never silently ignored.
func (o *streamOptions) UnmarshalJSON(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		e := badRequest("stream_options", "stream_options: want an object, got %s", jsonKind(b))
		e.Code = ptr("invalid_type")
		return e
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k != "include_usage" && k != "include_obfuscation" {
			return unsupported("stream_options."+k, "stream_options takes include_usage and include_obfuscation only")
		}
	}
	*o = streamOptions{}
	for _, k := range names {
		v := fields[k]
		if string(bytes.TrimSpace(v)) == "null" {
			continue
		}
		var x bool
		if json.Unmarshal(v, &x) != nil {
			e := badRequest("stream_options."+k, "stream_options.%s: want a boolean, got %s", k, jsonKind(v))
			e.Code = ptr("invalid_type")
			return e
		}
		if k == "include_usage" {
			o.IncludeUsage = x
		} else {
			o.IncludeObfuscation = &x
		}
	}
	return nil
}

// jsonKind names the kind of a JSON value for error messages, as Go's
// decoder does ("string", "number", ...), quoting short scalars.
func jsonKind(v []byte) string {
	s := bytes.TrimSpace(v)
	kind := "number"
	switch {
	case len(s) == 0:
		return "nothing"
	case s[0] == '"':
		kind = "string"
	case s[0] == '{':
		return "object"
	case s[0] == '[':
		return "array"
	case s[0] == 't' || s[0] == 'f':
		kind = "bool"
	case s[0] == 'n':
		return "null"
	}
	if len(s) <= 32 {
		return kind + " " + string(s)
	}
	return kind
}

// common are the fields both endpoints share.
type common struct {
	Model         *string        `json:"model"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	MaxTokens     *int64         `json:"max_tokens"`
	Temperature   *float64       `json:"temperature"`
	TopP          *float64       `json:"top_p"`
	Seed          *int64         `json:"seed"`
	Stop          stopList       `json:"stop"`
	N             *int64         `json:"n"`
}

func (c *common) check() *apiError {
	switch {
	case c.Model == nil || *c.Model == "":
		return badRequest("model", "model is required")
	case c.N != nil && *c.N != 1:
		return unsupportedValue("n", fmt.Sprintf("one choice per request only (n = 1), got n = %d", *c.N))
	case c.Temperature != nil && (math.IsNaN(*c.Temperature) || *c.Temperature < 0 || *c.Temperature > 2):
		return badRequest("temperature", "temperature: want a number in [0, 2], got %v", *c.Temperature)
	case c.TopP != nil && (math.IsNaN(*c.TopP) || *c.TopP <= 0 || *c.TopP > 1):
		return badRequest("top_p", "top_p: want a number in (0, 1], got %v", *c.TopP)
	case c.StreamOptions != nil && !c.Stream:
		return badRequest("stream_options", "stream_options is only allowed with stream: true")
	case c.StreamOptions != nil && c.StreamOptions.IncludeObfuscation != nil && *c.StreamOptions.IncludeObfuscation:
		return unsupportedValue("stream_options.include_obfuscation", "Seam does not pad stream events (false is accepted)")
	}
	return c.Stop.check()
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	common
	Messages            []message `json:"messages"`
	MaxCompletionTokens *int64    `json:"max_completion_tokens"`
	Logprobs            *bool     `json:"logprobs"`
	TopLogprobs         *int64    `json:"top_logprobs"`
}

// message is one chat message: role and content, nothing else.
type message struct {
	Role    string
	Content string
}

func (m *message) UnmarshalJSON(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		return &fieldError{"messages", "messages: each message must be an object with role and content"}
	}
	for k := range fields {
		if k != "role" && k != "content" {
			return &fieldError{"messages", fmt.Sprintf("messages: field %q of a message is not supported by Seam (only role and content)", k)}
		}
	}
	if err := json.Unmarshal(fields["role"], &m.Role); err != nil {
		return &fieldError{"messages", "messages: role must be a string"}
	}
	content, ok := fields["content"]
	if !ok || string(content) == "null" {
		return &fieldError{"messages", "messages: content is required"}
	}
	if json.Unmarshal(content, &m.Content) == nil {
		return nil
	}
	var parts []map[string]json.RawMessage
	if err := json.Unmarshal(content, &parts); err != nil {
		return &fieldError{"messages", "messages: content must be a string or an array of text parts"}
	}
	var sb strings.Builder
	for _, p := range parts {
		var typ, text string
		if json.Unmarshal(p["type"], &typ) != nil || typ != "text" || len(p) != 2 || json.Unmarshal(p["text"], &text) != nil {
			return &fieldError{"messages", fmt.Sprintf("messages: content part of type %q is not supported by Seam (only {\"type\": \"text\", \"text\": ...})", typ)}
		}
		sb.WriteString(text)
	}
	m.Content = sb.String()
	return nil
}

// roles maps OpenAI's roles to the template's; developer is OpenAI's newer
// name for system.
var roles = map[string]string{"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}

func (r *chatRequest) check() *apiError {
	if err := r.common.check(); err != nil {
		return err
	}
	switch {
	case len(r.Messages) == 0:
		return badRequest("messages", "messages: at least one message is required")
	case len(r.Messages) > maxMessages:
		return badRequest("messages", "messages: %d messages, at most %d", len(r.Messages), maxMessages)
	case r.MaxTokens != nil && r.MaxCompletionTokens != nil && *r.MaxTokens != *r.MaxCompletionTokens:
		return badRequest("max_completion_tokens", "max_tokens (%d) and max_completion_tokens (%d) disagree; give one", *r.MaxTokens, *r.MaxCompletionTokens)
	case r.TopLogprobs != nil && (*r.TopLogprobs < 0 || *r.TopLogprobs > 20):
		return badRequest("top_logprobs", "top_logprobs: want 0..20, got %d", *r.TopLogprobs)
	case r.TopLogprobs != nil && (r.Logprobs == nil || !*r.Logprobs):
		return badRequest("top_logprobs", "top_logprobs needs logprobs: true")
	}
	for i, m := range r.Messages {
		if roles[m.Role] == "" {
			return badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q: want system, developer, user or assistant", i, m.Role)
		}
	}
	if r.MaxCompletionTokens != nil {
		r.MaxTokens = r.MaxCompletionTokens
	}
	return nil
}

func (r *chatRequest) chatMessages() []chat.Message {
	out := make([]chat.Message, len(r.Messages))
	for i, m := range r.Messages {
		out[i] = chat.Message{Role: roles[m.Role], Content: m.Content}
	}
	return out
}

// legacyRequest is the body of POST /v1/completions.
type legacyRequest struct {
	common
	Prompt   *prompt `json:"prompt"`
	Logprobs *int64  `json:"logprobs"`
	Echo     bool    `json:"echo"`
	BestOf   *int64  `json:"best_of"`
	Suffix   *string `json:"suffix"`
}

// prompt is a completion's prompt: text, or token ids, one prompt only.
type prompt struct {
	Text string
	IDs  []int
}

func (p *prompt) UnmarshalJSON(b []byte) error {
	if json.Unmarshal(b, &p.Text) == nil {
		return nil
	}
	var texts []string
	if json.Unmarshal(b, &texts) == nil {
		if len(texts) != 1 {
			return &fieldError{"prompt", fmt.Sprintf("prompt: %d prompts given; Seam runs one prompt per request", len(texts))}
		}
		p.Text = texts[0]
		return nil
	}
	if json.Unmarshal(b, &p.IDs) == nil {
		return nil
	}
	var lists [][]int
	if json.Unmarshal(b, &lists) == nil {
		if len(lists) != 1 {
			return &fieldError{"prompt", fmt.Sprintf("prompt: %d prompts given; Seam runs one prompt per request", len(lists))}
		}
		p.IDs = lists[0]
		return nil
	}
	return &fieldError{"prompt", "prompt: want a string, an array of one string, or an array of token ids"}
}

func (r *legacyRequest) check() *apiError {
	if err := r.common.check(); err != nil {
		return err
	}
	switch {
	case r.Prompt == nil:
		return badRequest("prompt", "prompt is required")
	case r.Echo:
		return unsupportedValue("echo", "the prompt is not echoed back (false is accepted)")
	case r.BestOf != nil && *r.BestOf != 1:
		return unsupportedValue("best_of", "one candidate per request only (best_of = 1)")
	case r.Suffix != nil && *r.Suffix != "":
		return unsupportedValue("suffix", "Seam does not insert text (empty or null is accepted)")
	case r.Logprobs != nil && (*r.Logprobs < 0 || *r.Logprobs > maxCompletionL):
		return badRequest("logprobs", "logprobs: want 0..%d, got %d", maxCompletionL, *r.Logprobs)
	}
	return nil
}
