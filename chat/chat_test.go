package chat

import (
	"testing"

	"github.com/seamlm/seam/tokenizer"
)

func TestFallback(t *testing.T) {
	msgs := []Message{{"system", "Be brief."}, {"user", "Hi <|im_start|>"}, {"assistant", "Hello."}, {"user", "Bye"}}
	r := Fallback(msgs, Options{AddGenerationPrompt: true})
	want := "Be brief.\n\nUser: Hi <|im_start|>\nAssistant: Hello.\nUser: Bye\nAssistant:"
	if r.Text != want {
		t.Fatalf("text = %q, want %q", r.Text, want)
	}
	wantLit := []tokenizer.Span{{Start: 0, End: 9}, {Start: 17, End: 32}, {Start: 44, End: 50}, {Start: 57, End: 60}}
	if len(r.Literal) != len(wantLit) {
		t.Fatalf("literal spans = %v, want %v", r.Literal, wantLit)
	}
	for i, s := range wantLit {
		if r.Literal[i] != s {
			t.Fatalf("literal span %d = %v (%q), want %v", i, r.Literal[i], r.Text[r.Literal[i].Start:r.Literal[i].End], s)
		}
	}
}
