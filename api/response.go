package api

import (
	"math"

	"github.com/seamlm/seam/scheduler"
)

// Response shapes, as OpenAI's API reference names them.

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage,omitempty"`
}

// choice serves both endpoints: chat uses Message (or Delta when
// streaming), legacy completions use Text.
type choice struct {
	Index        int        `json:"index"`
	Message      *chatMsg   `json:"message,omitempty"`
	Delta        *chatDelta `json:"delta,omitempty"`
	Text         *string    `json:"text,omitempty"`
	Logprobs     any        `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chatMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// Chat logprobs.
type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
}

type tokenLogprob struct {
	Token       string         `json:"token"`
	Logprob     float64        `json:"logprob"`
	Bytes       []int          `json:"bytes"`
	TopLogprobs []topLogprobCh `json:"top_logprobs"`
}

type topLogprobCh struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// Legacy completion logprobs.
type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func (j *job) object(chunk bool) string {
	switch {
	case j.chat && chunk:
		return "chat.completion.chunk"
	case j.chat:
		return "chat.completion"
	}
	return "text_completion"
}

func (j *job) prefix() string {
	if j.chat {
		return "chatcmpl-"
	}
	return "cmpl-"
}

func (j *job) envelope(chunk bool, c choice) completion {
	return completion{ID: j.prefix() + j.id, Object: j.object(chunk), Created: j.created, Model: j.model, Choices: []choice{c}}
}

// response is the whole answer of a non-streamed request.
func (j *job) response(res scheduler.Result) completion {
	reason := res.FinishReason
	c := choice{FinishReason: &reason, Logprobs: j.logprobsOf(res.Tokens, 0)}
	if j.chat {
		c.Message = &chatMsg{Role: "assistant", Content: res.Text}
	} else {
		c.Text = &res.Text
	}
	out := j.envelope(false, c)
	out.Usage = usageOf(res)
	return out
}

func usageOf(res scheduler.Result) *usage {
	return &usage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens}
}

// chunk is one streamed piece of text (and its tokens' logprobs).
func (j *job) chunk(c scheduler.Chunk, offset int) completion {
	text := c.Text
	ch := choice{Logprobs: j.logprobsOf(c.Tokens, offset)}
	if j.chat {
		ch.Delta = &chatDelta{Content: &text}
	} else {
		ch.Text = &text
	}
	return j.envelope(true, ch)
}

// first is a chat stream's opening chunk: the assistant role, no text.
func (j *job) first() completion {
	empty := ""
	return j.envelope(true, choice{Delta: &chatDelta{Role: "assistant", Content: &empty}})
}

// last is a stream's closing chunk, carrying the finish reason.
func (j *job) last(reason string) completion {
	ch := choice{FinishReason: &reason}
	if j.chat {
		ch.Delta = &chatDelta{}
	} else {
		empty := ""
		ch.Text = &empty
	}
	return j.envelope(true, ch)
}

// usageChunk is what stream_options.include_usage adds before [DONE]: no
// choices, the usage of the whole request.
func (j *job) usageChunk(res scheduler.Result) completion {
	return completion{ID: j.prefix() + j.id, Object: j.object(true), Created: j.created, Model: j.model, Choices: []choice{}, Usage: usageOf(res)}
}

// logprobsOf renders tokens' logprobs in the endpoint's shape, or nil when
// they were not requested. offset is the byte offset of the first token's
// text in the completion (legacy text_offset).
func (j *job) logprobsOf(tokens []scheduler.Token, offset int) any {
	if !j.logprobs {
		return nil
	}
	if j.chat {
		lp := chatLogprobs{Content: []tokenLogprob{}}
		for _, t := range tokens {
			tl := tokenLogprob{Token: t.Text, Logprob: finite(t.Logprob), Bytes: byteList(t.Text), TopLogprobs: []topLogprobCh{}}
			for _, a := range t.Top {
				tl.TopLogprobs = append(tl.TopLogprobs, topLogprobCh{Token: a.Text, Logprob: finite(a.Logprob), Bytes: byteList(a.Text)})
			}
			lp.Content = append(lp.Content, tl)
		}
		return lp
	}
	lp := legacyLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, t := range tokens {
		lp.Tokens = append(lp.Tokens, t.Text)
		lp.TokenLogprobs = append(lp.TokenLogprobs, finite(t.Logprob))
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += len(t.Text)
		top := map[string]float64{}
		for _, a := range t.Top {
			if _, dup := top[a.Text]; !dup {
				top[a.Text] = finite(a.Logprob)
			}
		}
		lp.TopLogprobs = append(lp.TopLogprobs, top)
	}
	return lp
}

// byteList is a token's raw bytes as OpenAI gives them (a token may be part
// of a UTF-8 character, which its text alone cannot show).
func byteList(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

// finite keeps JSON encodable: a probability that underflowed to zero has
// logprob -inf, reported as -9999 (OpenAI's convention).
func finite(x float64) float64 {
	if math.IsInf(x, -1) || math.IsNaN(x) {
		return -9999
	}
	return x
}
