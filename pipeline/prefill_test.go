package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
)

// A prompt longer than a stage's --max-prefill goes in several frames: the
// head learns the smallest limit of the chain at dial, and the logits equal
// the whole model's, every position and the last alone.
func TestLongPromptIsSplitToTheStagesLimit(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	local, err := stage.StartLocal(m.Weights, [][2]int{{0, 2}, {2, m.Weights.Config.NLayers}},
		stage.Config{Identity: id, Timeout: 5 * time.Second, Logger: quiet, MaxPrefill: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	c, err := Dial(context.Background(), local.Addrs, Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.maxPrefill != 16 {
		t.Fatalf("the head learned a prefill limit of %d, want the stages' 16", c.maxPrefill)
	}
	tokens := m.Tokenizer.Encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine with her friends.", true, false)
	if len(tokens) <= 2*16 {
		t.Fatalf("prompt of %d tokens: want more than two frames' worth", len(tokens))
	}
	mod, _ := model.New(m.Weights)
	whole, _ := generate.NewLocal(mod)
	want, err := whole.Forward(context.Background(), tokens, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, all := range []bool{true, false} {
		s, err := c.NewSession(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Forward(context.Background(), tokens, 0, all)
		if err != nil {
			t.Fatalf("a %d-token prompt through stages that take 16 a frame: %v", len(tokens), err)
		}
		w := want
		if !all {
			w = want[len(want)-1:]
		}
		testmodels.SameBits(t, "split prompt", got, w)
		s.Close()
	}
}
