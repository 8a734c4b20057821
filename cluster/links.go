package cluster

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/seamlm/seam/link"
)

// HeadName names the head in a link table.
const HeadName = "head"

// Link is a measured network path between two nodes.
type Link struct {
	RTT  time.Duration // round trip of a small frame
	Mbps float64       // sustained bandwidth, megabits (10^6) per second
}

func (l Link) String() string {
	return fmt.Sprintf("%s Mbit/s, %s RTT", fmtMbps(l.Mbps), l.RTT.Round(10*time.Microsecond))
}

func fmtMbps(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// Validate checks a link's figures.
func (l Link) Validate() error {
	if l.RTT < 0 || l.RTT > time.Minute {
		return fmt.Errorf("round trip %v, want 0..1m", l.RTT)
	}
	if !(l.Mbps > 0) || math.IsInf(l.Mbps, 0) || l.Mbps > 1e7 {
		return fmt.Errorf("bandwidth %v Mbit/s, want a positive finite number up to 1e7", l.Mbps)
	}
	return nil
}

// transfer is the time one message of n bytes takes: half the round trip
// plus serialization.
func (l Link) transfer(n int) float64 {
	return l.RTT.Seconds()/2 + float64(n)*8/(l.Mbps*1e6)
}

// Links holds measured links by node name (HeadName for the head). A link
// is taken to be the same in both directions.
type Links map[[2]string]Link

// Set records the link between a and b.
func (ls Links) Set(a, b string, l Link) { ls[[2]string{a, b}] = l }

// Get returns the link between a and b (either direction). A node's link
// to itself is loopback, if not measured: 50 µs, 20 Gbit/s.
func (ls Links) Get(a, b string) (Link, error) {
	if l, ok := ls[[2]string{a, b}]; ok {
		return l, nil
	}
	if l, ok := ls[[2]string{b, a}]; ok {
		return l, nil
	}
	if a == b {
		return Link{RTT: 50 * time.Microsecond, Mbps: 20000}, nil
	}
	return Link{}, fmt.Errorf("no measurement of the link between %s and %s", a, b)
}

// Prober runs one probe exchange over a link (see link.Prober).
type Prober = link.Prober

// MeasureOptions bound a link measurement (see link.MeasureOptions).
type MeasureOptions = link.MeasureOptions

// MeasureLink measures a link with probes (link.Measure) and checks the
// figures.
func MeasureLink(ctx context.Context, p Prober, opt MeasureOptions) (Link, error) {
	f, err := link.Measure(ctx, p, opt)
	if err != nil {
		return Link{}, err
	}
	l := Link{RTT: f.RTT, Mbps: f.Mbps}
	return l, l.Validate()
}
