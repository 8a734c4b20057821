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

// Over an emulated 40 Mbit/s link with 10 ms one-way latency (on the
// prober's side only: the ack crosses loopback), the measurement finds the
// rate and a round trip of about 10 ms.
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
	lc, err := link.Wrap(raw, link.Config{RateMbps: 40, Latency: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	l, err := MeasureLink(context.Background(), streamProber{lc}, MeasureOptions{Pings: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("measured %v", l)
	// Measured on this machine: 10.1–10.4 ms and 38–40 Mbit/s. The bounds
	// allow for a loaded machine, not for a wrong formula (which would be
	// off by the round trip or a factor of 8).
	if l.RTT < 10*time.Millisecond || l.RTT > 14*time.Millisecond {
		t.Errorf("RTT %v, want about 10 ms", l.RTT)
	}
	if l.Mbps < 34 || l.Mbps > 44 {
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
