package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/scheduler"
	"github.com/seamlm/seam/stage"
)

var quiet = slog.New(slog.DiscardHandler)

func stories(t *testing.T) *loader.Model {
	t.Helper()
	m, err := loader.Open(testmodels.Path(t, testmodels.Stories260K), loader.Options{TokenizerPath: testmodels.Path(t, testmodels.Tok512)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func whole(t *testing.T, m *loader.Model) *scheduler.Scheduler {
	t.Helper()
	mod, err := model.New(m.Weights)
	if err != nil {
		t.Fatal(err)
	}
	e, err := scheduler.NewLocal(mod)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Config{Engine: e, Tokenizer: m.Tokenizer, ContextLen: m.Weights.Config.SeqLen})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// split serves m as n in-process stages and supervises a chain through them.
func split(t *testing.T, m *loader.Model, n int) (*scheduler.Scheduler, *stage.Local) {
	t.Helper()
	id, err := m.Identity()
	if err != nil {
		t.Fatal(err)
	}
	ranges, err := stage.EvenRanges(m.Weights.Config.NLayers, n)
	if err != nil {
		t.Fatal(err)
	}
	local, err := stage.StartLocal(m.Weights, ranges, stage.Config{Identity: id, Timeout: 10 * time.Second, Logger: quiet}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	sup, err := pipeline.Supervise(context.Background(), pipeline.Singles(local.Addrs), pipeline.Options{Identity: id, Config: m.Weights.Config, Timeout: 10 * time.Second},
		pipeline.SupervisorOptions{Poll: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	s, err := scheduler.New(scheduler.Config{Engine: scheduler.Pipeline(sup), Tokenizer: m.Tokenizer, ContextLen: m.Weights.Config.SeqLen})
	if err != nil {
		t.Fatal(err)
	}
	return s, local
}

func greedy(t *testing.T, s *scheduler.Scheduler, prompt []int, n int) scheduler.Result {
	t.Helper()
	res, err := s.Run(context.Background(), scheduler.Request{Prompt: prompt, MaxTokens: n, TopP: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// At temperature 0 the scheduler says what seam run's generation loop says,
// whole and split into 3 stages.
func TestGreedyMatchesGenerate(t *testing.T) {
	m := stories(t)
	const prompt, steps = "Once upon a time", 120
	mod, err := model.New(m.Weights)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := generate.NewLocal(mod)
	if err != nil {
		t.Fatal(err)
	}
	smp, _ := sample.New(0, 1, 1)
	var want strings.Builder
	st, err := generate.Generate(context.Background(), sess, m.Tokenizer, m.Weights.Config.SeqLen, prompt, generate.Options{Steps: steps, Sampler: smp}, &want)
	if err != nil {
		t.Fatal(err)
	}
	ids := m.Tokenizer.Encode(prompt, true, false)
	wholeS := whole(t, m)
	splitS, _ := split(t, m, 3)
	for name, s := range map[string]*scheduler.Scheduler{"whole": wholeS, "split in 3": splitS} {
		res := greedy(t, s, ids, st.GeneratedTokens)
		if res.Text != want.String() || res.CompletionTokens != st.GeneratedTokens {
			t.Errorf("%s: %d tokens %q\nwant %d tokens %q", name, res.CompletionTokens, res.Text, st.GeneratedTokens, want.String())
		}
	}
}

// 32 concurrent requests through a 3-stage split each produce what they
// produce alone, and every session is closed on every stage afterwards.
func TestConcurrentEqualsSolo(t *testing.T) {
	m := stories(t)
	s, local := split(t, m, 3)
	const n = 32
	reqs := make([]scheduler.Request, n)
	solo := make([]string, n)
	for i := range reqs {
		seed := uint64(i)
		reqs[i] = scheduler.Request{Prompt: m.Tokenizer.Encode(fmt.Sprintf("Once upon a time %d", i), true, false),
			MaxTokens: 24 + i, Temperature: 0.8, TopP: 0.9, Seed: &seed, Stop: []string{"\n\n"}}
		res, err := s.Run(context.Background(), reqs[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		solo[i] = res.Text
	}
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b strings.Builder
			_, errs[i] = s.Run(ctx, reqs[i], func(c scheduler.Chunk) error { b.WriteString(c.Text); return nil })
			got[i] = b.String()
		}()
	}
	wg.Wait()
	for i := range reqs {
		if errs[i] != nil || got[i] != solo[i] {
			t.Errorf("request %d: %v\n got %q\nsolo %q", i, errs[i], got[i], solo[i])
		}
	}
	waitFreed(t, local, time.Now())
}

// waitFreed waits until no stage holds a session, failing after a second:
// a closed session is freed as soon as each stage reads its Close frame.
func waitFreed(t *testing.T, local *stage.Local, since time.Time) {
	t.Helper()
	for i, srv := range local.Servers() {
		for st := srv.Stats(); st.Sessions != 0 || st.KVBytes != 0; st = srv.Stats() {
			if time.Since(since) > time.Second {
				t.Fatalf("stage %d still holds %d sessions (%d KV bytes) a second later", i+1, st.Sessions, st.KVBytes)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	t.Logf("every stage freed its sessions %v later", time.Since(since))
}

// Cancelling a request frees its KV caches on every stage at once, and the
// chain keeps serving.
func TestCancelFreesSessions(t *testing.T) {
	m := stories(t)
	s, local := split(t, m, 3)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	var cancelled time.Time
	_, err := s.Run(ctx, scheduler.Request{Prompt: []int{1}, MaxTokens: 400, TopP: 1}, func(scheduler.Chunk) error {
		if n++; n == 5 {
			for i, srv := range local.Servers() {
				if st := srv.Stats(); st.Sessions != 1 {
					t.Errorf("stage %d holds %d sessions mid-request, want 1", i+1, st.Sessions)
				}
			}
			cancelled = time.Now()
			cancel()
		}
		return nil
	})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("cancelled run: %v", err)
	}
	waitFreed(t, local, cancelled)
	greedy(t, s, []int{1}, 10)
}

func TestSeed(t *testing.T) {
	m := stories(t)
	s := whole(t, m)
	run := func(seed uint64) string {
		res, err := s.Run(context.Background(), scheduler.Request{Prompt: []int{1}, MaxTokens: 40, Temperature: 1, TopP: 1, Seed: &seed}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Text
	}
	a, b, c := run(7), run(7), run(8)
	if a != b {
		t.Fatalf("seed 7 twice: %q, %q", a, b)
	}
	if a == c {
		t.Fatalf("seeds 7 and 8 gave the same 40 tokens: %q", a)
	}
}
