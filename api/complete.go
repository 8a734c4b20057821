package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/seamlm/seam/chat"
	"github.com/seamlm/seam/scheduler"
	"github.com/seamlm/seam/tokenizer"
)

// job is a validated request, ready for the scheduler.
type job struct {
	chat         bool
	id           string
	created      int64
	model        string
	stream       bool
	includeUsage bool
	logprobs     bool
	req          scheduler.Request
}

// defaultLegacyMaxTokens is OpenAI's documented default for /v1/completions;
// chat completions default to the rest of the context.
const defaultLegacyMaxTokens = 16

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, id string) int {
	var req chatRequest
	if e := s.decode(w, r, chatFields, &req); e != nil {
		return fail(w, e)
	}
	if e := req.check(); e != nil {
		return fail(w, e)
	}
	if e := s.checkModel(*req.Model); e != nil {
		return fail(w, e)
	}
	rendered, err := s.render(req.chatMessages())
	if err != nil {
		return fail(w, badRequest("messages", "rendering the chat template: %v", err))
	}
	if e := s.tooLong("messages", rendered.Text); e != nil {
		return fail(w, e)
	}
	j := s.newJob(true, id, &req.common, encodePrompt(s.cfg.Tokenizer, rendered))
	if req.Logprobs != nil && *req.Logprobs {
		j.logprobs, j.req.Logprobs = true, true
		if req.TopLogprobs != nil {
			j.req.TopLogprobs = int(*req.TopLogprobs)
		}
	}
	return s.run(w, r, j, req.MaxTokens, s.cfg.ContextLen-len(j.req.Prompt))
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, id string) int {
	var req legacyRequest
	if e := s.decode(w, r, legacyFields, &req); e != nil {
		return fail(w, e)
	}
	if e := req.check(); e != nil {
		return fail(w, e)
	}
	if e := s.checkModel(*req.Model); e != nil {
		return fail(w, e)
	}
	ids := req.Prompt.IDs
	if e := s.tooLong("prompt", req.Prompt.Text); e != nil {
		return fail(w, e)
	}
	if ids == nil {
		ids = encodePrompt(s.cfg.Tokenizer, chat.Rendered{Text: req.Prompt.Text})
	}
	for i, t := range ids {
		if t < 0 || t >= s.cfg.Tokenizer.VocabSize() {
			return fail(w, badRequest("prompt", "prompt[%d]: token id %d is outside the vocabulary of %d", i, t, s.cfg.Tokenizer.VocabSize()))
		}
	}
	j := s.newJob(false, id, &req.common, ids)
	if req.Logprobs != nil {
		j.logprobs, j.req.Logprobs, j.req.TopLogprobs = true, true, int(*req.Logprobs)
	}
	return s.run(w, r, j, req.MaxTokens, defaultLegacyMaxTokens)
}

// decode reads the body strictly: fields not in allowed are refused by
// name, then the typed decode reports wrong types by field.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, allowed []string, into any) *apiError {
	fields, body, e := decodeBody(w, r, s.cfg.MaxBody)
	if e != nil {
		return e
	}
	if e := checkFields(fields, allowed); e != nil {
		return e
	}
	if err := json.Unmarshal(body, into); err != nil {
		return jsonError("", err)
	}
	return nil
}

// tooLong refuses a prompt that cannot fit the context whatever its
// tokenization: no token covers more than maxPiece bytes. param names the
// prompt's field.
func (s *Server) tooLong(param, text string) *apiError {
	if limit := s.maxPiece * s.cfg.ContextLen; len(text) > limit {
		e := badRequest(param, "This model's maximum context length is %d tokens; the prompt is %d bytes, and no token of this vocabulary is longer than %d bytes, so it is at least %d tokens. Please shorten the prompt.",
			s.cfg.ContextLen, len(text), s.maxPiece, (len(text)+s.maxPiece-1)/s.maxPiece)
		e.Code = ptr("context_length_exceeded")
		return e
	}
	return nil
}

func (s *Server) checkModel(name string) *apiError {
	if name != s.cfg.ModelName {
		return modelNotFound(name, s.cfg.ModelName)
	}
	return nil
}

func (s *Server) render(msgs []chat.Message) (chat.Rendered, error) {
	tok := s.cfg.Tokenizer
	opt := chat.Options{AddGenerationPrompt: true, BOS: tok.Piece(tok.BOS()), EOS: tok.Piece(tok.EOS())} // Piece(-1) is ""
	if s.cfg.Template == nil {
		return chat.Fallback(msgs, opt), nil
	}
	return s.cfg.Template.Render(msgs, opt)
}

// encodePrompt tokenizes a rendered prompt, with BOS by the vocabulary's
// rule. Inside the Literal spans (message content) no special token is
// recognised, so a user cannot type control tokens into the prompt.
func encodePrompt(tok Tokenizer, r chat.Rendered) []int {
	return tok.EncodeWith(r.Text, tokenizer.EncodeOptions{BOS: tok.AddBOS(), Literal: r.Literal})
}

func (s *Server) newJob(isChat bool, id string, c *common, prompt []int) *job {
	j := &job{chat: isChat, id: id, created: time.Now().Unix(), model: s.cfg.ModelName, stream: c.Stream}
	j.includeUsage = c.StreamOptions != nil && c.StreamOptions.IncludeUsage
	j.req = scheduler.Request{Prompt: prompt, Temperature: 1, TopP: 1, Stop: c.Stop}
	if c.Temperature != nil {
		j.req.Temperature = *c.Temperature
	}
	if c.TopP != nil {
		j.req.TopP = *c.TopP
	}
	seed := rand.Uint64()
	if c.Seed != nil {
		seed = uint64(*c.Seed)
	}
	j.req.Seed = &seed
	return j
}

// promptParam is the request field that holds the prompt.
func (j *job) promptParam() string {
	if j.chat {
		return "messages"
	}
	return "prompt"
}

// run checks the token budget against the context, admits the request and
// generates, streaming or not. It returns the HTTP status sent.
func (s *Server) run(w http.ResponseWriter, r *http.Request, j *job, maxTokens *int64, def int) int {
	ctxLen, n := s.cfg.ContextLen, len(j.req.Prompt)
	want := int64(min(def, ctxLen-n))
	if maxTokens != nil {
		if *maxTokens < 1 {
			return fail(w, badRequest("max_tokens", "max_tokens: want at least 1, got %d", *maxTokens))
		}
		want = *maxTokens
	}
	if n == 0 {
		return fail(w, badRequest(j.promptParam(), "the prompt is empty"))
	}
	if int64(n) > int64(ctxLen) || want > int64(ctxLen-n) || want < 1 {
		return fail(w, contextExceeded(j.promptParam(), ctxLen, n, int(max(0, min(want, 1<<40)))))
	}
	j.req.MaxTokens = int(want)
	release, e := s.admit.acquire(r.Context())
	if e != nil {
		return fail(w, e)
	}
	defer release()
	s.metrics.promptTokens.Add(float64(n))
	if j.stream {
		return s.runStream(w, r.Context(), j)
	}
	res, err := s.sched.Run(r.Context(), j.req, nil)
	s.metrics.completed(res.CompletionTokens)
	if err != nil {
		return fail(w, s.runError(r.Context(), j, err))
	}
	writeJSON(w, http.StatusOK, j.response(res))
	return http.StatusOK
}

// runError maps a failed generation to what the client is told.
func (s *Server) runError(ctx context.Context, j *job, err error) *apiError {
	switch {
	case s.closing.Err() != nil:
		return unavailable("the server is shutting down; the request was aborted")
	case ctx.Err() != nil:
		return &apiError{Status: 499, Type: typeInvalid, Message: "client closed the request"}
	case errors.Is(err, scheduler.ErrUnavailable):
		s.log.Warn("request failed: a stage is down", "id", j.id, "err", err)
		return unavailable(err.Error())
	case errors.Is(err, scheduler.ErrInvalid):
		return badRequest("", "%v", err)
	case errors.Is(err, scheduler.ErrBusy):
		s.log.Warn("request refused: no capacity", "id", j.id, "err", err)
		return &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: ptr("kv_budget_exceeded"),
			Message: fmt.Sprintf("server busy: %v; retry later", err)}
	}
	s.log.Error("request failed", "id", j.id, "err", err)
	return internal(err.Error())
}

func fail(w http.ResponseWriter, e *apiError) int {
	if e.Status != 499 {
		writeError(w, e)
	}
	return e.Status
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
