package link

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Prober runs one probe exchange over a link: it sends n payload bytes and
// returns once the peer has acknowledged receiving all of them.
type Prober interface {
	Probe(ctx context.Context, n int) error
}

// MeasureOptions bound a measurement.
type MeasureOptions struct {
	Pings    int           // small round trips for the RTT (default 5; the minimum is kept)
	MinTime  time.Duration // a bandwidth transfer is grown until it takes this long (default 40 ms)
	MaxBytes int           // largest bandwidth transfer (default 8 MiB)
}

// Figures are a measured link's round trip and bandwidth.
type Figures struct {
	RTT  time.Duration
	Mbps float64
}

// Measure measures a link's round-trip time with small probes and its
// bandwidth with a transfer doubled from 64 KiB until it lasts MinTime (or
// reaches MaxBytes): bytes over (transfer time - RTT), since a transfer's
// acknowledgement arrives one round trip after its last byte is sent.
func Measure(ctx context.Context, p Prober, opt MeasureOptions) (Figures, error) {
	if opt.Pings <= 0 {
		opt.Pings = 5
	}
	if opt.MinTime <= 0 {
		opt.MinTime = 40 * time.Millisecond
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = 8 << 20
	}
	timed := func(n int) (time.Duration, error) {
		t0 := time.Now()
		err := p.Probe(ctx, n)
		return time.Since(t0), err
	}
	var rtts []time.Duration
	for range opt.Pings + 1 { // the first warms the path up
		d, err := timed(1)
		if err != nil {
			return Figures{}, fmt.Errorf("link probe: %w", err)
		}
		rtts = append(rtts, d)
	}
	rtt := slices.Min(rtts[1:])
	n := min(64<<10, opt.MaxBytes)
	for {
		d, err := timed(n)
		if err != nil {
			return Figures{}, fmt.Errorf("link probe of %d bytes: %w", n, err)
		}
		if d >= opt.MinTime || n >= opt.MaxBytes {
			wire := max(d-rtt, time.Microsecond)
			return Figures{RTT: rtt, Mbps: float64(n) * 8 / wire.Seconds() / 1e6}, nil
		}
		n = min(2*n, opt.MaxBytes)
	}
}
