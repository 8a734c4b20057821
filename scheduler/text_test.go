package scheduler

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// stream pushes pieces through a textStream and returns every chunk's text.
func stream(pieces []string, stops []string) (chunks []string, stopped bool, tokens int) {
	ts := textStream{stops: stops}
	for i, p := range pieces {
		c, s := ts.push(p, Token{ID: i, Text: p})
		chunks = append(chunks, c.Text)
		tokens += len(c.Tokens)
		if s {
			return chunks, true, tokens
		}
	}
	c := ts.finish()
	tokens += len(c.Tokens)
	return append(chunks, c.Text), false, tokens
}

func TestTextStreamStops(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pieces  []string
		stops   []string
		chunks  []string // text released after each push (and after finish)
		stopped bool
	}{
		{"no stop", []string{"a", "b"}, nil, []string{"a", "b", ""}, false},
		{"stop inside one piece", []string{"ab", "cXYd"}, []string{"XY"}, []string{"ab", "c"}, true},
		{"stop split across three tokens", []string{"Hel", "lo W", "or", "ld"}, []string{"o World"}, []string{"Hel", "l", "", ""}, true},
		{"held prefix that turns out not to stop", []string{"x\n", "Y"}, []string{"\nUser:"}, []string{"x", "\nY", ""}, false},
		{"earliest of two stops", []string{"one two three"}, []string{"three", "two"}, []string{"one "}, true},
		{"prefix held to the end", []string{"the en"}, []string{"end"}, []string{"the ", "en"}, false},
		{"stop at the very start", []string{"STOP here"}, []string{"STOP"}, []string{""}, true},
	} {
		chunks, stopped, _ := stream(tc.pieces, tc.stops)
		if strings.Join(chunks, "|") != strings.Join(tc.chunks, "|") || stopped != tc.stopped {
			t.Errorf("%s: chunks %q stopped %v, want %q stopped %v", tc.name, chunks, stopped, tc.chunks, tc.stopped)
		}
	}
}

func TestTextStreamUTF8(t *testing.T) {
	// "€" is E2 82 AC; byte tokens deliver it one byte at a time.
	chunks, _, _ := stream([]string{"a\xe2", "\x82", "\xac!", "\xf0\x9f"}, nil)
	want := []string{"a", "", "€!", "", "\uFFFD"} // a character cut off by the end becomes U+FFFD
	if strings.Join(chunks, "|") != strings.Join(want, "|") {
		t.Fatalf("chunks %q, want %q", chunks, want)
	}
	// A byte that can never start a character is not held back.
	if c, _, _ := stream([]string{"\xff", "b"}, nil); c[0] != "\uFFFD" {
		t.Fatalf("invalid byte: chunks %q", c)
	}
	// A stop string made of the bytes of one character split across tokens.
	if c, stopped, _ := stream([]string{"x\xe2\x82", "\xac y"}, []string{"€"}); !stopped || strings.Join(c, "") != "x" {
		t.Fatalf("stop on a split character: %q %v", c, stopped)
	}
}

// The released text is always the generated text cut before its first stop
// string (strings.Index over the whole text is the oracle), every chunk is
// valid UTF-8, and every token is released exactly once.
func TestTextStreamRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "\n", " ", "é", "€", "ab", "ba"}
	for iter := range 3000 {
		var text strings.Builder
		for range 1 + rng.IntN(12) {
			text.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		full := text.String()
		var stops []string
		for range rng.IntN(3) {
			var s strings.Builder
			for range 1 + rng.IntN(3) {
				s.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			stops = append(stops, s.String())
		}
		// cut the text into byte pieces at random points, splitting characters
		var pieces []string
		for rest := full; rest != ""; {
			n := 1 + rng.IntN(min(4, len(rest)))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		want, wantStop := full, false
		for _, s := range stops {
			if i := strings.Index(full, s); i >= 0 && i < len(want) {
				want, wantStop = full[:i], true
			}
		}
		chunks, stopped, tokens := stream(pieces, stops)
		for _, c := range chunks {
			if !utf8.ValidString(c) {
				t.Fatalf("iteration %d: chunk %q is not valid UTF-8", iter, c)
			}
		}
		if got := strings.Join(chunks, ""); got != want || stopped != wantStop {
			t.Fatalf("iteration %d: pieces %q stops %q: released %q (stopped %v), want %q (%v)", iter, pieces, stops, got, stopped, want, wantStop)
		}
		if !wantStop && tokens != len(pieces) {
			t.Fatalf("iteration %d: %d tokens released, %d pushed", iter, tokens, len(pieces))
		}
	}
}
