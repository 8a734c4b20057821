package api

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// apiError is an error in OpenAI's shape, with the HTTP status it goes with.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

// Error types, as OpenAI names them (and Seam's own for a stage that is down).
const (
	typeInvalid     = "invalid_request_error"
	typeNotFound    = "not_found_error"
	typeRateLimit   = "rate_limit_error"
	typeUnavailable = "service_unavailable_error"
	typeServer      = "server_error"
)

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// badRequest is a 400 about one request field (param may be "").
func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: typeInvalid, Param: ptr(param), Message: fmt.Sprintf(format, args...)}
}

// unsupported is the 400 for a field Seam does not implement at all
// (OpenAI's code for a parameter a model does not take).
func unsupported(param, why string) *apiError {
	e := badRequest(param, "%s is not supported by Seam: %s", param, why)
	e.Code = ptr("unsupported_parameter")
	return e
}

// unsupportedValue is the 400 for a field Seam takes only at some values
// (n = 1, presence_penalty 0, ...), given another: OpenAI's code for a
// parameter a model takes only at its default.
func unsupportedValue(param, why string) *apiError {
	e := badRequest(param, "%s: this value is not supported by Seam: %s", param, why)
	e.Code = ptr("unsupported_value")
	return e
}

// contextExceeded is the 400 for a prompt and max_tokens past the context;
// param is the prompt's field ("messages" or "prompt").
func contextExceeded(param string, limit, prompt, completion int) *apiError {
	e := badRequest(param, "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d for the completion). Please reduce the prompt or max_tokens.",
		limit, prompt+completion, prompt, completion)
	e.Code = ptr("context_length_exceeded")
	return e
}

func modelNotFound(name, have string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: typeInvalid, Param: ptr("model"), Code: ptr("model_not_found"),
		Message: fmt.Sprintf("The model %q does not exist; this server serves %q.", name, have)}
}

func unavailable(msg string) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: ptr("stage_unavailable"), Message: msg}
}

func internal(msg string) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Message: msg}
}

// errorBody is the JSON body (and the data of a stream's error event).
func (e *apiError) body() []byte {
	b, _ := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{e})
	return b
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(e.Status)
	w.Write(append(e.body(), '\n'))
}
