package stage_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/gguf"
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
//
// Both ways a stage may hold its weights: read from the file's mapping
// (--mmap), where the matrix products on every thread meet the fault, and
// copied at load, where only the embedding is still read from the file.
func TestTruncatedWeightsFailRequestsNotTheStage(t *testing.T) {
	for _, mapped := range []bool{true, false} {
		t.Run(fmt.Sprintf("mapped=%v", mapped), func(t *testing.T) { truncatedWeights(t, mapped) })
	}
}

func truncatedWeights(t *testing.T, mapped bool) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Q8_0 matrices, which no load copies for alignment: with Mapped every
	// layer is read from the file.
	cfg := synth.DemoConfig()
	cfg.HiddenDim = 352 // whole blocks of 32
	if err := synth.WriteGGUF(f, cfg, synth.GGUFOptions{Matrices: tensor.Q8_0, Embedding: tensor.F32, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Open(path, loader.Options{NoTokenizer: true, Mapped: mapped})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	if copied := lm.Resident > 0; copied == mapped {
		t.Fatalf("Mapped %v: %d bytes copied at load", mapped, lm.Resident)
	}
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
	// Copied: keep the header, drop every weight (the embedding row a step
	// reads faults). Mapped: keep the embedding whole, so that the fault
	// comes from a layer's weights.
	size := int64(4096)
	if mapped {
		size = embeddingEnd(t, path)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	_, err = s.Forward(ctx, []int{4}, 3, false)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "weights changed") {
		t.Fatalf("a step over truncated weights: %v, want an error naming %s", err, path)
	}
	var off int64
	if i := strings.Index(err.Error(), " at offset "); i < 0 {
		t.Fatalf("no offset in %v", err)
	} else if _, serr := fmt.Sscanf(err.Error()[i:], " at offset %d", &off); serr != nil {
		t.Fatalf("offset in %v: %v", err, serr)
	}
	if off < size {
		t.Fatalf("the fault at offset %d is inside the %d bytes kept", off, size)
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

// embeddingEnd is the file offset just past the token embedding's data,
// checking that some layer's weights lie after it.
func embeddingEnd(t *testing.T, path string) int64 {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	emb, ok := f.TensorInfo("token_embd.weight")
	if !ok {
		t.Fatal("no token_embd.weight")
	}
	end := f.DataOffset() + emb.Offset + emb.Size
	for _, ti := range f.Tensors() {
		if strings.HasPrefix(ti.Name, "blk.") && f.DataOffset()+ti.Offset >= end {
			return int64(end)
		}
	}
	t.Fatal("no layer tensor after the embedding")
	return 0
}

func jsonLog(w *syncBuffer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }
