//go:build linux

package netns

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/cluster"
)

// need skips without root or iproute2, except in CI, where the testbed
// must run (SEAM_REQUIRE_NETNS=1).
func need(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("SEAM_REQUIRE_NETNS") == "1" || os.Getenv("CI") != "" {
			t.Fatalf("network namespace testbed unavailable: %v", err)
		}
		t.Skipf("network namespace testbed unavailable: %v", err)
	}
}

type prober struct{ c net.Conn }

func (p prober) Probe(ctx context.Context, n int) error {
	buf := make([]byte, 4+n)
	binary.LittleEndian.PutUint32(buf, uint32(n))
	if _, err := p.c.Write(buf); err != nil {
		return err
	}
	var ack [1]byte
	_, err := io.ReadFull(p.c, ack[:])
	return err
}

func echo(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			var hdr [4]byte
			for {
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				if _, err := io.CopyN(io.Discard, c, int64(binary.LittleEndian.Uint32(hdr[:]))); err != nil {
					return
				}
				c.Write([]byte{1})
			}
		}()
	}
}

// Three namespaces in a chain; each link's measured bandwidth is its tbf
// rate, processes run inside the namespaces, and nothing is left after.
func TestTestbed(t *testing.T) {
	need(t)
	tb, err := New([]string{"a", "b", "c"}, []Link{{A: "a", B: "b", Mbps: 1000}, {A: "b", B: "c", Mbps: 20}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			tb.Close()
		}
	})
	if _, err := tb.Addr("a", "c"); err == nil {
		t.Fatal("a and c have no link, but Addr found one")
	}
	for _, l := range []struct {
		from, to string
		mbps     float64
	}{{"a", "b", 1000}, {"c", "b", 20}} {
		addr, err := tb.Addr(l.from, l.to)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tb.Listen(l.to, addr+":0")
		if err != nil {
			t.Fatal(err)
		}
		go echo(ln)
		c, err := tb.Dial(l.from, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		m, err := cluster.MeasureLink(context.Background(), prober{c}, cluster.MeasureOptions{Pings: 3, MinTime: 60 * time.Millisecond})
		c.Close()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s → %s: %v (tbf %v Mbit/s)", l.from, l.to, m, l.mbps)
		// tbf counts whole frames; the measurement counts TCP payload, so it
		// reads a few % low (1448 of 1514 bytes per full frame = 96%).
		// Measured here: 20 → 19.1 every time; 1000 → 447–918, limited by
		// the shared 2-core machine's CPU, so its lower bound is loose:
		// the upper bound is what shows the shaping is applied (unshaped
		// veth runs at several Gbit/s), and the 20 Mbit/s link checks the
		// rate's units tightly.
		lo := 0.9
		if l.mbps >= 200 {
			lo = 0.2
		}
		if m.Mbps < lo*l.mbps || m.Mbps > 1.02*l.mbps {
			t.Errorf("%s → %s: measured %.1f Mbit/s over a %v Mbit/s tbf link", l.from, l.to, m.Mbps, l.mbps)
		}
	}
	// A process in a namespace sees only that namespace's interfaces.
	out, err := tb.Command(context.Background(), "c", "ip", "-o", "addr", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "198.18.1.2/24") || strings.Contains(string(out), "198.18.0.") {
		t.Fatalf("node c's addresses:\n%s", out)
	}
	// Host addresses route over the direct link.
	ln, err := tb.Listen("c", tb.Host("c")+":0")
	if err != nil {
		t.Fatal(err)
	}
	go echo(ln)
	c, err := tb.Dial("b", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != "198.18.1.1" {
		t.Errorf("b reached c's host address from %s, want its address on the b-c link", got)
	}
	if err := (prober{c}).Probe(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ln.Close()
	sleeper := tb.Command(context.Background(), "b", "sleep", "60")
	if err := tb.Start(sleeper); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if sleeper.ProcessState == nil {
		t.Fatal("Close did not stop a process it started")
	}
	if left := tb.leftovers(); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// plantDead makes a namespace and a veth pair named as a testbed of a
// process that no longer runs would have left them.
func plantDead(t *testing.T) (ns, veth string) {
	t.Helper()
	const dead = "4000000" // a pid no process has (checked below)
	ns = nsPrefix + dead + "-1-x"
	veth = vethPrefix + dead + "x1a"
	if err := run("ip", "netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run("ip", "netns", "del", ns); run("ip", "link", "del", veth) })
	if err := run("ip", "link", "add", veth, "type", "veth", "peer", "name", vethPrefix+dead+"x1b"); err != nil {
		t.Fatal(err)
	}
	if alive(dead) {
		t.Skip("a process has pid " + dead)
	}
	left := strings.Join(Leftovers(), "\n")
	if !strings.Contains(left, ns) || !strings.Contains(left, veth) {
		t.Fatalf("Leftovers does not list the planted ones:\n%s", left)
	}
	return ns, veth
}

// Sweep removes the leftovers of a run whose process is gone.
func TestSweep(t *testing.T) {
	need(t)
	ns, veth := plantDead(t)
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	left := strings.Join(Leftovers(), "\n")
	if strings.Contains(left, ns) || strings.Contains(left, veth) {
		t.Fatalf("Sweep left:\n%s", left)
	}
}

// A run killed before its cleanups (go test -timeout, SIGKILL) leaves its
// testbed; the next New removes it.
func TestNewSweepsDeadRuns(t *testing.T) {
	need(t)
	ns, veth := plantDead(t)
	tb, err := New([]string{"a", "b"}, []Link{{A: "a", B: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	left := strings.Join(Leftovers(), "\n")
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(left, ns) || strings.Contains(left, veth) {
		t.Fatalf("New left a dead run's testbed in place:\n%s", left)
	}
	if !strings.Contains(left, tb.id) {
		t.Fatalf("the listing does not show the new testbed either:\n%s", left)
	}
}
