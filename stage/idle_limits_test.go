package stage_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// alive requires the connection to answer a Ping.
func alive(t *testing.T, what string, conn net.Conn, fr *wire.Framer) {
	t.Helper()
	if err := fr.WritePing(99, nil); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if f := reply(t, conn, fr, 2*time.Second); f.Kind != wire.KindPing || f.Request != 99 {
		t.Fatalf("%s: answered a Ping with %v", what, f.Kind)
	}
}

// A head connection that holds no session and sends nothing for
// IdleTimeout is closed with an Error (code limit) naming the limit and
// its flag, and counted. A head holding a session may stay quiet; so may
// one that pings. One whose last session closed is idle again. A
// connection that never says Hello is closed after the timeout, counted
// as idle too.
func TestIdleConnectionsClosed(t *testing.T) {
	w := demoWeights(t)
	const idle = 300 * time.Millisecond
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 600 * time.Millisecond, IdleTimeout: idle})
	silent, sfr := dialRaw(t, addr, nil, headHello(w, "silent"))
	t0 := time.Now()
	holder, hfr := dialRaw(t, addr, nil, headHello(w, "holds a session"))
	mustOpen(t, holder, hfr, 1)
	pinger, pfr := dialRaw(t, addr, nil, headHello(w, "pings"))
	pinged := make(chan error, 1)
	go func() { // 0.9 s of pings, three times the idle timeout
		for range 9 {
			if err := pfr.WritePing(98, nil); err != nil {
				pinged <- err
				return
			}
			pinger.SetReadDeadline(time.Now().Add(2 * time.Second))
			if f, err := pfr.ReadFrame(); err != nil || f.Kind != wire.KindPing {
				pinged <- fmt.Errorf("a Ping answered with %v, %v", f, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		pinged <- nil
	}()
	done, dfr := dialRaw(t, addr, nil, headHello(w, "done"))
	mustOpen(t, done, dfr, 2)
	if err := dfr.WriteClose(wire.Meta{Session: 2}); err != nil {
		t.Fatal(err)
	}
	mute, err := net.Dial("tcp", addr) // never says Hello
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()

	f := reply(t, silent, sfr, 3*time.Second)
	took := time.Since(t0)
	wantError(t, f, wire.CodeLimit, "nothing received for 300ms while it holds no session, this stage's limit (--idle-timeout)")
	if took < idle-50*time.Millisecond || took > idle+time.Second {
		t.Errorf("the idle connection was closed after %v, want about %v", took, idle)
	}
	if _, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the idle notice: read %v, want EOF", err)
	}
	wantError(t, reply(t, done, dfr, 3*time.Second), wire.CodeLimit, "(--idle-timeout)")
	if err := <-pinged; err != nil {
		t.Fatalf("a head that pings: %v", err)
	}
	alive(t, "a head that pinged", pinger, pfr)
	alive(t, "a head holding a session, quiet for three times the idle timeout", holder, hfr)
	mute.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := mute.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("a connection that never said Hello: read %v, want EOF after the timeout", err)
	}
	if r := srv.Refusals(); r.Idle != 3 {
		t.Errorf("%d connections counted idle, want 3 (two heads without a session, one without a Hello)", r.Idle)
	}
}

// A stage-to-stage link carries nothing between a chain's requests, and is
// not closed for it: it lives as long as the head's connection to the
// upstream stage, which is. With IdleTimeout negative, nothing is closed.
func TestIdleSparesUpstreamLinks(t *testing.T) {
	w := demoWeights(t)
	n := uint32(w.Config.NLayers)
	for _, idle := range []time.Duration{200 * time.Millisecond, -1} {
		local, err := stage.StartLocal(w, [][2]int{{2, int(n)}}, stage.Config{Identity: testID, Timeout: 5 * time.Second, IdleTimeout: idle, Logger: slog.New(slog.DiscardHandler)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		up, ufr := rawPeer(t, local.Addrs[0], upstreamHello(w, 0, 2, n))
		head, hfr := dialRaw(t, local.Addrs[0], nil, headHello(w, "head"))
		time.Sleep(600 * time.Millisecond)
		// Still open: a frame for no session is answered with a refusal.
		x := make([]float32, w.Config.Dim)
		if err := ufr.WriteActivations(wire.KindDecode, 0, wire.Meta{Session: 7, Request: 1}, wire.F16, x, 1, w.Config.Dim); err != nil {
			t.Fatal(err)
		}
		wantError(t, reply(t, up, ufr, 2*time.Second), wire.CodeSession, "has no session 7")
		if idle > 0 {
			wantError(t, reply(t, head, hfr, 2*time.Second), wire.CodeLimit, "(--idle-timeout)")
		} else {
			alive(t, "a quiet head with the idle timeout off", head, hfr)
		}
		local.Close()
	}
}
