package stage_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
)

// A weight file truncated while a stage serves it used to kill the stage
// with SIGBUS. Now the request that meets the fault fails with an error
// naming the file, the stage stays up, and it refuses all later work with
// the same reason until it is restarted.
func TestTruncatedWeightsFailRequestsNotTheStage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := synth.DemoConfig()
	if err := synth.WriteGGUF(f, cfg, synth.GGUFOptions{Matrices: tensor.F32, Embedding: tensor.F32, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Open(path, loader.Options{NoTokenizer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	m, err := model.New(lm.Weights)
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	srv, err := stage.New(stage.Config{Model: m, Identity: testID, Name: "damaged", Timeout: 5 * time.Second, Logger: jsonLog(&log)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	ctx := context.Background()
	c, err := pipeline.Dial(ctx, []string{ln.Addr().String()}, pipeline.Options{Identity: testID, Config: lm.Weights.Config, Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward(ctx, []int{1, 2, 3}, 0, false); err != nil {
		t.Fatal(err)
	}
	// Keep the header, drop every weight.
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	_, err = s.Forward(ctx, []int{4}, 3, false)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "weights changed") {
		t.Fatalf("a step over truncated weights: %v, want an error naming %s", err, path)
	}
	t.Logf("the head saw: %v", err)
	if _, err := c.NewSession(ctx); err == nil || !strings.Contains(err.Error(), "cannot compute") {
		t.Fatalf("a new session on damaged weights: %v, want a refusal", err)
	}
	if !strings.Contains(log.String(), "weights damaged") {
		t.Errorf("no \"weights damaged\" log line:\n%s", log.String())
	}
	// The stage is still up: it answers a new head's handshake.
	c2, err := pipeline.Dial(ctx, []string{ln.Addr().String()}, pipeline.Options{Identity: testID, Config: lm.Weights.Config, Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatalf("the damaged stage no longer answers a head: %v", err)
	}
	c2.Close()
}

func jsonLog(w *syncBuffer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }
