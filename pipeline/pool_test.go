package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

const mib = 1 << 20

// startPool starts unassigned pool members over the whole-model weights,
// each offering free bytes, on loopback.
func startPool(t *testing.T, m *loader.Model, free []int64) []string {
	t.Helper()
	return startPoolKV(t, m, free, 0)
}

// startPoolKV is startPool with members whose loaded part sets the KV
// budget (Part.KVBudget, as a member with --kv-budget auto does).
func startPoolKV(t *testing.T, m *loader.Model, free []int64, kvBudget int64) []string {
	t.Helper()
	id, err := m.Identity()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i, f := range free {
		open := func(first, last int) (*stage.Part, error) {
			part := *m.Weights
			part.First, part.Last = first, last
			mod, err := model.New(&part)
			if err != nil {
				return nil, err
			}
			return &stage.Part{Model: mod, Close: func() error { return nil }, KVBudget: kvBudget}, nil
		}
		addrs = append(addrs, listenPoolMember(t, stage.PoolConfig{
			Base:     stage.Config{Name: fmt.Sprintf("member-%d", i+1), Timeout: 5 * time.Second},
			Identity: id, Model: m.Weights.Config, Open: open,
			Describe: wire.Description{Free: uint64(f), DecodeNanos: 20_000, PrefillNanos: 10_000, HeadNanos: 30_000},
		}))
	}
	return addrs
}

func poolRequest(t *testing.T, m *loader.Model) PoolOptions {
	t.Helper()
	shape, err := cluster.ShapeOf(m.Weights)
	if err != nil {
		t.Fatal(err)
	}
	return PoolOptions{Request: cluster.Request{Shape: shape, Overhead: 1 * mib}, Measure: cluster.MeasureOptions{Pings: 2, MinTime: 5 * time.Millisecond, MaxBytes: 1 << 20}}
}

// A pool of three members, none of which can hold the model alone, is
// measured, planned and assigned; the chain it makes is bit-identical to
// the whole model. A second head reuses the assignment.
func TestAssemblePool(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	addrs := startPool(t, m, []int64{3 * mib, 3 * mib, 3 * mib})
	opts := Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second}
	asm, err := Assemble(context.Background(), addrs, opts, poolRequest(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if asm.Plan == nil || len(asm.Addrs) < 2 || len(asm.Encodings) != len(asm.Addrs)-1 {
		t.Fatalf("assembly %+v", asm)
	}
	t.Logf("plan:\n%s%s", asm.Plan, strings.Join(asm.Plan.Reasons, "\n"))

	tokens := m.Tokenizer.Encode("Once upon a time, there was a little girl named Lily.", true, false)
	mod, _ := model.New(m.Weights)
	whole, _ := generate.NewLocal(mod)
	want, err := whole.Forward(context.Background(), tokens, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	check := func(addrs []string) {
		c, err := Dial(context.Background(), addrs, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := c.NewSession(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Forward(context.Background(), tokens, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		testmodels.SameBits(t, "pool chain against the whole model", got, want)
	}
	check(asm.Addrs)

	again, err := Assemble(context.Background(), addrs, opts, poolRequest(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if again.Plan != nil || strings.Join(again.Addrs, ",") != strings.Join(asm.Addrs, ",") {
		t.Fatalf("second assembly %+v, want the first's stages %v reused", again, asm.Addrs)
	}
	check(again.Addrs)
}

// A member's part may set the KV budget once its weights are loaded: the
// assigned stage holds to it (here a budget too small for one block, so
// the first forward is refused by name).
func TestPoolPartSetsKVBudget(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	addrs := startPoolKV(t, m, []int64{3 * mib, 3 * mib, 3 * mib}, 1)
	opts := Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second}
	asm, err := Assemble(context.Background(), addrs, opts, poolRequest(t, m))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(context.Background(), asm.Addrs, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Forward(context.Background(), m.Tokenizer.Encode("Once upon a time", true, false), 0, true)
	if err == nil || !strings.Contains(err.Error(), "kv-budget") {
		t.Fatalf("forward on members with a 1-byte KV budget: %v, want a refusal naming --kv-budget", err)
	}
}

// A plan that leaves a member out is reused by the next head all the same.
func TestAssembleReusesAPartialPool(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	addrs := startPool(t, m, []int64{8 * mib, 8 * mib})
	opts := Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second}
	asm, err := Assemble(context.Background(), addrs, opts, poolRequest(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if len(asm.Addrs) != 1 {
		t.Fatalf("plan %v: want one member holding every layer", asm.Addrs)
	}
	again, err := Assemble(context.Background(), addrs, opts, poolRequest(t, m))
	if err != nil || strings.Join(again.Addrs, ",") != asm.Addrs[0] {
		t.Fatalf("second assembly %+v, %v; want %v reused", again, err, asm.Addrs)
	}
}

func TestAssembleRefusals(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	opts := Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second}

	// Too little memory: the planner names the shortfall.
	small := startPool(t, m, []int64{1 * mib, 1 * mib})
	if _, err := Assemble(context.Background(), small, opts, poolRequest(t, m)); err == nil || !strings.Contains(err.Error(), "short by") {
		t.Fatalf("small pool: %v", err)
	}

	// A head that dials an unassigned member as a stage is told what it is.
	pool := startPool(t, m, []int64{8 * mib})
	if _, err := Dial(context.Background(), pool, opts); err == nil || !strings.Contains(err.Error(), "is a pool member that holds no layers yet") {
		t.Fatalf("dialing an unassigned member as a stage: %v", err)
	}

	// A generation-1 head is refused by name.
	conn, err := net.Dial("tcp", pool[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fr := wire.NewFramer(conn, conn)
	c := m.Weights.Config
	h := wire.Hello{Generation: 1, MinGeneration: 1, MaxGeneration: 1, Model: id, Width: uint32(c.Dim), Vocab: uint32(c.VocabSize),
		Encodings: []wire.EncodingID{wire.EncodingF32}, Encoding: wire.EncodingF32, Name: "old head"}
	if err := fr.WriteHello(wire.KindHello, &h); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	re, _ := f.RemoteError()
	var rerr *wire.RemoteError
	if f.Kind != wire.KindError || !errors.As(error(re), &rerr) || !strings.Contains(re.Error(), `head "old head" speaks generations 1..1`) {
		t.Fatalf("old head got %v: %v", f.Kind, re)
	}
}

// listenPoolMember starts a pool member for cfg on a loopback port, closed
// when the test ends, and returns its address.
func listenPoolMember(t *testing.T, cfg stage.PoolConfig) string {
	t.Helper()
	pm, err := stage.NewPoolMember(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go pm.Serve(ln)
	t.Cleanup(func() { pm.Close() })
	return ln.Addr().String()
}
