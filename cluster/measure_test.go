package cluster

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/wire"
)

func TestProbeSpeed(t *testing.T) {
	w, err := synth.Weights(synth.DemoConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ProbeSpeed(w, ProbeOptions{Rounds: 3, Batch: 16})
	if err != nil {
		t.Fatal(err)
	}
	m := Member{Name: "x", Free: 1 << 30, Speed: sp, Encodings: []wire.EncodingID{wire.EncodingF32}}
	if err := m.Validate(); err != nil {
		t.Fatalf("probe %+v: %v", sp, err)
	}
	t.Logf("demo model: %+v", sp)
}

// streamProber sends a 4-byte length and that many bytes; the echo side
// answers one byte once it has read them all.
type streamProber struct{ c net.Conn }

func (p streamProber) Probe(ctx context.Context, n int) error {
	buf := make([]byte, 4+n)
	binary.LittleEndian.PutUint32(buf, uint32(n))
	if _, err := p.c.Write(buf); err != nil {
		return err
	}
	var ack [1]byte
	_, err := io.ReadFull(p.c, ack[:])
	return err
}

func echo(c net.Conn) {
	defer c.Close()
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.LittleEndian.Uint32(hdr[:]))); err != nil {
			return
		}
		if _, err := c.Write([]byte{1}); err != nil {
			return
		}
	}
}

// Over an emulated 40 Mbit/s link with 30 ms one-way latency (on the
// prober's side only: the ack crosses loopback), the measurement finds the
// rate and a round trip of about 30 ms. The latency is long beside the
// timed probe (64 KiB, 13 ms on the wire), so that a formula that forgot to
// take the round trip off gives 12 Mbit/s (tried: 11.8 and 11.9), far
// outside the bounds, while a loaded machine's jitter (the shaper paces in
// user space) stays inside them.
func TestMeasureLink(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			echo(c)
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	lc, err := link.Wrap(raw, link.Config{RateMbps: 40, Latency: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	l, err := MeasureLink(context.Background(), streamProber{lc}, MeasureOptions{Pings: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured %v", l)
	// Measured on this machine: 30.4-30.7 ms and 37.4-40.4 Mbit/s idle,
	// 32.6-39.6 Mbit/s beside another package's tests (a CI run saw the
	// old 10 ms version read 33.7, under its bound of 34 there). The rate's
	// bounds allow twice the worst deviation seen.
	if l.RTT < 30*time.Millisecond || l.RTT > 36*time.Millisecond {
		t.Errorf("RTT %v, want about 30 ms", l.RTT)
	}
	if l.Mbps < 26 || l.Mbps > 48 {
		t.Errorf("bandwidth %.1f Mbit/s, want about 40", l.Mbps)
	}
}

func TestAvailableMemory(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo on this system")
	}
	n, err := AvailableMemory()
	if err != nil || n <= 0 {
		t.Fatalf("%d, %v", n, err)
	}
}
