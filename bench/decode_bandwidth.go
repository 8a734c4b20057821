package bench

import (
	"fmt"
	"sync"
	"time"

	"github.com/seamlm/seam/kernels"
)

// bandwidthRounds is how many times ReadBandwidth reads its buffer; the
// first round is a warm-up and the best of the rest is reported.
const bandwidthRounds = 6

// ReadBandwidth measures how fast threads goroutines read memory, in GB/s
// (1e9 bytes): they split a buffer of size bytes (0 means 1 GiB, far beyond
// any cache) into equal parts and sum each with the kernels' SIMD dot
// product (kernels.Dot(a, a), one load stream per thread, the access pattern
// of a matrix-vector product). The buffer is Go heap memory, touched before
// timing; the best of 5 rounds after a warm-up round is returned.
func ReadBandwidth(threads int, size int64) (float64, error) {
	m, err := NewBandwidthMeter(size)
	if err != nil {
		return 0, err
	}
	return m.Measure(threads)
}

// A BandwidthMeter is ReadBandwidth with its buffer kept, for measuring
// again and again: filling a fresh GiB takes seconds, reading it a fraction
// of one.
type BandwidthMeter struct {
	buf []float32
}

// NewBandwidthMeter allocates and fills the buffer (size bytes, 0 meaning
// 1 GiB).
func NewBandwidthMeter(size int64) (*BandwidthMeter, error) {
	if size == 0 {
		size = 1 << 30
	}
	if size < 4*chunk {
		return nil, fmt.Errorf("read bandwidth: a buffer of %d bytes is smaller than one read of %d", size, 4*chunk)
	}
	buf := make([]float32, int(size/4))
	for i := range buf {
		buf[i] = float32(i & 1023)
	}
	return &BandwidthMeter{buf: buf}, nil
}

// Measure is ReadBandwidth over the meter's buffer.
func (m *BandwidthMeter) Measure(threads int) (float64, error) {
	if threads < 1 {
		return 0, fmt.Errorf("read bandwidth with %d threads: want at least 1", threads)
	}
	buf := m.buf
	n := len(buf)
	if n < threads*chunk {
		return 0, fmt.Errorf("read bandwidth: a buffer of %d bytes is too small for %d threads", 4*n, threads)
	}
	part := n / threads &^ (chunk - 1)
	best := 0.0
	var sink float32
	for round := range bandwidthRounds {
		sums := make([]float32, threads)
		var wg sync.WaitGroup
		start := time.Now()
		for t := range threads {
			wg.Go(func() {
				p := buf[t*part : (t+1)*part]
				var s float32
				for i := 0; i < len(p); i += chunk {
					c := p[i : i+chunk]
					s += kernels.Dot(c, c)
				}
				sums[t] = s
			})
		}
		wg.Wait()
		sec := time.Since(start).Seconds()
		for _, s := range sums {
			sink += s
		}
		if round > 0 {
			best = max(best, float64(threads*part*4)/sec/1e9)
		}
	}
	if sink != sink { // keep the sums alive; NaN cannot occur
		return 0, fmt.Errorf("read bandwidth: sum is NaN")
	}
	return best, nil
}

// chunk is how many floats one Dot call reads (256 KiB).
const chunk = 1 << 16
