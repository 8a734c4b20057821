package batch_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/batch"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/synth"
)

func demo(t *testing.T) *model.Model {
	t.Helper()
	w, err := synth.Weights(synth.DemoConfig(), 17)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// greedy runs a prompt and steps greedy decode steps on s, returning every
// logit vector it saw (the prompt's, then one per step).
func greedy(ctx context.Context, s generate.Session, prompt []int, steps int) ([][]float32, error) {
	all, err := s.Forward(ctx, prompt, 0, true)
	if err != nil {
		return nil, err
	}
	pos := len(prompt)
	for range steps {
		next := sample.Argmax(all[len(all)-1])
		l, err := s.Forward(ctx, []int{next}, pos, false)
		if err != nil {
			return nil, err
		}
		all = append(all, l[0])
		pos++
	}
	return all, nil
}

// 24 sessions with different prompts and lengths, all at once through one
// batcher (prompts chunked at 5 tokens so that they interleave with other
// sessions' decode): every logit equals the session's run alone.
func TestConcurrentSessionsAreBitIdentical(t *testing.T) {
	m := demo(t)
	b, err := batch.New(batch.Config{Model: m, Chunk: 5, MaxTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pool, _ := model.NewKVPool(0, 16)
	rng := rand.New(rand.NewPCG(4, 4))
	const sessions = 24
	prompts := make([][]int, sessions)
	steps := make([]int, sessions)
	for i := range prompts {
		for range 1 + rng.IntN(30) {
			prompts[i] = append(prompts[i], rng.IntN(m.Config().VocabSize))
		}
		steps[i] = 1 + rng.IntN(40)
	}
	got := make([][][]float32, sessions)
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			s, err := b.NewSession(pool)
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			got[i], errs[i] = greedy(context.Background(), s, prompts[i], steps[i])
		})
	}
	wg.Wait()
	for i := range sessions {
		if errs[i] != nil {
			t.Fatalf("session %d: %v", i, errs[i])
		}
		alone, _ := generate.NewLocal(m)
		want, err := greedy(context.Background(), alone, prompts[i], steps[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(got[i]) != len(want) {
			t.Fatalf("session %d: %d logit rows, want %d", i, len(got[i]), len(want))
		}
		for p := range want {
			for v := range want[p] {
				if math.Float32bits(got[i][p][v]) != math.Float32bits(want[p][v]) {
					t.Fatalf("session %d, position %d, logit %d: batched %v, alone %v", i, p, v, got[i][p][v], want[p][v])
				}
			}
		}
	}
	st := b.Stats()
	if st.Steps == 0 || st.Tokens/st.Steps < 2 {
		t.Errorf("%d tokens in %d steps: the sessions were not batched", st.Tokens, st.Steps)
	}
	if pool.Used() != 0 {
		t.Errorf("closed sessions still hold %d bytes of KV", pool.Used())
	}
	t.Logf("%d tokens in %d steps (%.1f per step)", st.Tokens, st.Steps, float64(st.Tokens)/float64(st.Steps))
}

// A session that cannot get KV blocks fails with ErrKVBudget; the sessions
// beside it in the same steps go on unharmed.
func TestBudgetRefusesOneSessionOnly(t *testing.T) {
	m := demo(t)
	c := m.Config()
	b, _ := batch.New(batch.Config{Model: m})
	defer b.Close()
	perBlock := int64(c.NLayers) * 2 * 16 * int64(c.KVDim()) * 4
	pool, _ := model.NewKVPool(4*perBlock, 16)
	small, _ := b.NewSession(pool)
	big, _ := b.NewSession(pool)
	prompt := make([]int, 40) // 3 blocks
	for i := range prompt {
		prompt[i] = i + 1
	}
	var wg sync.WaitGroup
	var smallErr, bigErr error
	wg.Go(func() { _, smallErr = greedy(context.Background(), small, prompt[:10], 20) }) // 2 blocks by the end
	wg.Go(func() { _, bigErr = big.Forward(context.Background(), prompt, 0, false) })
	wg.Wait()
	// Whichever got its blocks first, at most one can hold 2+3 > 4 blocks.
	if (smallErr == nil) == (bigErr == nil) {
		t.Fatalf("small session: %v; big one: %v; want exactly one refused", smallErr, bigErr)
	}
	refused := smallErr
	if refused == nil {
		refused = bigErr
	}
	if !errors.Is(refused, model.ErrKVBudget) {
		t.Fatalf("refused with %v, want ErrKVBudget", refused)
	}
	t.Logf("refused: %v", refused)
}

// A cancelled request ends at the next step with its context's error.
func TestCancelledRequestEnds(t *testing.T) {
	m := demo(t)
	b, _ := batch.New(batch.Config{Model: m, Chunk: 1})
	defer b.Close()
	s, _ := b.NewSession(nil)
	ctx, cancel := context.WithCancel(context.Background())
	prompt := make([]int, 200)
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	_, err := s.Forward(ctx, prompt, 0, false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled 200-step prompt gave %v", err)
	}
}

// ForwardArgmax, which reuses one logits buffer per session, picks the
// token the logits of a whole-model run pick, step after step, with other
// sessions decoding beside it in the same steps.
func TestForwardArgmaxMatchesForward(t *testing.T) {
	m := demo(t)
	b, err := batch.New(batch.Config{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const sessions, steps = 4, 30
	got := make([][]int, sessions)
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			s, err := b.NewSession(nil)
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			tok, pos := 1+i, 0
			for range steps {
				if tok, errs[i] = s.ForwardArgmax(context.Background(), []int{tok}, pos); errs[i] != nil {
					return
				}
				got[i] = append(got[i], tok)
				pos++
			}
		})
	}
	wg.Wait()
	for i := range sessions {
		if errs[i] != nil {
			t.Fatalf("session %d: %v", i, errs[i])
		}
		alone, _ := generate.NewLocal(m)
		tok := 1 + i
		for p := range steps {
			l, err := alone.Forward(context.Background(), []int{tok}, p, false)
			if err != nil {
				t.Fatal(err)
			}
			tok = sample.Argmax(l[0])
			if got[i][p] != tok {
				t.Fatalf("session %d, step %d: ForwardArgmax gave %d, the whole model's logits %d", i, p, got[i][p], tok)
			}
		}
	}
}

// ForwardInto writes the bits Forward returns, step after step, into the
// caller's buffer, and refuses a buffer of the wrong length.
func TestForwardIntoMatchesForward(t *testing.T) {
	m := demo(t)
	b, err := batch.New(batch.Config{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	into, _ := b.NewSession(nil)
	plain, _ := b.NewSession(nil)
	defer into.Close()
	defer plain.Close()
	buf := make([]float32, into.VocabSize())
	tokens, pos := []int{1, 5, 9}, 0
	for step := range 20 {
		if err := into.ForwardInto(ctx, tokens, pos, buf); err != nil {
			t.Fatal(err)
		}
		want, err := plain.Forward(ctx, tokens, pos, false)
		if err != nil {
			t.Fatal(err)
		}
		for v := range buf {
			if math.Float32bits(buf[v]) != math.Float32bits(want[0][v]) {
				t.Fatalf("step %d, logit %d: ForwardInto %v, Forward %v", step, v, buf[v], want[0][v])
			}
		}
		pos += len(tokens)
		tokens = []int{sample.Argmax(buf)}
	}
	if err := into.ForwardInto(ctx, tokens, pos, buf[:10]); err == nil {
		t.Error("a buffer of 10 logits was accepted")
	}
}
