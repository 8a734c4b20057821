package model_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
)

// kvBlock is the positions per block of these tests: no other test's
// caches share their allocator, whose count they read.
const kvBlock = 13

// kvTestModel is the demo model and the allocator its f32 caches of
// kvBlock positions take blocks from.
func kvTestModel(t *testing.T) (*model.Model, *mapped.Blocks) {
	t.Helper()
	cfg := synth.DemoConfig()
	w, err := synth.Weights(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := model.KVBlocksOf(kvBlock * cfg.KVDim() * 4)
	if err != nil {
		t.Fatal(err)
	}
	return m, alloc
}

func fill(t *testing.T, m *model.Model, s *model.State, n int) {
	t.Helper()
	d := m.Config().Dim
	x := make([]float32, n*d)
	for p := range n {
		if err := m.Embed(p+1, x[p*d:(p+1)*d]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.LayersBatch(s, x, s.Next(), n); err != nil {
		t.Fatal(err)
	}
}

// Blocks go back to the allocator and the pool on Release, on a rewind, and
// when a state is dropped without Release and collected.
func TestKVBlocksComeBack(t *testing.T) {
	m, alloc := kvTestModel(t)
	layers := m.Config().NLayers
	pool, _ := model.NewKVPool(0, kvBlock)
	base := alloc.InUse()
	s, err := m.NewStateIn(0, layers, pool)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, m, s, 30) // 3 blocks a layer, keys and values
	if got, want := alloc.InUse()-base, 3*2*layers; got != want {
		t.Fatalf("30 positions hold %d blocks, want %d", got, want)
	}
	s.Shrink(14) // 2 blocks a layer
	if got, want := alloc.InUse()-base, 2*2*layers; got != want || pool.Used() != 2*s.BlockBytes() {
		t.Fatalf("after shrinking to 14 positions: %d blocks and %d pool bytes, want %d and %d", got, pool.Used(), want, 2*s.BlockBytes())
	}
	s.Release()
	if alloc.InUse() != base || pool.Used() != 0 {
		t.Fatalf("after Release: %d blocks and %d pool bytes held, want none", alloc.InUse()-base, pool.Used())
	}

	// Dropped while holding blocks: the cleanup gives them back.
	func() {
		s, _ := m.NewStateIn(0, layers, pool)
		fill(t, m, s, 20)
	}()
	if alloc.InUse() == base {
		t.Fatal("the dropped state held no blocks to give back")
	}
	deadline := time.Now().Add(10 * time.Second)
	for alloc.InUse() != base || pool.Used() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after dropping a state: %d blocks and %d pool bytes still held", alloc.InUse()-base, pool.Used())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// When a block cannot be had half way through taking a batch's blocks,
// everything taken is given back, the reservation too, and the error says
// which layer's block failed.
func TestKVBlockFailureUndoes(t *testing.T) {
	m, alloc := kvTestModel(t)
	layers := m.Config().NLayers
	pool, _ := model.NewKVPool(0, kvBlock)
	s, _ := m.NewStateIn(0, layers, pool)
	fill(t, m, s, 10) // 1 block a layer
	base, used := alloc.InUse(), pool.Used()

	calls := 0
	model.SetGetBlock(func(a *mapped.Blocks) ([]byte, error) {
		// The key block of block 1, layer 1: layer 0 has taken its block 1,
		// layer 1 none, and the second block's reservation is not yet used.
		if calls++; calls == 3 {
			return nil, errors.New("mapping refused")
		}
		return a.Get()
	})
	defer model.SetGetBlock(nil)
	d := m.Config().Dim
	err := m.LayersBatch(s, make([]float32, 20*d), 10, 20)
	if err == nil || !strings.Contains(err.Error(), "mapping refused") || !strings.Contains(err.Error(), "layer 1") {
		t.Fatalf("a failed block gave %v, want the mapping's error naming layer 1", err)
	}
	if alloc.InUse() != base || pool.Used() != used || s.Next() != 10 {
		t.Fatalf("after the failure: %d more blocks, pool %d (was %d), next %d (was 10)", alloc.InUse()-base, pool.Used(), used, s.Next())
	}
	model.SetGetBlock(nil)
	fill(t, m, s, 30) // and the state goes on
	if s.Next() != 40 {
		t.Fatalf("next %d after 30 more positions, want 40", s.Next())
	}
	s.Release()
}
