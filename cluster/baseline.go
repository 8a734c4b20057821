package cluster

import (
	"fmt"
	"math"
)

// EvenPlan splits the layers evenly over all members in the order given,
// f32 at every boundary: the split a user makes by hand. It returns the
// plan even when it does not fit, with the error saying which member is
// over its memory.
func EvenPlan(r Request) (*Plan, error) {
	r, err := r.withDefaults()
	if err != nil {
		return nil, err
	}
	L, k := r.Shape.Config.NLayers, len(r.Members)
	if k > L {
		return nil, fmt.Errorf("cannot split %d layers over %d members", L, k)
	}
	ranges := make([][2]int, k)
	for i := range ranges {
		ranges[i] = [2]int{i * L / k, (i + 1) * L / k}
	}
	return r.fixed(r.Members, ranges)
}

// ProportionalPlan is exo's rule: each member, in the order given, takes a
// share of the layers proportional to its memory (the boundaries are the
// rounded cumulative memory fractions), f32 at every boundary. A member
// whose share rounds to zero layers is left out.
func ProportionalPlan(r Request) (*Plan, error) {
	r, err := r.withDefaults()
	if err != nil {
		return nil, err
	}
	L := r.Shape.Config.NLayers
	var total float64
	for _, m := range r.Members {
		total += float64(m.Free)
	}
	var ms []Member
	var ranges [][2]int
	var cum float64
	start := 0
	for _, m := range r.Members {
		cum += float64(m.Free)
		end := int(math.Round(cum / total * float64(L)))
		if end > start {
			ms = append(ms, m)
			ranges = append(ranges, [2]int{start, end})
		}
		start = end
	}
	return r.fixed(ms, ranges)
}

// fixed evaluates given ranges with f32 boundaries and checks memory.
func (r *Request) fixed(ms []Member, ranges [][2]int) (*Plan, error) {
	p, err := r.build(ms, ranges, false)
	if err != nil {
		return nil, err
	}
	for i, st := range p.Stages {
		if st.Bytes > st.Member.Free {
			return p, fmt.Errorf("stage %d on %s needs %s for layers [%d, %d) but it has %s free: short by %s",
				i+1, st.Member.String(), GiB(st.Bytes), st.First, st.Last, GiB(st.Member.Free), GiB(st.Bytes-st.Member.Free))
		}
	}
	return p, nil
}

// Evaluate predicts the speed of a chain given by hand: members in order,
// their ranges, every boundary f32.
func Evaluate(r Request, ms []Member, ranges [][2]int) (*Plan, error) {
	r, err := r.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(ms) != len(ranges) || len(ms) == 0 {
		return nil, fmt.Errorf("%d members for %d ranges", len(ms), len(ranges))
	}
	next := 0
	for i, rg := range ranges {
		if rg[0] != next || rg[1] <= rg[0] {
			return nil, fmt.Errorf("range %d [%d, %d) does not continue from layer %d", i+1, rg[0], rg[1], next)
		}
		next = rg[1]
	}
	if next != r.Shape.Config.NLayers {
		return nil, fmt.Errorf("ranges end at layer %d, the model has %d", next, r.Shape.Config.NLayers)
	}
	return r.fixed(ms, ranges)
}
