package main

import (
	"fmt"
	"log/slog"

	"github.com/seamlm/seam/batch"
	"github.com/seamlm/seam/cluster"
	"github.com/spf13/cobra"
)

// kvFlags size the KV cache and the batching of the sessions a process
// computes: seam api's whole model (and seam serve's range).
type kvFlags struct {
	budget string
	f16    bool
	chunk  int
}

func (f *kvFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.budget, "kv-budget", "auto", "bytes of KV cache all sessions may hold, e.g. 4GiB; caches grow in blocks as positions fill, and work that does not fit is refused (seam api: 429; a stage: an error naming the limit). auto: half the memory available once the weights are loaded")
	cmd.Flags().BoolVar(&f.f16, "kv-f16", false, "store keys and values as f16: half the KV memory, at a small quality cost (docs/benchmarks.md)")
	cmd.Flags().IntVar(&f.chunk, "prefill-chunk", batch.DefaultChunk, "prompt tokens one session runs per batched step: smaller keeps other sessions' inter-token latency low while a long prompt is read, larger reads the prompt faster")
}

// changed names a flag of f that was given, or "".
func (f *kvFlags) changed(cmd *cobra.Command) string {
	for _, n := range []string{"kv-budget", "kv-f16", "prefill-chunk"} {
		if cmd.Flags().Changed(n) {
			return n
		}
	}
	return ""
}

// auto reports whether --kv-budget is auto.
func (f *kvFlags) auto() bool { return f.budget == "auto" }

// check refuses a --kv-budget that is neither auto nor a size before any
// weights load (auto is resolved only after: bytes).
func (f *kvFlags) check() error {
	if f.auto() {
		return nil
	}
	_, err := f.size()
	return err
}

// size is a --kv-budget that is not auto, in bytes.
func (f *kvFlags) size() (int64, error) {
	b, err := cluster.ParseSize(f.budget)
	if err != nil {
		return 0, fmt.Errorf("--kv-budget: %w", err)
	}
	return b, nil
}

// availableMemory is cluster.AvailableMemory; tests replace it.
var availableMemory = cluster.AvailableMemory

// bytes resolves --kv-budget for who (in the log).
func (f *kvFlags) bytes(who string) (int64, error) {
	if !f.auto() {
		return f.size()
	}
	avail, err := availableMemory()
	if err != nil {
		return 0, fmt.Errorf("--kv-budget auto: %w (give a size)", err)
	}
	b := avail / 2
	if b < 1 {
		// A budget of 0 would mean no limit at all: the opposite of what
		// a machine with no memory left needs.
		return 0, fmt.Errorf("--kv-budget auto: the system reports %d bytes available once the weights are loaded, so there is nothing to give the KV caches (give a size)", avail)
	}
	slog.Info("KV cache budget: half the memory available", "session", 0, "stage", who, "budget_bytes", b, "available_bytes", avail)
	return b, nil
}
