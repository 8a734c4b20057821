// Package sample picks the next token from logits: greedy, or by temperature
// with optional nucleus (top-p) truncation, from a seeded generator so that a
// run can be repeated exactly.
package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
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

func (s *Sampler) nucleus(p []float64) int {
	if cap(s.order) < len(p) {
		s.order = make([]int, len(p))
	}
	order := s.order[:len(p)]
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]] > p[order[b]] })
	var mass float64
	n := 0
	for n < len(order) {
		mass += p[order[n]]
		n++
		if mass >= s.topP {
			break
		}
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
