package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"testing"
	"time"
)

// Timing bounds in these tests are one-sided where the code guarantees a
// side: time.Sleep never returns early and the bucket never goes negative,
// so "no earlier than" and "no faster than" are asserted exactly. The other
// side (how late) depends on scheduling on a loaded 2-core machine running
// other builds; those bounds are loose (hundreds of ms), and each is set far
// from the value the bug it guards against would produce.

// loopback returns a connected TCP pair over 127.0.0.1.
func loopback(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func wrap(t *testing.T, c net.Conn, cfg Config) *Conn {
	t.Helper()
	l, err := Wrap(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLatencyDelaysButDoesNotBlockWriter(t *testing.T) {
	const latency = 80 * time.Millisecond
	c, s := loopback(t)
	l := wrap(t, c, Config{Latency: latency})
	t0 := time.Now()
	if _, err := l.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	writeTook := time.Since(t0)
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil {
		t.Fatal(err)
	}
	arrived := time.Since(t0)
	// Write only copies and queues: blocking for the latency would take 80 ms.
	if writeTook > latency/2 {
		t.Errorf("Write blocked for %v with latency %v", writeTook, latency)
	}
	if arrived < latency || arrived > latency+300*time.Millisecond {
		t.Errorf("bytes arrived after %v, want %v (+ scheduling slack)", arrived, latency)
	}
}

// Ten writes 10 ms apart on a 400 ms link are all in flight together: the
// last arrives ~490 ms after the first write; serialized latency would take
// over 4 s. The long latency keeps the two outcomes far apart even on a
// loaded 2-core machine, where scheduling delays reach hundreds of ms.
func TestLatencyIsPipelined(t *testing.T) {
	const latency = 400 * time.Millisecond
	c, s := loopback(t)
	l := wrap(t, c, Config{Latency: latency})
	const n = 10
	sent := make(chan time.Time, n) // each time is sent before its Write
	t0 := time.Now()
	go func() {
		for i := range n {
			sent <- time.Now()
			if _, err := l.Write([]byte{byte(i)}); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	buf := make([]byte, 1)
	for i := range n {
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if buf[0] != byte(i) {
			t.Fatalf("byte %d is %d: order lost", i, buf[0])
		}
		if d := now.Sub(<-sent); d < latency {
			t.Errorf("byte %d arrived %v after its write, want >= %v", i, d, latency)
		}
	}
	if total := time.Since(t0); total > 2*time.Second {
		t.Errorf("10 pipelined writes took %v; expected ~490 ms, serialized would be >= 4 s", total)
	}
}

// readAll reads n bytes and returns how long it took from start.
func readAll(t *testing.T, s net.Conn, n int, start time.Time) (time.Duration, []byte) {
	t.Helper()
	buf := make([]byte, n)
	if _, err := io.ReadFull(s, buf); err != nil {
		t.Fatal(err)
	}
	return time.Since(start), buf
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// 8 Mbit/s is 1e6 bytes/s, and the default bucket has no burst, so 400000
// bytes cannot all arrive sooner than 400 ms after the write began.
func TestBandwidth(t *testing.T) {
	c, s := loopback(t)
	l := wrap(t, c, Config{RateMbps: 8})
	const n = 400000
	data := pattern(n)
	t0 := time.Now()
	go func() {
		if _, err := l.Write(data); err != nil {
			t.Error(err)
		}
	}()
	took, got := readAll(t, s, n, t0)
	if !bytes.Equal(got, data) {
		t.Fatal("bytes changed in transit")
	}
	// The upper bound allows 3x plus 0.5 s for scheduling on a loaded
	// machine; it still catches a bits-for-bytes unit error (8x, 3.2 s).
	minTook := 400 * time.Millisecond
	if took < minTook || took > 3*minTook+500*time.Millisecond {
		t.Errorf("%d bytes at 8 Mbit/s took %v; want >= %v (and not far above)", n, took, minTook)
	}
}

// With both, the last byte arrives no earlier than latency + (n-burst)/rate,
// and the writer is held until all but Buffer (+ one chunk, + the burst)
// bytes are serialized.
func TestBandwidthAndLatency(t *testing.T) {
	c, s := loopback(t)
	const latency = 50 * time.Millisecond
	const n, burst, buffer = 200000, 4000, 20000
	l := wrap(t, c, Config{RateMbps: 8, Latency: latency, Burst: burst, Buffer: buffer})
	data := pattern(n)
	t0 := time.Now()
	var writeTook time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := l.Write(data); err != nil {
			t.Error(err)
		}
		writeTook = time.Since(t0)
	}()
	took, got := readAll(t, s, n, t0)
	<-done
	if !bytes.Equal(got, data) {
		t.Fatal("bytes changed in transit")
	}
	atRate := func(bytes int) time.Duration { return time.Duration(float64(bytes) / 1e6 * float64(time.Second)) }
	// The chunk at 1e6 bytes/s is the 1500-byte minimum.
	if minWrite := atRate(n - burst - buffer - 1500); writeTook < minWrite {
		t.Errorf("Write returned after %v, before %v: a full buffer must block the writer", writeTook, minWrite)
	}
	minTook := atRate(n-burst) + latency                         // 246 ms
	if took < minTook || took > 3*minTook+500*time.Millisecond { // see TestBandwidth
		t.Errorf("last byte after %v, want >= %v", took, minTook)
	}
}

// The virtual clock's arithmetic, without waiting for deliveries: chunks
// booked back to back are spaced by exactly their serialization time; an
// idle wire restarts from the present, less the burst allowance.
func TestScheduleArithmetic(t *testing.T) {
	l := wrap(t, brokenConn{}, Config{RateMbps: 8, Latency: time.Second, Burst: 2000, Buffer: 1 << 30})
	defer l.Close()
	t0 := time.Now()
	a := l.schedule(1000)
	b := l.schedule(1500)
	c := l.schedule(1)
	t1 := time.Now()
	// 1000 bytes at 1e6 B/s = 1 ms; the first starts at most 2 ms (the burst)
	// before its booking time, which lies in [t0, t1].
	if lo, hi := t0.Add(time.Second-time.Millisecond), t1.Add(time.Second+time.Millisecond); a.Before(lo) || a.After(hi) {
		t.Errorf("first chunk due %v after t0, want within [%v, %v]", a.Sub(t0), lo.Sub(t0), hi.Sub(t0))
	}
	if d := b.Sub(a); d != 1500*time.Microsecond {
		t.Errorf("1500 bytes booked %v after the previous chunk, want 1.5 ms", d)
	}
	if d := c.Sub(b); d != time.Microsecond {
		t.Errorf("1 byte booked %v after the previous chunk, want 1 µs", d)
	}
}

func TestZeroConfigPassesThrough(t *testing.T) {
	c, s := loopback(t)
	l := wrap(t, c, Config{})
	if !l.direct {
		t.Fatal("zero config should not emulate")
	}
	t0 := time.Now()
	if _, err := l.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if took, _ := readAll(t, s, 1, t0); took > 200*time.Millisecond {
		t.Errorf("pass-through took %v", took)
	}
}

// Concurrent writers: every Write's bytes stay contiguous (a frame is never
// split by another writer's bytes), and nothing is lost. Run with -race.
func TestConcurrentWriters(t *testing.T) {
	c, s := loopback(t)
	l := wrap(t, c, Config{RateMbps: 400, Latency: 5 * time.Millisecond, Burst: 2000})
	const writers, msgs, size = 4, 30, 3000 // each message spans several chunks
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for m := range msgs {
				b := make([]byte, size)
				for i := 0; i < size; i += 8 {
					binary.LittleEndian.PutUint32(b[i:], uint32(w))
					binary.LittleEndian.PutUint32(b[i+4:], uint32(m))
				}
				if _, err := l.Write(b); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	next := make([]uint32, writers)
	buf := make([]byte, size)
	for range writers * msgs {
		if _, err := io.ReadFull(s, buf); err != nil {
			t.Fatal(err)
		}
		w, m := binary.LittleEndian.Uint32(buf), binary.LittleEndian.Uint32(buf[4:])
		if w >= writers || m != next[w] {
			t.Fatalf("message from writer %d seq %d out of order (want seq %d)", w, m, next[w])
		}
		for i := 0; i < size; i += 8 {
			if binary.LittleEndian.Uint32(buf[i:]) != w || binary.LittleEndian.Uint32(buf[i+4:]) != m {
				t.Fatalf("writer %d message %d interleaved at byte %d", w, m, i)
			}
		}
		next[w]++
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// Close delivers what was written, after its latency, then closes.
func TestCloseFlushes(t *testing.T) {
	c, s := loopback(t)
	const latency = 50 * time.Millisecond
	l := wrap(t, c, Config{Latency: latency})
	data := pattern(10000)
	t0 := time.Now()
	if _, err := l.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if took := time.Since(t0); took < latency {
		t.Errorf("data and EOF after %v, before the latency %v", took, latency)
	}
	if _, err := l.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
	if err := l.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second close: %v", err)
	}
}

// brokenConn fails every write.
type brokenConn struct{ net.Conn }

var errBroken = errors.New("broken pipe (test)")

func (brokenConn) Write([]byte) (int, error) { return 0, errBroken }
func (brokenConn) Close() error              { return nil }

func TestDeliveryErrorSurfaces(t *testing.T) {
	l := wrap(t, brokenConn{}, Config{Latency: time.Millisecond})
	if _, err := l.Write([]byte("a")); err != nil {
		t.Fatalf("first write is only queued: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if _, err = l.Write([]byte("b")); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, errBroken) {
		t.Fatalf("later write: %v, want the delivery error", err)
	}
	if err := l.Close(); !errors.Is(err, errBroken) {
		t.Fatalf("close: %v, want the delivery error", err)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{{RateMbps: -1}, {RateMbps: math.NaN()}, {RateMbps: math.Inf(1)}, {Latency: -time.Millisecond}, {Burst: -1}} {
		if _, err := Wrap(brokenConn{}, cfg); err == nil {
			t.Errorf("Wrap accepted %+v", cfg)
		}
	}
}

// BenchmarkThroughput reports the rate achieved through the emulation over
// loopback against the configured one (Mbit/s).
func BenchmarkThroughput(b *testing.B) {
	for _, rate := range []float64{100, 1000} {
		b.Run(fmt.Sprintf("rate=%v", rate), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Skip(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err == nil {
					_, _ = io.Copy(io.Discard, c)
					c.Close()
				}
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			l, err := Wrap(c, Config{RateMbps: rate, Latency: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			msg := make([]byte, 64<<10)
			b.SetBytes(int64(len(msg)))
			t0 := time.Now()
			for b.Loop() {
				if _, err := l.Write(msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(msg))*8/1e6/time.Since(t0).Seconds(), "Mbit/s")
		})
	}
}
