// Package sample picks the next token from logits: greedy, or by temperature
// with optional nucleus (top-p) truncation, from a seeded generator so that a
// run can be repeated exactly.
package sample

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Sampler chooses tokens. It is not safe for concurrent use.
type Sampler struct {
	temperature float64
	topP        float64
	rng         *rand.Rand
	probs       []float64
	order       []int
}

// New returns a sampler. Temperature 0 means greedy; topP in (0, 1] keeps the
// smallest set of tokens whose probability reaches topP (1 keeps all).
func New(temperature, topP float64, seed uint64) (*Sampler, error) {
	if math.IsNaN(temperature) || temperature < 0 || math.IsInf(temperature, 0) {
		return nil, fmt.Errorf("temperature %v: want a finite number >= 0", temperature)
	}
	if math.IsNaN(topP) || topP <= 0 || topP > 1 {
		return nil, fmt.Errorf("top-p %v: want a number in (0, 1]", topP)
	}
	return &Sampler{temperature: temperature, topP: topP, rng: rand.New(rand.NewPCG(seed, 0x5ea35ea3))}, nil
}

// Greedy reports whether the sampler always takes the most likely token.
func (s *Sampler) Greedy() bool { return s.temperature == 0 }

// Sample returns the chosen token id.
func (s *Sampler) Sample(logits []float32) int {
	if s.temperature == 0 {
		return Argmax(logits)
	}
	p := s.softmax(logits)
	if s.topP < 1 {
		return s.nucleus(p)
	}
	return pick(p, s.rng.Float64())
}

// Argmax returns the index of the largest value (the first, on ties).
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func (s *Sampler) softmax(logits []float32) []float64 {
	if cap(s.probs) < len(logits) {
		s.probs = make([]float64, len(logits))
	}
	p := s.probs[:len(logits)]
	maxv := math.Inf(-1)
	for _, v := range logits {
		maxv = math.Max(maxv, float64(v))
	}
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp((float64(v) - maxv) / s.temperature)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// pick draws from p using the uniform number u in [0, 1).
func pick(p []float64, u float64) int {
	var cdf float64
	for i, v := range p {
		cdf += v
		if u < cdf {
			return i
		}
	}
	return len(p) - 1 // rounding left u just above the total
}

// nucleus draws from the smallest set of most likely tokens whose mass
// reaches topP, in decreasing probability (ties in id order).
//
// Only candidates are sorted: the tokens of probability at least a cutoff.
// Every candidate is more likely than every other token, so the candidates,
// sorted, begin the order of all tokens; when their
// mass reaches topP the set, its mass and the draw are those of sorting all
// (and when, by rounding, it does not, all are sorted). The cutoff starts at
// the largest probability and drops 4x at a time until the tokens at or
// above it hold topP, so that a peaked distribution sorts a handful of
// tokens; it never needs to go below (1 - topP) / (n - 1), which holds the
// set already: if its least likely member m is not its first, the tokens
// from m on number at most n - 1, none above p[m], and hold more than
// 1 - topP (or fewer would have reached topP), so p[m] is above that; if m
// is the most likely token, p[m] >= 1/n, not below it when n*topP >= 1.
// Sorting all 32000 tokens of a vocabulary took most of a sampled decode
// step (9 ms).
func (s *Sampler) nucleus(p []float64) int {
	floor := 0.0
	if len(p) > 1 {
		floor = (1 - s.topP) / float64(len(p)-1)
	}
	cutoff := slices.Max(p)
	for cutoff > floor {
		var m float64
		for _, v := range p {
			if v >= cutoff {
				m += v
			}
		}
		if m >= s.topP {
			break
		}
		cutoff /= 4
	}
	order, mass, n := s.nucleusOf(p, max(cutoff, floor))
	if mass < s.topP && len(order) < len(p) {
		order, mass, n = s.nucleusOf(p, 0)
	}
	u := s.rng.Float64() * mass
	var cdf float64
	for _, id := range order[:n] {
		cdf += p[id]
		if u < cdf {
			return id
		}
	}
	return order[n-1]
}

// nucleusOf sorts the tokens of probability at least cutoff by decreasing
// probability (ties in id order) and returns them, with the mass of the
// first n, the fewest that reach topP (or all of them).
func (s *Sampler) nucleusOf(p []float64, cutoff float64) (order []int, mass float64, n int) {
	if cap(s.order) < len(p) {
		s.order = make([]int, len(p))
	}
	order = s.order[:0]
	for i, v := range p {
		if v >= cutoff {
			order = append(order, i)
		}
	}
	// Ids break ties, so that the order is the one a stable sort gives, by
	// an unstable sort that is several times faster.
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(p[b], p[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for n < len(order) {
		mass += p[order[n]]
		n++
		if mass >= s.topP {
			break
		}
	}
	return order, mass, n
}
