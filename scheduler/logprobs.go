package scheduler

import (
	"sort"

	"github.com/seamlm/seam/generate"
)

// logprobs fills t.Logprob and t.Top from the logits the token was sampled
// from. Log-probabilities are those of the model's own distribution (a log
// softmax of the raw logits, in float64), whatever the temperature and top_p
// used to sample: the same convention as OpenAI's.
func (g *generation) logprobs(t *Token, prev int, logits []float32) {
	lse := generate.LogSumExp(logits)
	t.Logprob = float64(logits[t.ID]) - lse
	k := g.req.TopLogprobs
	if k == 0 {
		return
	}
	for _, id := range topK(logits, k) {
		t.Top = append(t.Top, Alternative{ID: id, Text: g.s.cfg.Tokenizer.Decode(prev, id), Logprob: float64(logits[id]) - lse})
	}
}

// topK returns the ids of the k largest logits, largest first (lower id
// first on ties), in O(len(x)·k) with k <= MaxTopLogprobs.
func topK(x []float32, k int) []int {
	k = min(k, len(x))
	best := make([]int, 0, k+1)
	for id, v := range x {
		if len(best) == k && v <= x[best[k-1]] {
			continue
		}
		i := sort.Search(len(best), func(i int) bool { return x[best[i]] < v })
		best = append(best, 0)
		copy(best[i+1:], best[i:])
		best[i] = id
		if len(best) > k {
			best = best[:k]
		}
	}
	return best
}
