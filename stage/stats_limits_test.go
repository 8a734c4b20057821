package stage_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// A Ping's answer carries the refusal counters and the prefill limit to a
// head that agreed wire.RefusalsGeneration or later, the same numbers
// Server.Refusals gives; a head of an older generation gets the 48 bytes
// it knows, whatever the stage has refused.
func TestRefusalsInPingAnswers(t *testing.T) {
	w := demoWeights(t)
	srv, addr, _ := startLogged(t, w, stage.Config{Timeout: 5 * time.Second, MaxSessions: 1, MaxPrefill: 8})
	c, fr := dialRaw(t, addr, nil, headHello(w, "new"))
	mustOpen(t, c, fr, 1)
	wantError(t, openRaw(t, c, fr, 2, 2), wire.CodeSession, "(--max-sessions)")
	if err := fr.WriteTokenIDs(wire.KindPrefill, 0, wire.Meta{Session: 1, Request: 3}, tokens(9, w.Config.VocabSize)); err != nil {
		t.Fatal(err)
	}
	wantError(t, reply(t, c, fr, 5*time.Second), wire.CodeLimit, "(--max-prefill)")
	want := srv.Refusals()
	if want.Sessions != 1 || want.Prefill != 1 {
		t.Fatalf("Refusals() = %+v, want one session and one prefill refusal", want)
	}
	old := headHello(w, "old")
	old.Generation, old.MaxGeneration = wire.PingGeneration, wire.PingGeneration
	oc, ofr := dialRaw(t, addr, nil, old)
	for _, h := range []struct {
		gen  uint16
		conn net.Conn
		fr   *wire.Framer
	}{{wire.MaxGeneration, c, fr}, {wire.PingGeneration, oc, ofr}} {
		name := fmt.Sprintf("a head of generation %d", h.gen)
		if err := h.fr.WritePing(77, nil); err != nil {
			t.Fatal(err)
		}
		f := reply(t, h.conn, h.fr, 5*time.Second)
		if f.Kind != wire.KindPing || f.Request != 77 {
			t.Fatalf("%s: a Ping answered with %v", name, f.Kind)
		}
		if len(f.Payload) != wire.StatsSizeFor(h.gen) {
			t.Errorf("%s: a %d-byte answer, want %d", name, len(f.Payload), wire.StatsSizeFor(h.gen))
		}
		st, err := f.StageStats()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h.gen >= wire.RefusalsGeneration {
			if st.Refusals != want || st.MaxPrefill != 8 {
				t.Errorf("%s: refusals %+v and max prefill %d, want %+v and 8", name, st.Refusals, st.MaxPrefill, want)
			}
		} else if st.Refusals != (wire.Refusals{}) || st.MaxPrefill != 0 {
			t.Errorf("%s: an answer of generation %d carries refusals: %+v", name, h.gen, st)
		}
		if st.Sessions != 1 || st.MaxSessions != 1 {
			t.Errorf("%s: %d sessions of %d, want 1 of 1", name, st.Sessions, st.MaxSessions)
		}
	}
}
