package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every hostile or unsupported request gets a 4xx in OpenAI's error shape
// with a message that says what is wrong, and the server keeps serving.
func TestHostileInput(t *testing.T) {
	_, hs := fakeServer(t, Config{MaxBody: 1 << 20})
	many := `{"model":"fake","messages":[` + strings.Repeat(`{"role":"user","content":"hi"},`, 9999) + `{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		param            string // the error's param, when it names one
		code             string // the error's code; "" for null
		words            []string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"model": "fake", "messages": [`, 400, "", "", []string{"malformed JSON"}},
		{"not an object", "/v1/chat/completions", `[1, 2]`, 400, "", "", []string{"must be a JSON object"}},
		{"null body", "/v1/completions", `null`, 400, "", "", []string{"JSON object"}},
		{"trailing garbage", "/v1/completions", `{"model":"fake","prompt":"x"} {}`, 400, "", "", []string{"malformed JSON"}},
		{"wrong type", "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"}`, 400, "max_tokens", "invalid_type", []string{"max_tokens", "integer", "string"}},
		{"float tokens", "/v1/completions", `{"model":"fake","prompt":"x","max_tokens":2.5}`, 400, "max_tokens", "invalid_type", []string{"max_tokens", "integer"}},
		{"temperature string", "/v1/completions", `{"model":"fake","prompt":"x","temperature":"hot"}`, 400, "temperature", "invalid_type", []string{"temperature", "number"}},
		{"message not an object", "/v1/chat/completions", `{"model":"fake","messages":["hi"]}`, 400, "messages", "", []string{"role and content"}},
		{"unknown message field", "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi","name":"bob"}]}`, 400, "messages", "", []string{`"name"`}},
		{"image part", "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages", "", []string{"image_url"}},
		{"bad role", "/v1/chat/completions", `{"model":"fake","messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages[0].role", "", []string{"wizard"}},
		{"invalid UTF-8", "/v1/completions", "{\"model\":\"fake\",\"prompt\":\"a\xff\xfeb\"}", 400, "", "", []string{"UTF-8", "offset 27"}},
		{"negative max_tokens", "/v1/completions", `{"model":"fake","prompt":"x","max_tokens":-5}`, 400, "max_tokens", "", []string{"at least 1", "-5"}},
		{"zero max_tokens", "/v1/completions", `{"model":"fake","prompt":"x","max_tokens":0}`, 400, "max_tokens", "", []string{"at least 1"}},
		{"huge max_tokens", "/v1/completions", `{"model":"fake","prompt":"x","max_tokens":1000000000000}`, 400, "prompt", "context_length_exceeded", []string{"maximum context length is 64 tokens"}},
		{"overflowing max_tokens", "/v1/completions", `{"model":"fake","prompt":"x","max_tokens":1e400}`, 400, "max_tokens", "invalid_type", []string{"max_tokens: want an integer, got number 1e400"}},
		{"10,000 messages", "/v1/chat/completions", many, 400, "messages", "", []string{"10000 messages, at most 4096"}},
		{"long prompt", "/v1/completions", `{"model":"fake","prompt":"` + strings.Repeat("a", 100) + `"}`, 400, "prompt", "context_length_exceeded", []string{"maximum context length is 64", "100 bytes", "at least 100 tokens"}},
		{"prompt + max_tokens", "/v1/completions", `{"model":"fake","prompt":"` + strings.Repeat("a", 60) + `","max_tokens":10}`, 400, "prompt", "context_length_exceeded", []string{"maximum context length is 64", "71 tokens (61 in the prompt, 10 for the completion)"}},
		{"n > 1", "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi"}],"n":3}`, 400, "n", "unsupported_value", []string{"n = 3", "not supported"}},
		{"tools", "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi"}],"tools":[]}`, 400, "tools", "unsupported_parameter", []string{"tools", "tool calling"}},
		{"unknown field", "/v1/completions", `{"model":"fake","prompt":"x","frobnicate":true}`, 400, "frobnicate", "unsupported_parameter", []string{"frobnicate is not supported"}},
		{"penalty", "/v1/completions", `{"model":"fake","prompt":"x","presence_penalty":0.5}`, 400, "presence_penalty", "unsupported_value", []string{"presence_penalty", "default (0)"}},
		{"echo", "/v1/completions", `{"model":"fake","prompt":"x","echo":true}`, 400, "echo", "unsupported_value", []string{"echo"}},
		{"two prompts", "/v1/completions", `{"model":"fake","prompt":["a","b"]}`, 400, "prompt", "", []string{"2 prompts"}},
		{"token out of vocab", "/v1/completions", `{"model":"fake","prompt":[1, 99999]}`, 400, "prompt", "", []string{"99999", "vocabulary of 30"}},
		{"top_p 0", "/v1/completions", `{"model":"fake","prompt":"x","top_p":0}`, 400, "top_p", "", []string{"(0, 1]"}},
		{"temperature 9", "/v1/completions", `{"model":"fake","prompt":"x","temperature":9}`, 400, "temperature", "", []string{"[0, 2]"}},
		{"too many stops", "/v1/completions", `{"model":"fake","prompt":"x","stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`, 400, "stop", "", []string{"17 sequences"}},
		{"empty stop", "/v1/completions", `{"model":"fake","prompt":"x","stop":""}`, 400, "stop", "", []string{"stop[0]"}},
		{"stop of numbers", "/v1/completions", `{"model":"fake","prompt":"x","stop":[1]}`, 400, "stop", "", []string{"string or an array of strings"}},
		{"logprobs 6", "/v1/completions", `{"model":"fake","prompt":"x","logprobs":6}`, 400, "logprobs", "", []string{"0..5"}},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi"}],"top_logprobs":2}`, 400, "top_logprobs", "", []string{"logprobs: true"}},
		{"stream_options without stream", "/v1/completions", `{"model":"fake","prompt":"x","stream_options":{"include_usage":true}}`, 400, "stream_options", "", []string{"stream: true"}},
		{"stream_options typo", "/v1/completions", `{"model":"fake","prompt":"x","stream":true,"stream_options":{"include_usag":true}}`, 400, "stream_options.include_usag", "unsupported_parameter", []string{"stream_options.include_usag is not supported", "include_usage"}},
		{"stream_options case", "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"Include_Usage":true}}`, 400, "stream_options.Include_Usage", "unsupported_parameter", []string{"stream_options.Include_Usage is not supported"}},
		{"stream_options wrong type", "/v1/completions", `{"model":"fake","prompt":"x","stream":true,"stream_options":{"include_usage":"yes"}}`, 400, "stream_options.include_usage", "invalid_type", []string{`want a boolean, got string "yes"`}},
		{"stream_options not an object", "/v1/completions", `{"model":"fake","prompt":"x","stream":true,"stream_options":[true]}`, 400, "stream_options", "invalid_type", []string{"want an object, got array"}},
		{"obfuscation", "/v1/completions", `{"model":"fake","prompt":"x","stream":true,"stream_options":{"include_obfuscation":true}}`, 400, "stream_options.include_obfuscation", "unsupported_value", []string{"does not pad"}},
		{"chat past the context", "/v1/chat/completions", `{"model":"fake","messages":[{"role":"user","content":"hi"}],"max_tokens":64}`, 400, "messages", "context_length_exceeded", []string{"maximum context length is 64", "for the completion"}},
		{"no model", "/v1/completions", `{"prompt":"x"}`, 400, "model", "", []string{"model is required"}},
		{"unknown model", "/v1/completions", `{"model":"gpt-4","prompt":"x"}`, 404, "model", "model_not_found", []string{`"gpt-4" does not exist`, `"fake"`}},
		{"no messages", "/v1/chat/completions", `{"model":"fake","messages":[]}`, 400, "messages", "", []string{"at least one"}},
	} {
		resp, body := post(t, hs.URL, tc.path, tc.body)
		var e struct {
			Error struct {
				Message, Type string
				Param, Code   *string
			}
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != tc.status || e.Error.Type == "" {
			t.Errorf("%s: status %d body %q, want %d and an OpenAI error", tc.name, resp.StatusCode, body, tc.status)
			continue
		}
		if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
			t.Errorf("%s: param %v, want %q", tc.name, e.Error.Param, tc.param)
		}
		if code := deref(e.Error.Code); code != tc.code {
			t.Errorf("%s: code %q, want %q (body %s)", tc.name, code, tc.code, body)
		}
		for _, w := range tc.words {
			if !strings.Contains(e.Error.Message, w) {
				t.Errorf("%s: message %q does not say %q", tc.name, e.Error.Message, w)
			}
		}
	}
	// Greedy: at the default temperature of 1 the fake logits (10 for the
	// next letter, 0 for the other 29 tokens) leave those a chance of about
	// 1 in 760 a step together, and a CI run drew "abax".
	if resp, body := post(t, hs.URL, "/v1/completions", `{"model":"fake","prompt":"x","max_tokens":4,"temperature":0}`); resp.StatusCode != 200 || !strings.Contains(body, `"text":"abab"`) {
		t.Fatalf("after the hostile requests: %d %s", resp.StatusCode, body)
	}
}

// A 100 MB body is refused with 413 after reading no more than the limit.
func TestBodyLimit(t *testing.T) {
	_, hs := fakeServer(t, Config{MaxBody: 1 << 20})
	body := io.MultiReader(strings.NewReader(`{"model":"fake","prompt":"`), io.LimitReader(zeros{}, 100<<20), strings.NewReader(`"}`))
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", body)
	if err != nil {
		t.Fatalf("100 MB body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "limit of 1048576 bytes (--max-body)") {
		t.Fatalf("100 MB body: %d %s", resp.StatusCode, b)
	}
	if typ, code := errorKind(t, string(b)); typ != "invalid_request_error" || code != "request_too_large" {
		t.Errorf("100 MB body: type %q code %q, want invalid_request_error, request_too_large", typ, code)
	}
	if resp, _ := post(t, hs.URL, "/v1/completions", `{"model":"fake","prompt":"x","max_tokens":2}`); resp.StatusCode != 200 {
		t.Fatalf("after the big body: %d", resp.StatusCode)
	}
}

// deref is *s, or "" for nil (a JSON null).
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// With one slot and a queue of one, a third concurrent request is refused
// with 429 and the first two complete.
func TestAdmission(t *testing.T) {
	gate := make(chan struct{})
	s, hs := fakeServer(t, Config{Engine: &fakeEngine{gate: gate}, MaxConcurrent: 1, Queue: 1})
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := post(t, hs.URL, "/v1/completions", `{"model":"fake","prompt":"x","max_tokens":2}`)
			codes[i] = resp.StatusCode
		}()
	}
	waitFor(t, func() bool {
		s.admit.mu.Lock()
		defer s.admit.mu.Unlock()
		return s.admit.waiting == 1 && len(s.admit.slots) == 1
	})
	resp, body := post(t, hs.URL, "/v1/completions", `{"model":"fake","prompt":"x","max_tokens":2}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "--max-concurrent 1, --queue 1") {
		t.Errorf("third request: %d %s", resp.StatusCode, body)
	}
	if typ, code := errorKind(t, body); typ != "rate_limit_error" || code != "rate_limit_exceeded" {
		t.Errorf("third request: type %q code %q, want rate_limit_error, rate_limit_exceeded", typ, code)
	}
	close(gate)
	wg.Wait()
	if codes[0] != 200 || codes[1] != 200 {
		t.Fatalf("admitted requests: %v", codes)
	}
	_, m := get(t, hs.URL+"/metrics")
	if !strings.Contains(m, "seam_api_requests_rejected_total 1") || !strings.Contains(m, `seam_api_requests_total{endpoint="completions",status="429"} 1`) {
		t.Fatalf("metrics do not count the refusal:\n%s", grepLines(m, "seam_api_requests"))
	}
}

// errorKind decodes an OpenAI error body's type and code ("" for null).
func errorKind(t testing.TB, body string) (typ, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Type string
			Code *string
		}
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an OpenAI error: %v: %s", err, body)
	}
	return e.Error.Type, deref(e.Error.Code)
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5 s")
		}
	}
}

func get(t testing.TB, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// FuzzRequest: any body gives a 200 with a JSON completion or a 4xx with an
// OpenAI error; never a 5xx, a panic or a hang.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"fake","prompt":"ab","max_tokens":3,"stop":"b"}`,
		`{"model":"fake","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"logprobs":true,"top_logprobs":2,"max_completion_tokens":2}`,
		`{"model":"fake","prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true},"logprobs":2,"max_tokens":2}`,
		`{"model":"fake","prompt":"x","seed":-1,"temperature":0.5,"top_p":0.5,"n":1,"user":"u","logit_bias":{}}`,
		`{"model":"fake","messages":[{"role":"developer","content":"x"}],"stream":true,"max_tokens":1}`,
		"{\"model\":\"fake\",\"prompt\":\"\xff\"}", `{`, `null`, `{"prompt":{}}`,
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	s, err := New(Config{Engine: &fakeEngine{}, Tokenizer: fakeTok{}, ModelName: "fake", ContextLen: 32, MaxBody: 1 << 16, Logger: nopLogger})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string, isChat bool) {
		path := "/v1/completions"
		if isChat {
			path = "/v1/chat/completions"
		}
		r, _ := http.NewRequest("POST", path, strings.NewReader(body))
		w := &recorder{header: http.Header{}}
		done := make(chan struct{})
		go func() { s.ServeHTTP(w, r); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("no answer within 5 s to %q", body)
		}
		switch {
		case w.status == 200 && strings.HasPrefix(w.header.Get("Content-Type"), "text/event-stream"):
			if !bytes.HasSuffix(w.body.Bytes(), []byte("data: [DONE]\n\n")) {
				t.Fatalf("stream without [DONE]: %q", w.body.String())
			}
		case w.status == 200:
			var c completion
			if err := json.Unmarshal(w.body.Bytes(), &c); err != nil || len(c.Choices) != 1 || c.Usage == nil {
				t.Fatalf("200 with body %q: %v", w.body.String(), err)
			}
		case w.status >= 400 && w.status < 500:
			var e struct{ Error apiError }
			if err := json.Unmarshal(w.body.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("%d with body %q", w.status, w.body.String())
			}
		default:
			t.Fatalf("status %d for %q: %s", w.status, body, w.body.String())
		}
	})
}

// recorder is a minimal ResponseWriter that can flush (for streams).
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Flush() {}

var nopLogger = slog.New(slog.DiscardHandler)
