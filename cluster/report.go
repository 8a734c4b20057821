package cluster

import (
	"fmt"
	"io"
)

// Comparison is a plan beside the splits users would otherwise make.
type Comparison struct {
	Plan            *Plan
	Even, Exo       *Plan // nil when it could not be evaluated
	EvenErr, ExoErr error // why it does not fit, or could not be evaluated
}

// Compare plans r and evaluates the even and memory-proportional (exo)
// splits over all members in the order given, for comparison.
func Compare(r Request) (*Comparison, error) {
	p, err := MakePlan(r)
	if err != nil {
		return nil, err
	}
	c := &Comparison{Plan: p}
	c.Even, c.EvenErr = EvenPlan(r)
	c.Exo, c.ExoErr = ProportionalPlan(r)
	return c, nil
}

// Write prints the comparison for people.
func (c *Comparison) Write(w io.Writer) {
	fmt.Fprint(w, c.Plan.String())
	fmt.Fprintln(w, "\nwhy:")
	for _, r := range c.Plan.Reasons {
		fmt.Fprintln(w, "  "+r)
	}
	fmt.Fprintln(w, "\nfor comparison (every member, in the order given, f32):")
	for _, alt := range []struct {
		name string
		p    *Plan
		err  error
	}{{"even split", c.Even, c.EvenErr}, {"memory-proportional split (exo)", c.Exo, c.ExoErr}} {
		switch {
		case alt.p == nil:
			fmt.Fprintf(w, "  %s: %v\n", alt.name, alt.err)
		case alt.err != nil:
			fmt.Fprintf(w, "  %s %v: does not fit: %v\n", alt.name, alt.p.Ranges(), alt.err)
		default:
			fmt.Fprintf(w, "  %s %v: %s\n", alt.name, alt.p.Ranges(), alt.p.Predicted)
		}
	}
}
