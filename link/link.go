// Package link emulates a slower network on the sending side of a
// connection, for benchmarks: a bandwidth limit and a one-way latency,
// applied to bytes written.
//
// The model is a real link's. Bytes are serialized onto the emulated wire at
// the rate, one after another, and each arrives a latency after its own
// serialization ends. A virtual clock schedules every chunk: it starts when
// the wire is free (or when written, if later), finishes len/rate after, and
// is handed to the underlying connection by a goroutine at finish+latency.
// This is the virtual-scheduling form of a token bucket (GCRA): over any
// interval T, at most Burst + rate*T bytes finish serialization.
//
// Latency is pipelined: a writer never waits for it, and many writes are in
// flight at once. Bandwidth is not: like a socket whose send buffer is full,
// Write blocks while more than Buffer bytes are waiting to be serialized, so
// a sustained writer goes at the rate. Because delivery times come from the
// virtual clock, a writer that is scheduled late does not slow the emulated
// wire as long as the buffer holds work.
//
// Reads pass through untouched: emulate each direction on its sending side.
package link

import (
	"fmt"
	"math"
	"net"
	"sync"
	"time"
)

// Config describes the emulated link. Zero values disable each effect, and
// zero sizes take their defaults.
type Config struct {
	RateMbps float64       // bandwidth in megabits (10^6 bits) per second
	Latency  time.Duration // one-way delay added to every byte
	// Burst is the token bucket's depth in bytes: how far an idle link may
	// run ahead of the rate. Zero means none: every byte takes its
	// serialization time.
	Burst int
	// Buffer is how many bytes a writer may run ahead of serialization
	// before Write blocks. Zero picks max(64 KiB, 20 ms of rate).
	Buffer int
}

// Internal sizes.
const (
	minChunk  = 1500     // one Ethernet MTU
	maxChunk  = 64 << 10 // largest piece scheduled at once
	maxQueued = 64 << 20 // bytes in flight before Write blocks when only latency applies
)

// Conn is a net.Conn whose writes go through the emulated link. It is safe
// for concurrent use; each Write's bytes stay contiguous. Deadlines are
// passed to the underlying connection, where they bound delivery; the
// blocking in Write does not observe them.
type Conn struct {
	net.Conn
	direct    bool          // no emulation at all
	rate      float64       // bytes per second; 0 = unlimited
	tolerance time.Duration // Burst expressed in time
	ahead     time.Duration // Buffer expressed in time
	delay     time.Duration
	chunk     int

	wmu  sync.Mutex // serializes writers: schedule order and contiguity
	next time.Time  // when the emulated wire is free

	qmu     sync.Mutex
	cond    *sync.Cond // signals queue changes to the deliverer and writers
	queue   []packet
	queued  int   // bytes queued or being delivered
	closing bool  // Close was called
	err     error // first delivery error; later writes return it
	done    chan struct{}
	pool    sync.Pool
}

type packet struct {
	buf *[]byte
	at  time.Time
}

// Wrap returns c with the link emulation cfg applied to its writes.
func Wrap(c net.Conn, cfg Config) (*Conn, error) {
	if !(cfg.RateMbps >= 0) || math.IsInf(cfg.RateMbps, 0) {
		return nil, fmt.Errorf("link: rate %v Mbit/s, want a finite number >= 0", cfg.RateMbps)
	}
	if cfg.Latency < 0 || cfg.Burst < 0 || cfg.Buffer < 0 {
		return nil, fmt.Errorf("link: latency %v, burst %d and buffer %d must not be negative", cfg.Latency, cfg.Burst, cfg.Buffer)
	}
	l := &Conn{Conn: c, rate: cfg.RateMbps * 1e6 / 8, delay: cfg.Latency, chunk: maxChunk}
	l.direct = l.rate == 0 && l.delay == 0
	if l.direct {
		return l, nil
	}
	if l.rate > 0 {
		// About 1 ms of serialization per chunk: fine enough timing, few wakeups.
		l.chunk = int(min(maxChunk, max(minChunk, l.rate/1000)))
		buffer := float64(cfg.Buffer)
		if cfg.Buffer == 0 {
			buffer = max(64<<10, l.rate*0.020)
		}
		l.ahead = l.serialization(buffer)
		l.tolerance = l.serialization(float64(cfg.Burst))
		l.next = time.Now()
	}
	l.cond = sync.NewCond(&l.qmu)
	l.done = make(chan struct{})
	l.pool.New = func() any { b := make([]byte, 0, l.chunk); return &b }
	go l.deliver()
	return l, nil
}

// serialization is the time n bytes take at the rate, rounded up so that
// the emulated wire is never faster than configured.
func (l *Conn) serialization(n float64) time.Duration {
	return time.Duration(math.Ceil(n / l.rate * float64(time.Second)))
}

// Write schedules p on the emulated wire and queues it for delivery. It
// returns once p is queued; it blocks only while the send buffer is full.
// A delivery error shows up on a later Write or on Close, as with a socket.
func (l *Conn) Write(p []byte) (int, error) {
	if l.direct {
		return l.Conn.Write(p)
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	written := 0
	for len(p) > 0 {
		n := min(len(p), l.chunk)
		var at time.Time
		if l.rate > 0 {
			at = l.schedule(n)
		} else {
			at = time.Now().Add(l.delay)
		}
		if err := l.enqueue(p[:n], at); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// schedule waits while the backlog exceeds the buffer, then books n bytes
// on the wire and returns when they are to be delivered.
func (l *Conn) schedule(n int) time.Time {
	// l.next is never the zero time (Wrap sets it), so the subtraction
	// cannot saturate and wrap around.
	if wait := time.Until(l.next) - l.ahead; wait > 0 {
		time.Sleep(wait)
	}
	start := l.next
	if earliest := time.Now().Add(-l.tolerance); start.Before(earliest) {
		start = earliest // the wire was idle: serialization starts now
	}
	l.next = start.Add(l.serialization(float64(n)))
	return l.next.Add(l.delay)
}

// enqueue copies b into the delivery queue.
func (l *Conn) enqueue(b []byte, at time.Time) error {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	for l.rate == 0 && l.queued >= maxQueued && !l.closing && l.err == nil {
		l.cond.Wait()
	}
	switch {
	case l.closing:
		return net.ErrClosed
	case l.err != nil:
		return l.err
	}
	buf := l.pool.Get().(*[]byte)
	*buf = append((*buf)[:0], b...)
	l.queue = append(l.queue, packet{buf: buf, at: at})
	l.queued += len(b)
	l.cond.Broadcast()
	return nil
}

// deliver hands queued chunks to the underlying connection at their times,
// in order. After a failure it keeps draining (dropping) so writers never
// block on it. It exits once Close was called and the queue is empty.
func (l *Conn) deliver() {
	defer close(l.done)
	for {
		pk, ok := l.pop()
		if !ok {
			return
		}
		if d := time.Until(pk.at); d > 0 {
			time.Sleep(d)
		}
		l.qmu.Lock()
		failed := l.err != nil
		l.qmu.Unlock()
		var err error
		if !failed {
			_, err = l.Conn.Write(*pk.buf)
		}
		l.qmu.Lock()
		if err != nil && l.err == nil {
			l.err = fmt.Errorf("link: delivering queued bytes: %w", err)
		}
		l.queued -= len(*pk.buf)
		l.cond.Broadcast()
		l.qmu.Unlock()
		l.pool.Put(pk.buf)
	}
}

// pop takes the oldest packet, waiting for one; false once closed and empty.
func (l *Conn) pop() (packet, bool) {
	l.qmu.Lock()
	defer l.qmu.Unlock()
	for len(l.queue) == 0 && !l.closing {
		l.cond.Wait()
	}
	if len(l.queue) == 0 {
		return packet{}, false
	}
	pk := l.queue[0]
	l.queue[0] = packet{}
	l.queue = l.queue[1:]
	if len(l.queue) == 0 {
		l.queue = l.queue[:0:0] // let the backing array go once drained
	}
	return pk, true
}

// Close delivers every byte already written (each on its schedule, like
// data ahead of a FIN) and then closes the underlying connection. It returns
// a delivery error if one occurred. If the peer has stopped reading, set a
// write deadline first, or delivery may block.
func (l *Conn) Close() error {
	if l.direct {
		return l.Conn.Close()
	}
	l.qmu.Lock()
	if l.closing {
		l.qmu.Unlock()
		return net.ErrClosed
	}
	l.closing = true
	l.cond.Broadcast()
	l.qmu.Unlock()
	<-l.done
	l.qmu.Lock()
	derr := l.err
	l.qmu.Unlock()
	cerr := l.Conn.Close()
	switch {
	case derr != nil && cerr != nil:
		return fmt.Errorf("%w; closing: %w", derr, cerr)
	case derr != nil:
		return derr
	}
	return cerr
}
