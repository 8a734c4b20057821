package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
)

// --kv-budget auto is half the memory available, and never "no limit":
// a machine reporting nothing (or 1 byte) available is refused by name.
func TestKVBudgetAuto(t *testing.T) {
	prev := availableMemory
	t.Cleanup(func() { availableMemory = prev })
	f := kvFlags{budget: "auto"}
	for _, c := range []struct {
		avail int64
		err   error
		want  int64
	}{
		{avail: 8 << 30, want: 4 << 30},
		{avail: 3, want: 1},
		{avail: 1},
		{avail: 0},
		{err: errors.New("no /proc/meminfo")},
	} {
		availableMemory = func() (int64, error) { return c.avail, c.err }
		got, err := f.bytes("test")
		if c.want > 0 {
			if err != nil || got != c.want {
				t.Errorf("%d bytes available: budget %d, %v; want %d", c.avail, got, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "--kv-budget auto") {
			t.Errorf("%d bytes available (%v): budget %d, %v; want a refusal naming --kv-budget auto", c.avail, c.err, got, err)
		}
	}
}

// A --kv-budget that is not a size is refused before any weights load:
// the model path here does not exist, and the error names the flag.
func TestKVBudgetRefusedBeforeLoading(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	for _, args := range [][]string{
		{"serve", "--model", missing, "--layers", "0:1", "--kv-budget", "4GB?", "--insecure"},
		{"serve", "--model", missing, "--kv-budget", "lots", "--insecure"},
		{"api", "--model", missing, "--kv-budget", "-1"},
	} {
		_, err := seam(t, args...)
		if err == nil || !strings.Contains(err.Error(), "--kv-budget") {
			t.Errorf("seam %v: %v, want a refusal naming --kv-budget", args, err)
		}
	}
}

// A pool member's automatic budget is resolved when an assignment's part
// is opened, and only then; without one the part leaves it to the base
// configuration.
func TestOpenPartResolvesAutoKVBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteGGUF(f, synth.DemoConfig(), synth.GGUFOptions{Matrices: tensor.F32, Embedding: tensor.F32, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	calls := 0
	auto := func() (int64, error) { calls++; return 12345, nil }
	part, err := openPart(path, "p", 0, 3, false, auto)
	if err != nil {
		t.Fatal(err)
	}
	part.Close()
	if part.KVBudget != 12345 || calls != 1 {
		t.Errorf("with an automatic budget: part budget %d after %d calls, want 12345 after 1", part.KVBudget, calls)
	}
	part, err = openPart(path, "p", 3, 6, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	part.Close()
	if part.KVBudget != 0 {
		t.Errorf("with a given budget: the part set %d, want 0 (the base's)", part.KVBudget)
	}
	_, err = openPart(path, "p", 0, 3, false, func() (int64, error) { return 0, errors.New("--kv-budget auto: nothing left") })
	if err == nil || !strings.Contains(err.Error(), "nothing left") {
		t.Errorf("a budget that cannot be resolved: %v, want its error", err)
	}
}
