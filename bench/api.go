package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/seamlm/seam/api"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/scheduler"
)

// APIOptions configure the API overhead A/B.
type APIOptions struct {
	Prompt string
	Tokens int // tokens to generate per run
	Rounds int // A/B pairs, the first discarded as warm-up
	Log    io.Writer
}

// APIResult is the decode speed of both sides, per measured run.
type APIResult struct {
	Tokens int       // tokens generated per run (both sides)
	Run    []float64 // seam run's decode tok/s (generate.Generate, in process)
	API    []float64 // through seam api: HTTP, SSE, JSON, measured by the client
	// RunCPU and APICPU are the CPU time this process spent per generated
	// token (prefill included, both sides alike), in ms: on a machine shared
	// with other work it varies far less than wall-clock tok/s.
	RunCPU, APICPU []float64
}

// Ratio is the API's median tok/s over seam run's.
func (r APIResult) Ratio() float64 { return r.APIMedian() / r.RunMedian() }

// CPURatio is seam run's median CPU time per token over the API's: above
// 0.95 means the API costs less than 5% more CPU per token.
func (r APIResult) CPURatio() float64 { return median(r.RunCPU) / median(r.APICPU) }

// RunMedian is seam run's median tok/s.
func (r APIResult) RunMedian() float64 { return median(r.Run) }

// APIMedian is the API's median tok/s.
func (r APIResult) APIMedian() float64 { return median(r.API) }

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// APIOverhead measures single-stream greedy decode tok/s of the whole model
// m two ways, alternated in one process: A is seam run's generation loop,
// B is a streamed /v1/completions request to an API server on loopback,
// timed by its client from the first streamed token to the last. Both count
// decode only: (tokens - 1) / (time from the first token to the last).
func APIOverhead(ctx context.Context, m *loader.Model, opts APIOptions) (APIResult, error) {
	mod, err := model.New(m.Weights)
	if err != nil {
		return APIResult{}, err
	}
	engine, err := scheduler.NewLocal(mod)
	if err != nil {
		return APIResult{}, err
	}
	srv, err := api.New(api.Config{Engine: engine, Tokenizer: m.Tokenizer, ContextLen: m.Weights.Config.SeqLen, ModelName: "bench",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return APIResult{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return APIResult{}, err
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	url := "http://" + ln.Addr().String()
	prompt := m.Tokenizer.Encode(opts.Prompt, m.Tokenizer.AddBOS(), false)
	if len(prompt)+opts.Tokens > m.Weights.Config.SeqLen {
		return APIResult{}, fmt.Errorf("%d prompt tokens + %d exceed the context of %d", len(prompt), opts.Tokens, m.Weights.Config.SeqLen)
	}
	var res APIResult
	for round := range opts.Rounds {
		// Alternate which side goes first, so that neither always runs on
		// a machine warmed (or slowed) by the other.
		sides := []string{"run", "api"}
		if round%2 == 1 {
			sides = []string{"api", "run"}
		}
		for _, side := range sides {
			var tps float64
			var n int
			cpu0 := cpuTime()
			if side == "run" {
				tps, n, err = runSide(ctx, mod, m, opts, len(prompt))
			} else {
				tps, n, err = apiSide(ctx, url, opts)
			}
			cpuMs := float64(cpuTime()-cpu0) / 1e6 / float64(max(n, 1))
			if err != nil {
				return res, fmt.Errorf("round %d, %s: %w", round+1, side, err)
			}
			if res.Tokens != 0 && n != res.Tokens {
				return res, fmt.Errorf("round %d, %s generated %d tokens, the other runs %d: the sides disagree", round+1, side, n, res.Tokens)
			}
			res.Tokens = n
			note := ""
			if round == 0 {
				note = " (warm-up, discarded)"
			} else if side == "run" {
				res.Run, res.RunCPU = append(res.Run, tps), append(res.RunCPU, cpuMs)
			} else {
				res.API, res.APICPU = append(res.API, tps), append(res.APICPU, cpuMs)
			}
			if opts.Log != nil {
				fmt.Fprintf(opts.Log, "round %d %-3s %7.2f tok/s, %6.2f CPU ms/token, %d tokens%s\n", round+1, side, tps, cpuMs, n, note)
			}
		}
	}
	return res, nil
}

// runSide is seam run's path: generate.Generate over a local session.
func runSide(ctx context.Context, mod *model.Model, m *loader.Model, opts APIOptions, promptLen int) (float64, int, error) {
	sess, err := generate.NewLocal(mod)
	if err != nil {
		return 0, 0, err
	}
	defer sess.Close()
	smp, _ := sample.New(0, 1, 1)
	st, err := generate.Generate(ctx, sess, m.Tokenizer, m.Weights.Config.SeqLen, opts.Prompt,
		generate.Options{Steps: promptLen + opts.Tokens - 1, Sampler: smp}, io.Discard)
	if err != nil {
		return 0, 0, err
	}
	return float64(st.GeneratedTokens-1) / st.Decode.Seconds(), st.GeneratedTokens, nil
}

// apiSide streams one greedy completion and times it from the client.
func apiSide(ctx context.Context, url string, opts APIOptions) (float64, int, error) {
	body, _ := json.Marshal(map[string]any{"model": "bench", "prompt": opts.Prompt, "max_tokens": opts.Tokens, "temperature": 0,
		"stream": true, "stream_options": map[string]any{"include_usage": true}})
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return 0, 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	var first, last time.Time
	tokens := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct{ Text string }
			Usage   *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
			Error *struct{ Message string }
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return 0, 0, err
		}
		switch {
		case c.Error != nil:
			return 0, 0, fmt.Errorf("stream error: %s", c.Error.Message)
		case c.Usage != nil:
			tokens = c.Usage.CompletionTokens
		case len(c.Choices) > 0 && c.Choices[0].Text != "":
			if first.IsZero() {
				first = time.Now()
			}
			last = time.Now()
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if tokens < 2 || !last.After(first) {
		return 0, tokens, fmt.Errorf("only %d tokens streamed", tokens)
	}
	return float64(tokens-1) / last.Sub(first).Seconds(), tokens, nil
}
