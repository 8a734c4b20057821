package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/chat"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/tokenizer"
)

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
	StopChat  struct{ Text, Finish string } `json:"stopChat"`
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
