package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seamlm/seam/chat"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/tokenizer"
)

// startAPI runs `seam api --listen 127.0.0.1:0 args...` in this process and
// returns its base URL. It is stopped (as by a signal) at the end of the test,
// and must then exit cleanly.
func startAPI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := newRootCmd()
	pr, pw := io.Pipe()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{"api", "--listen", "127.0.0.1:0", "--poll", "100ms"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	url, err := servingURL(pr)
	if err != nil {
		cancel()
		t.Fatalf("seam api %v: %v (%v)", args, err, <-done)
	}
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("seam api %v exited with %v", args, err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("seam api %v did not stop within 15 s", args)
		}
	})
	return url
}

// servingURL reads the "serving ... on http://ADDR ..." line.
func servingURL(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut(line, " on ")
	if !ok {
		return "", fmt.Errorf("unexpected first line %q", line)
	}
	return strings.Fields(rest)[0], nil
}

type openaiRun struct {
	Models []string
	Chat   struct {
		Text, Role, Finish, Object string
		Usage                      usageJSON
	}
	ChatStream, CompletionStream, StopStream struct {
		Text, Finish string
		Usage        *usageJSON
		Chunks       int
		Pieces       []string
	}
	Completion struct {
		Text, Finish, Object string
		Usage                usageJSON
	}
	Stop      struct{ Text, Finish string }
	MaxTokens struct {
		Finish string
		Usage  usageJSON
	}
	Seed     struct{ A, B, C string }
	Logprobs struct {
		Text    string
		Usage   usageJSON
		Content []struct {
			Token       string
			Logprob     float64
			Bytes       []int
			TopLogprobs []struct {
				Token   string
				Logprob float64
			} `json:"top_logprobs"`
		}
	}
	LegacyLogprobs struct {
		Text     string
		Logprobs struct {
			Tokens        []string
			TokenLogprobs []float64            `json:"token_logprobs"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		}
	} `json:"legacyLogprobs"`
	Abort struct {
		Seen          int
		After, Finish string
	}
	BadRequest struct {
		Error, Message, Param string
		Status                int
		IsBadRequest          bool
	}
	NotFound struct {
		Status     int
		IsNotFound bool
	}
}

type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// The official openai npm client against seam api over stories260K, whole
// and split into 3 stages; greedy completions equal seam run's, token for
// token.
func TestAPIWithOpenAIClient(t *testing.T) {
	dir := testmodels.Dir(t)
	testmodels.ReferenceDir(t)
	modelPath, tokPath := filepath.Join(dir, testmodels.Stories260K), filepath.Join(dir, testmodels.Tok512)
	tok, err := tokenizer.LoadLlama2c(tokPath, 512)
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "Once upon a time"
	promptTokens := len(tok.Encode(prompt, tok.AddBOS(), false))
	rendered := chat.Fallback([]chat.Message{{Role: "system", Content: "You tell stories."}, {Role: "user", Content: "Tell me about a dog."}},
		chat.Options{AddGenerationPrompt: true})
	chatPromptTokens := len(tok.EncodeWith(rendered.Text, tokenizer.EncodeOptions{BOS: tok.AddBOS(), Literal: rendered.Literal}))
	for _, mode := range [][]string{nil, {"--split", "3"}} {
		t.Run(fmt.Sprintf("split=%v", mode), func(t *testing.T) {
			url := startAPI(t, append([]string{"--model", modelPath, "--tokenizer", tokPath}, mode...)...)
			out := testmodels.RunNode(t, 2*time.Minute, nil, "openai-api.mjs", url, "stories260K")
			var r openaiRun
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			run, err := seam(t, append([]string{"run", "--model", modelPath, "--tokenizer", tokPath, "-n", fmt.Sprint(promptTokens + 60 - 1), "--temperature", "0", prompt}, mode...)...)
			if err != nil {
				t.Fatal(err)
			}
			checkOpenAIRun(t, &r, strings.TrimSuffix(strings.TrimPrefix(run, prompt), "\n"), promptTokens, chatPromptTokens)
		})
	}
}

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
	if full := r.Chat.Text; strings.Contains(full, "\n") || strings.Contains(full, "dog") {
		cut := len(full)
		for _, s := range []string{"dog", "\n"} {
			if i := strings.Index(full, s); i >= 0 && i < cut {
				cut = i
			}
		}
		if r.StopStream.Text != full[:cut] || r.StopStream.Finish != "stop" {
			t.Errorf("streamed stop: %q %s, want %q", r.StopStream.Text, r.StopStream.Finish, full[:cut])
		}
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

// SIGTERM and SIGINT on seam api: it stops accepting, ends the stream in
// flight with an error event (never [DONE]) and exits 0, saying so.
func TestAPISignal(t *testing.T) {
	dir := testmodels.Dir(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		child := exec.Command(os.Args[0], "-test.run=^TestAPIChild$")
		child.Env = append(os.Environ(), "SEAM_TEST_API_CHILD="+strings.Join([]string{"api", "--listen", "127.0.0.1:0", "--split", "3",
			"--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", filepath.Join(dir, testmodels.Tok512), "--link-latency-ms", "2"}, "\x1f"))
		stdout, _ := child.StdoutPipe()
		var stderr strings.Builder
		child.Stderr = &stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		url, err := servingURL(stdout)
		if err != nil {
			child.Process.Kill()
			t.Fatalf("%v: %v\n%s", sig, err, stderr.String())
		}
		go io.Copy(io.Discard, stdout)
		resp, err := http.Post(url+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"stories260K","prompt":"Once upon a time","max_tokens":480,"stream":true}`))
		if err != nil {
			child.Process.Kill()
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for i := 0; i < 3 && sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "data: ") {
				i++
			}
		}
		child.Process.Signal(sig)
		var last string
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				last = sc.Text()
			}
		}
		resp.Body.Close()
		exited := make(chan error, 1)
		go func() { exited <- child.Wait() }()
		select {
		case err := <-exited:
			if err != nil || !strings.Contains(stderr.String(), "stopped cleanly") {
				t.Errorf("%v: exit %v, stderr:\n%s", sig, err, stderr.String())
			}
		case <-time.After(15 * time.Second):
			child.Process.Kill()
			t.Fatalf("%v: seam api still running 15 s later", sig)
		}
		if !strings.Contains(last, `"error"`) || !strings.Contains(last, "shutting down") {
			t.Errorf("%v: the stream's last event is %q, want an error saying the server is shutting down", sig, last)
		}
	}
}

// TestAPIChild is not a test: TestAPISignal runs the test binary with
// SEAM_TEST_API_CHILD set to make it a `seam` process it can signal.
func TestAPIChild(t *testing.T) {
	args := os.Getenv("SEAM_TEST_API_CHILD")
	if args == "" {
		t.Skip("a helper process for TestAPISignal")
	}
	cmd := newRootCmd()
	cmd.SetArgs(strings.Split(args, "\x1f"))
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "seam:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
