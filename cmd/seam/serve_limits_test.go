package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/pipeline"
)

// The limit flags reach the stage: a served stage tells the head its
// --max-prefill, and the head sends a longer prompt in frames it takes (the
// stage's own refusal of a longer frame is stage.TestMaxPrefillRefused); it
// refuses a second session over --max-sessions-per-conn, naming the flag,
// and closes a head that holds no session once --idle-timeout passes,
// telling it why.
func TestServeLimitFlags(t *testing.T) {
	ctr := importStories(t)
	m, err := loader.Open(ctr, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	id, _ := m.Identity()
	addr, _ := startStage(t, ctr, 0, m.Weights.Config.NLayers, "--max-prefill", "16", "--max-sessions-per-conn", "1", "--idle-timeout", "1s")
	ctx := context.Background()
	opts := pipeline.Options{Identity: id, Config: m.Weights.Config, Timeout: 10 * time.Second, Auth: testAuth(t)}
	c, err := pipeline.Dial(ctx, []string{addr}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	idle, err := pipeline.Dial(ctx, []string{addr}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	s, err := c.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward(ctx, make([]int, 17), 0, false); err != nil {
		t.Errorf("a 17-token prompt through a stage with --max-prefill 16: %v", err)
	}
	if _, err := s.Forward(ctx, make([]int, 16), 0, false); err != nil {
		t.Errorf("a 16-token prefill: %v", err)
	}
	if _, err := c.NewSession(ctx); err == nil || !strings.Contains(err.Error(), "holds 1 sessions, its limit (--max-sessions-per-conn)") {
		t.Errorf("a second session on the connection: %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // c holds a session: only idle is closed
	if _, err := idle.NewSession(ctx); err == nil || !strings.Contains(err.Error(), "nothing received for 1s while it holds no session, this stage's limit (--idle-timeout)") {
		t.Errorf("a head idle past --idle-timeout: %v", err)
	}
	if _, err := s.Forward(ctx, []int{3}, 16, false); err != nil {
		t.Errorf("the head holding a session, after the idle timeout: %v", err)
	}
}

// Limit flags no stage can honour are refused before anything starts.
func TestServeLimitFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-prefill", "9000"}, "--max-prefill 9000: want 1 to 8192 (the wire's cap on the tokens of a frame)"},
		{[]string{"--max-prefill", "0"}, "--max-prefill 0: want 1 to 8192"},
		{[]string{"--idle-timeout", "-1s"}, "--idle-timeout -1s: want a duration, or 0 to never close idle connections"},
		{[]string{"--max-queue", "-2"}, "--max-queue -2: want 0 (the default) or more"},
		{[]string{"--max-sessions-per-identity", "-1"}, "--max-sessions-per-identity -1: want 0 (the default) or more"},
	} {
		args := append([]string{"serve", "--model", "does-not-exist", "--layers", "0:1", "--insecure"}, c.args...)
		if _, _, err := seamAll(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	out, _, err := seamAll(t, "serve", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--max-prefill int", "(default 4096)", "--idle-timeout duration", "(default 10m0s)", "--max-sessions-per-conn int",
		"--max-sessions-per-identity int", "--max-queue int", "--max-inflight-tokens int"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help does not show %q", want)
		}
	}
}
