package stage_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/wire"
)

// A head connection holds at most MaxSessionsPerConn sessions: the next is
// refused with code session naming the connection, the count and the
// flag, while another connection opens its own, and a slot its head
// closes is free again.
func TestSessionsPerConnQuota(t *testing.T) {
	w := demoWeights(t)
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 5 * time.Second, MaxSessions: 8, MaxSessionsPerConn: 2})
	a, afr := dialRaw(t, addr, nil, headHello(w, "a"))
	mustOpen(t, a, afr, 1)
	mustOpen(t, a, afr, 2)
	f := openRaw(t, a, afr, 3, 3)
	wantError(t, f, wire.CodeSession, "head "+a.LocalAddr().String()+" holds 2 sessions, its limit (--max-sessions-per-conn)")
	b, bfr := dialRaw(t, addr, nil, headHello(w, "b"))
	mustOpen(t, b, bfr, 4)
	mustOpen(t, b, bfr, 5)
	// The reader handles a head's frames in order: the Close is done
	// before the Reset that follows it.
	if err := afr.WriteClose(wire.Meta{Session: 1}); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, a, afr, 3)
	if r := srv.Refusals(); r.SessionsPerConn != 1 || r.Sessions != 0 || r.SessionsPerIdentity != 0 {
		t.Errorf("refusals %+v, want exactly one for --max-sessions-per-conn", r)
	}
	if st := srv.Stats(); st.Sessions != 4 {
		t.Errorf("the stage holds %d sessions, want 4", st.Sessions)
	}
}

// Without authentication a head's identity is its IP address: two
// connections from 127.0.0.1 share MaxSessionsPerIdentity, and the
// refusal names the address and the flag. When one of them leaves, its
// sessions go and the other may open more.
func TestSessionsPerAddressQuota(t *testing.T) {
	w := demoWeights(t)
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 5 * time.Second, MaxSessions: 8, MaxSessionsPerIdentity: 3,
		Auth: &auth.Config{Insecure: true, Logger: quiet}})
	a, afr := dialRaw(t, addr, nil, headHello(w, "a"))
	b, bfr := dialRaw(t, addr, nil, headHello(w, "b"))
	mustOpen(t, a, afr, 1)
	mustOpen(t, a, afr, 2)
	mustOpen(t, b, bfr, 3)
	f := openRaw(t, b, bfr, 4, 4)
	wantError(t, f, wire.CodeSession, "address 127.0.0.1 holds 3 sessions over its connections, its limit (--max-sessions-per-identity)")
	a.Close()
	waitSessions(t, srv, 1)
	mustOpen(t, b, bfr, 4)
	mustOpen(t, b, bfr, 5)
	if r := srv.Refusals(); r.SessionsPerIdentity != 1 {
		t.Errorf("refusals %+v, want one for --max-sessions-per-identity", r)
	}
}

// With authentication the identity is the key, not the address: a key
// holds MaxSessionsPerIdentity over its two connections, and another key
// on the same address opens its own.
func TestSessionsPerKeyQuota(t *testing.T) {
	w := demoWeights(t)
	keys := make([]*auth.Config, 3) // the stage's, then two heads'
	var fps []string
	for i := range keys {
		k, err := auth.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = &auth.Config{Key: k, Logger: quiet, HandshakeTimeout: 5 * time.Second}
		fps = append(fps, auth.Public(k))
	}
	for _, k := range keys {
		tr, err := auth.NewTrust(fps...)
		if err != nil {
			t.Fatal(err)
		}
		k.Trust = tr
	}
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 5 * time.Second, MaxSessions: 8, MaxSessionsPerIdentity: 2, Auth: keys[0]})
	a1, a1fr := dialRaw(t, addr, keys[1], headHello(w, "a1"))
	a2, a2fr := dialRaw(t, addr, keys[1], headHello(w, "a2"))
	mustOpen(t, a1, a1fr, 1)
	mustOpen(t, a2, a2fr, 2)
	f := openRaw(t, a2, a2fr, 3, 3)
	wantError(t, f, wire.CodeSession, "key "+fps[1]+" holds 2 sessions over its connections", "(--max-sessions-per-identity)")
	b, bfr := dialRaw(t, addr, keys[2], headHello(w, "b"))
	mustOpen(t, b, bfr, 4)
	mustOpen(t, b, bfr, 5)
	if r := srv.Refusals(); r.SessionsPerIdentity != 1 {
		t.Errorf("refusals %+v, want one for --max-sessions-per-identity", r)
	}
}

// The stage-wide limit is counted apart from the others.
func TestMaxSessionsCounted(t *testing.T) {
	w := demoWeights(t)
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 5 * time.Second, MaxSessions: 1})
	a, afr := dialRaw(t, addr, nil, headHello(w, "a"))
	mustOpen(t, a, afr, 1)
	wantError(t, openRaw(t, a, afr, 2, 2), wire.CodeSession, "stage holds 1 sessions, its limit (--max-sessions)")
	if r := srv.Refusals(); r.Sessions != 1 || r.SessionsPerConn != 0 {
		t.Errorf("refusals %+v, want one for --max-sessions", r)
	}
}

// waitSessions waits up to 5 s for the stage to hold n sessions.
func waitSessions(t *testing.T, srv *stage.Server, n uint32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Stats().Sessions != n {
		if time.Now().After(deadline) {
			t.Fatalf("the stage holds %d sessions after 5 s, want %d", srv.Stats().Sessions, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A Prefill of more than MaxPrefill tokens is refused with code limit,
// naming the limit and the flag, and the session goes on: a prefill of
// exactly the limit is computed.
func TestMaxPrefillRefused(t *testing.T) {
	w := demoWeights(t)
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 5 * time.Second, MaxPrefill: 16})
	c, fr := dialRaw(t, addr, nil, headHello(w, "h"))
	mustOpen(t, c, fr, 1)
	ids := tokens(17, w.Config.VocabSize)
	if err := fr.WriteTokenIDs(wire.KindPrefill, 0, wire.Meta{Session: 1, Request: 2}, ids); err != nil {
		t.Fatal(err)
	}
	wantError(t, reply(t, c, fr, 5*time.Second), wire.CodeLimit, "a prefill of 17 tokens is over this stage's limit of 16 tokens a frame (--max-prefill)")
	if err := fr.WriteTokenIDs(wire.KindPrefill, 0, wire.Meta{Session: 1, Request: 3}, ids[:16]); err != nil {
		t.Fatal(err)
	}
	if f := reply(t, c, fr, 5*time.Second); f.Kind != wire.KindResult || f.Request != 3 {
		t.Fatalf("a 16-token prefill after the refusal: %v (request %d), want its Result", f.Kind, f.Request)
	}
	if r := srv.Refusals(); r.Prefill != 1 {
		t.Errorf("refusals %+v, want one for --max-prefill", r)
	}
}

// A connection may have at most MaxQueue frames the stage has not
// finished, holding at most MaxInFlight tokens; past either the frame is
// refused with code limit, naming the flag, and the frames admitted are
// computed. A Ping that arrives while frames compute is answered when the
// first of them is done (a head without heartbeats still hears nothing
// from a stage that is computing).
func TestQueueAndInFlightLimits(t *testing.T) {
	w := wideWeights(t, 512)
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 30 * time.Second, MaxQueue: 2, MaxInFlight: 300, Heartbeat: -1})
	c, fr := dialRaw(t, addr, nil, headHello(w, "h"))
	for id := uint64(1); id <= 3; id++ {
		mustOpen(t, c, fr, id)
	}
	vocab := w.Config.VocabSize
	send := func(id, req uint64, n int) {
		t.Helper()
		kind := wire.KindPrefill
		if n == 1 {
			kind = wire.KindDecode
		}
		if err := fr.WriteTokenIDs(kind, 0, wire.Meta{Session: id, Request: req}, tokens(n, vocab)); err != nil {
			t.Fatal(err)
		}
	}
	send(1, 10, 256) // computes for about half a second
	send(2, 11, 100) // 356 tokens in flight: over 300
	send(2, 12, 40)  // 296: queued
	if err := fr.WritePing(13, nil); err != nil {
		t.Fatal(err)
	}
	send(3, 14, 1) // a third frame: over 2
	var order []string
	for len(order) < 5 {
		f := reply(t, c, fr, 60*time.Second)
		switch f.Request {
		case 11:
			wantError(t, f, wire.CodeLimit, fmt.Sprintf("head %s has 256 tokens in flight and this frame brings 100, over its limit of 300 (--max-inflight-tokens)", c.LocalAddr()))
		case 14:
			wantError(t, f, wire.CodeLimit, fmt.Sprintf("head %s has 2 frames this stage has not finished, its limit (--max-queue)", c.LocalAddr()))
		case 10, 12:
			if re, err := f.RemoteError(); err == nil {
				t.Errorf("request %d failed: %v", f.Request, re)
			}
		}
		order = append(order, fmt.Sprintf("%v %d", f.Kind, f.Request))
	}
	// The refusals come first (the reader sends them at once). Sessions 1
	// and 2 compute side by side in the shared steps, so session 2's short
	// prefill ends first, the Ping's answer after it, then session 1's.
	want := "[error 11 error 14 result 12 ping 13 result 10]"
	if fmt.Sprint(order) != want {
		t.Errorf("answers %v, want %s", order, want)
	}
	if r := srv.Refusals(); r.InFlight != 1 || r.QueueFull != 1 {
		t.Errorf("refusals %+v, want one for --max-inflight-tokens and one for --max-queue", r)
	}
	// Both limits count what is not finished: now it is, a frame is taken.
	send(3, 15, 1)
	if f := reply(t, c, fr, 10*time.Second); f.Kind != wire.KindResult || f.Request != 15 {
		t.Fatalf("a decode once the queue is empty: %v (request %d), want its Result", f.Kind, f.Request)
	}
}

// At the last stage, a prefill asking for the logits of more positions than
// a Result frame may carry is refused before it is computed (it used to be
// computed, holding vocab floats a position, then fail to be sent).
func TestAllLogitsPastResultLimitRefused(t *testing.T) {
	cfg := synth.DemoConfig()
	cfg.VocabSize = 1 << 16 // 256 KiB of logits a position: 256 positions fill 64 MiB
	w, err := synth.Weights(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 10 * time.Second})
	c, fr := dialRaw(t, addr, nil, headHello(w, "scores"))
	mustOpen(t, c, fr, 1)
	if err := fr.WriteTokenIDs(wire.KindPrefill, wire.FlagAllLogits, wire.Meta{Session: 1, Request: 2}, tokens(257, cfg.VocabSize)); err != nil {
		t.Fatal(err)
	}
	wantError(t, reply(t, c, fr, 5*time.Second), wire.CodeLimit,
		"the logits of all 257 positions of this prefill would be a 67371008-byte Result, over the wire's 67108864-byte limit: ask for at most 256 positions a frame")
	if err := fr.WriteTokenIDs(wire.KindPrefill, wire.FlagAllLogits, wire.Meta{Session: 1, Request: 3}, tokens(4, cfg.VocabSize)); err != nil {
		t.Fatal(err)
	}
	if f := reply(t, c, fr, 10*time.Second); f.Kind != wire.KindResult || f.Tokens != 4 {
		t.Fatalf("a 4-position scoring prefill: %v of %d positions, want a Result of 4", f.Kind, f.Tokens)
	}
	if r := srv.Refusals(); r.Prefill != 1 {
		t.Errorf("refusals %+v, want one prefill refusal", r)
	}
}
