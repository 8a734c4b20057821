package main

import (
	"strings"
	"testing"
)

func checkOpenAIRun(t *testing.T, r *openaiRun, runText string, promptTokens, chatPromptTokens int) {
	t.Helper()
	if len(r.Models) != 1 || r.Models[0] != "stories260K" {
		t.Errorf("models %v", r.Models)
	}
	// Same answer as seam run, token for token (60 tokens, both greedy).
	if r.Completion.Text != runText || r.Completion.Finish != "length" || r.Completion.Usage != (usageJSON{promptTokens, 60, promptTokens + 60}) {
		t.Errorf("completion %q %s %+v\nseam run %q (prompt %d tokens)", r.Completion.Text, r.Completion.Finish, r.Completion.Usage, runText, promptTokens)
	}
	if r.CompletionStream.Text != runText || r.CompletionStream.Finish != "length" || r.CompletionStream.Usage == nil || *r.CompletionStream.Usage != r.Completion.Usage {
		t.Errorf("streamed completion %q %s %+v", r.CompletionStream.Text, r.CompletionStream.Finish, r.CompletionStream.Usage)
	}
	// Chat: the fallback template's prompt, tokenized by Seam's tokenizer.
	if r.Chat.Role != "assistant" || r.Chat.Object != "chat.completion" || r.Chat.Text == "" || r.Chat.Usage.PromptTokens != chatPromptTokens ||
		r.Chat.Usage.TotalTokens != chatPromptTokens+r.Chat.Usage.CompletionTokens {
		t.Errorf("chat %+v, want %d prompt tokens", r.Chat, chatPromptTokens)
	}
	if r.ChatStream.Text != r.Chat.Text || r.ChatStream.Finish != r.Chat.Finish || r.ChatStream.Usage == nil || *r.ChatStream.Usage != r.Chat.Usage {
		t.Errorf("streamed chat %q %s %+v, unstreamed %q %s %+v", r.ChatStream.Text, r.ChatStream.Finish, r.ChatStream.Usage, r.Chat.Text, r.Chat.Finish, r.Chat.Usage)
	}
	// Stop: the text ends just before the stop string, which never shows.
	if i := strings.Index(runText, "Lily"); i < 0 || r.Stop.Text != runText[:i] || r.Stop.Finish != "stop" {
		t.Errorf("stop at Lily: %q %s; seam run %q", r.Stop.Text, r.Stop.Finish, runText)
	}
	for _, p := range r.StopStream.Pieces {
		if strings.Contains(p, "dog") || strings.Contains(p, "\n") {
			t.Errorf("a streamed piece leaks a stop string: %q", p)
		}
	}
	// The chat with stops "dog" and "\n", streamed and not: the greedy chat
	// text (40 tokens) up to the first stop. The stops must occur in it,
	// after its start, or this would check nothing.
	full, cut := r.Chat.Text, -1
	for _, s := range []string{"dog", "\n"} {
		if i := strings.Index(full, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	switch {
	case cut <= 0:
		t.Errorf("the greedy chat text %q holds neither stop (\"dog\", \"\\n\") after its start: choose stops that occur in it", full)
	case r.StopChat.Text != full[:cut] || r.StopChat.Finish != "stop":
		t.Errorf("chat stop: %q %s, want %q and stop", r.StopChat.Text, r.StopChat.Finish, full[:cut])
	case r.StopStream.Text != full[:cut] || r.StopStream.Finish != "stop":
		t.Errorf("streamed chat stop: %q %s, want %q and stop", r.StopStream.Text, r.StopStream.Finish, full[:cut])
	}
	if r.MaxTokens.Finish != "length" || r.MaxTokens.Usage.CompletionTokens != 7 {
		t.Errorf("max_completion_tokens 7: %+v", r.MaxTokens)
	}
	if r.Seed.A != r.Seed.B || r.Seed.A == r.Seed.C || r.Seed.A == "" {
		t.Errorf("seeds 42, 42, 43 at temperature 1: %q, %q, %q", r.Seed.A, r.Seed.B, r.Seed.C)
	}
	checkLogprobs(t, r)
	if r.Abort.Seen != 3 || r.Abort.After != runText[:len(r.Abort.After)] || r.Abort.Finish != "length" || r.Abort.After == "" {
		t.Errorf("after an aborted stream: %+v", r.Abort)
	}
	if !r.BadRequest.IsBadRequest || r.BadRequest.Status != 400 || r.BadRequest.Param != "n" || !strings.Contains(r.BadRequest.Message, "n = 2") {
		t.Errorf("n = 2: %+v", r.BadRequest)
	}
	if !r.NotFound.IsNotFound || r.NotFound.Status != 404 {
		t.Errorf("unknown model: %+v", r.NotFound)
	}
}

func checkLogprobs(t *testing.T, r *openaiRun) {
	t.Helper()
	lp := r.Logprobs
	var joined strings.Builder
	for i, c := range lp.Content {
		joined.WriteString(c.Token)
		// greedy: the chosen token is the most likely one, and its logprob
		// is the first alternative's
		if c.Logprob > 0 || len(c.TopLogprobs) != 3 || c.TopLogprobs[0].Token != c.Token || c.TopLogprobs[0].Logprob != c.Logprob ||
			c.TopLogprobs[1].Logprob > c.Logprob || len(c.Bytes) != len(c.Token) {
			t.Errorf("chat logprobs entry %d: %+v", i, c)
		}
	}
	if len(lp.Content) != lp.Usage.CompletionTokens || joined.String() != lp.Text {
		t.Errorf("chat logprobs: %d entries for %d tokens; tokens spell %q, text %q", len(lp.Content), lp.Usage.CompletionTokens, joined.String(), lp.Text)
	}
	ll := r.LegacyLogprobs.Logprobs
	if len(ll.Tokens) != 12 || len(ll.TokenLogprobs) != 12 || len(ll.TopLogprobs) != 12 || strings.Join(ll.Tokens, "") != r.LegacyLogprobs.Text {
		t.Errorf("completion logprobs: %+v for %q", ll, r.LegacyLogprobs.Text)
	}
	for i, top := range ll.TopLogprobs {
		if len(top) < 1 || len(top) > 2 || ll.TokenLogprobs[i] > 0 {
			t.Errorf("completion logprobs position %d: %v, %v", i, top, ll.TokenLogprobs[i])
		}
	}
}
