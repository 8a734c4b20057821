package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sample is one series of a /metrics scrape.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleRe = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrape reads /metrics in Prometheus's text format.
func scrape(t testing.TB, url string) []sample {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out []sample
	for _, line := range strings.Split(string(b), "\n") {
		m := sampleRe.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelRe.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out
}

// values maps each series of the metric name to its value, keyed by the
// label given ("" for a series without labels).
func values(ss []sample, name, by string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		if s.name == name {
			out[s.labels[by]] = s.value
		}
	}
	return out
}

// Frame sizes from docs/wire.md: a 52-byte header, then 4 bytes per token
// id or 4 bytes per value of f32 activations.
const (
	frameHeader = 52
	idBytes     = 4
	f32Bytes    = 4
)

// After one greedy streamed request through 3 stages, /metrics shows its
// tokens, one time to first token and n-1 inter-token gaps, every stage's
// work, and the bytes on every boundary exactly as docs/wire.md sizes the
// frames; afterwards no stage holds a session or KV cache.
func TestMetrics(t *testing.T) {
	m := stories(t)
	procs := startStages(t, m, 3, time.Millisecond)
	_, url := serveSplit(t, m, procs, 10*time.Second)
	const prompt, n = "Once upon a time", 20
	p := len(m.Tokenizer.Encode(prompt, m.Tokenizer.AddBOS(), false)) // the prompt's tokens, BOS included
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, _ := stream(t, ctx, url, fmt.Sprintf(`{"model":"stories260K","prompt":%q,"max_tokens":%d,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`, prompt, n))
	var usage struct{ PromptTokens, CompletionTokens int }
	done := false
	for ev := range ch {
		if ev.Error != "" {
			t.Fatalf("stream error: %s", ev.Error)
		}
		done = done || ev.Done
		var u struct {
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if json.Unmarshal([]byte(ev.Raw), &u) == nil && u.Usage != nil {
			usage.PromptTokens, usage.CompletionTokens = u.Usage.PromptTokens, u.Usage.CompletionTokens
		}
	}
	if !done || usage.PromptTokens != p || usage.CompletionTokens != n {
		t.Fatalf("stream: done %v, usage %+v; want [DONE], %d prompt and %d completion tokens", done, usage, p, n)
	}

	dim := m.Weights.Config.Dim
	// Each stage computes the prompt's p positions at once, then one per
	// later token: n-1 of them (the last token is never fed back).
	positions := float64(p + n - 1)
	wantWire := map[string]float64{
		// token ids: a Prefill of p ids, then n-1 Decodes of one
		"head -> stage 1|token ids": float64(frameHeader+idBytes*p) + float64(n-1)*(frameHeader+idBytes),
		// f32 activations, dim values a position
		"stage 1 -> stage 2|f32": float64(frameHeader+f32Bytes*dim*p) + float64(n-1)*float64(frameHeader+f32Bytes*dim),
		"stage 2 -> stage 3|f32": float64(frameHeader+f32Bytes*dim*p) + float64(n-1)*float64(frameHeader+f32Bytes*dim),
		// greedy: the last stage answers each of the n steps with one id
		"stage 3 -> head|logits f32 / token ids": float64(n) * (frameHeader + idBytes),
	}
	// The stages count what they send as they send it, and a scrape pings
	// them, so their counters are final once the stream has ended; the
	// request's own series (active, requests_total) are updated as its
	// handler returns, just after [DONE]. Poll briefly for both.
	var problems []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if problems = metricsProblems(t, url, wantWire, float64(p), n, positions); len(problems) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, pr := range problems {
		t.Error(pr)
	}
}

// metricsProblems scrapes /metrics once and lists what differs from a
// single finished request of p prompt and n completion tokens.
func metricsProblems(t *testing.T, url string, wantWire map[string]float64, p, n, positions float64) []string {
	ss := scrape(t, url)
	var out []string
	wire := map[string]float64{}
	for _, s := range ss {
		if s.name == "seam_wire_bytes_total" {
			wire[s.labels["boundary"]+"|"+s.labels["encoding"]] = s.value
		}
	}
	if fmt.Sprint(wire) != fmt.Sprint(wantWire) {
		out = append(out, fmt.Sprintf("seam_wire_bytes_total by boundary|encoding:\n got %v\nwant %v", wire, wantWire))
	}
	one := func(name string) float64 {
		v, ok := values(ss, name, "")[""]
		if !ok {
			out = append(out, "no "+name+" in /metrics")
		}
		return v
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"seam_api_prompt_tokens_total", p},
		{"seam_api_completion_tokens_total", n},
		{"seam_api_time_to_first_token_seconds_count", 1},
		{"seam_api_inter_token_latency_seconds_count", n - 1},
		{"seam_api_requests_active", 0},
		{"seam_api_requests_queued", 0},
	} {
		if got := one(c.name); got != c.want {
			out = append(out, fmt.Sprintf("%s = %v, want %v", c.name, got, c.want))
		}
	}
	// Each of the n-1 gaps crosses 3 stages with 1 ms of emulated latency.
	if ttft, itl := one("seam_api_time_to_first_token_seconds_sum"), one("seam_api_inter_token_latency_seconds_sum"); ttft <= 0 || itl < (n-1)*0.003 {
		out = append(out, fmt.Sprintf("latency sums: first token %v s, inter-token %v s over %v gaps of at least 3 ms", ttft, itl, n-1))
	}
	if got := values(ss, "seam_api_requests_total", "status"); len(got) != 1 || got["200"] != 1 {
		out = append(out, fmt.Sprintf(`seam_api_requests_total by status = %v, want one 200`, got))
	}
	rtt, compute := values(ss, "seam_stage_round_trip_seconds", "stage"), values(ss, "seam_stage_compute_seconds_total", "stage")
	pos, sessions := values(ss, "seam_stage_positions_total", "stage"), values(ss, "seam_stage_sessions", "stage")
	kv, up := values(ss, "seam_stage_kv_cache_bytes", "stage"), values(ss, "seam_stage_up", "stage")
	if len(rtt) != 3 || len(compute) != 3 || len(pos) != 3 || len(kv) != 3 {
		out = append(out, fmt.Sprintf("stage series: round trip %v, compute %v, positions %v, KV %v; want 3 stages each", rtt, compute, pos, kv))
	}
	for i := range 3 {
		st := strconv.Itoa(i + 1)
		if up[st] != 1 || rtt[st] <= 0 || compute[st] <= 0 || pos[st] != positions || sessions[st] != 0 || kv[st] != 0 {
			out = append(out, fmt.Sprintf("stage %s: up %v, round trip %v s, compute %v s, positions %v (want %v), sessions %v, KV bytes %v (want 0 after the request)",
				st, up[st], rtt[st], compute[st], pos[st], positions, sessions[st], kv[st]))
		}
	}
	// Every stage reports its 14 refusal counters (generation 4), none
	// counted by a well-behaved head.
	refusals := 0
	for _, s := range ss {
		if s.name == "seam_stage_refusals_total" {
			refusals++
			if s.value != 0 || s.labels["limit"] == "" {
				out = append(out, fmt.Sprintf("refusals of stage %s, limit %q: %v, want 0", s.labels["stage"], s.labels["limit"], s.value))
			}
		}
	}
	if refusals != 3*14 {
		out = append(out, fmt.Sprintf("%d seam_stage_refusals_total series, want 14 for each of 3 stages", refusals))
	}
	return out
}
