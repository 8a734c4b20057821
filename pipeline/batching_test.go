package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
)

// Acceptance (issue 13): 32 concurrent sessions with different prompts and
// lengths through a 3-stage split, all on one chain: each session's
// teacher-forced logits equal its run alone on the whole model at every
// position, and the stages ran their frames in shared steps.
func TestConcurrentSessionsThroughStagesAreBitIdentical(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	ranges, _ := stage.EvenRanges(m.Weights.Config.NLayers, 3)
	local, err := stage.StartLocal(m.Weights, ranges, stage.Config{Identity: id, Timeout: 10 * time.Second, Logger: quiet, Chunk: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	c, err := Dial(context.Background(), local.Addrs, Options{Identity: id, Config: m.Weights.Config, Timeout: 10 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mod, _ := model.New(m.Weights)
	rng := rand.New(rand.NewPCG(13, 13))
	const sessions = 32
	type run struct {
		tokens []int
		prompt int
	}
	runs := make([]run, sessions)
	for i := range runs {
		n := 1 + rng.IntN(40)
		for range n + 1 + rng.IntN(30) {
			runs[i].tokens = append(runs[i].tokens, rng.IntN(m.Weights.Config.VocabSize))
		}
		runs[i].prompt = n
	}
	got := make([][][]float32, sessions)
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			s, err := c.NewSession(context.Background())
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			r := runs[i]
			l, err := s.Forward(context.Background(), r.tokens[:r.prompt], 0, true)
			if err != nil {
				errs[i] = err
				return
			}
			for p := r.prompt; p < len(r.tokens); p++ {
				next, err := s.Forward(context.Background(), r.tokens[p:p+1], p, false)
				if err != nil {
					errs[i] = fmt.Errorf("position %d: %w", p, err)
					return
				}
				l = append(l, next[0])
			}
			got[i] = l
		})
	}
	wg.Wait()
	for i := range sessions {
		if errs[i] != nil {
			t.Fatalf("session %d: %v", i, errs[i])
		}
		whole, _ := generate.NewLocal(mod)
		want, err := whole.Forward(context.Background(), runs[i].tokens, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		testmodels.SameBits(t, fmt.Sprintf("session %d (%d prompt + %d decoded)", i, runs[i].prompt, len(runs[i].tokens)-runs[i].prompt), got[i], want)
	}
	for k, srv := range local.Servers() {
		st := srv.BatchStats()
		t.Logf("stage %d: %d positions in %d steps (%.1f a step)", k+1, st.Tokens, st.Steps, float64(st.Tokens)/float64(st.Steps))
		if st.Steps == 0 || st.Tokens < 2*st.Steps {
			t.Errorf("stage %d ran %d positions in %d steps: the sessions were not batched", k+1, st.Tokens, st.Steps)
		}
	}
}
