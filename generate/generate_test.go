package generate

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/tokenizer"
)

// scripted is an ArgmaxSession that answers with a fixed list of tokens and
// records what it was fed.
type scripted struct {
	next []int
	fed  []int
}

func (s *scripted) Forward(context.Context, []int, int, bool) ([][]float32, error) {
	panic("greedy generation uses ForwardArgmax")
}

func (s *scripted) ForwardArgmax(_ context.Context, tokens []int, _ int) (int, error) {
	s.fed = append(s.fed, tokens...)
	id := s.next[0]
	s.next = s.next[1:]
	return id, nil
}

func (s *scripted) Close() error { return nil }

// byteVocab is a byte-level vocabulary of the 256 bytes plus <|im_end|>
// (id 256, EOS), without BOS, as Qwen's.
func byteVocab(t *testing.T) tokenizer.Tokenizer {
	t.Helper()
	var b2r []rune
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			b2r = append(b2r, rune(b))
		} else {
			b2r = append(b2r, 0)
		}
	}
	next := rune(256)
	v := &tokenizer.GGUFVocab{Model: "gpt2", Pre: "qwen2", Merges: []string{}, BOS: -1, EOS: 256, UNK: -1, EOT: -1, EOM: -1}
	for b := range 256 {
		if b2r[b] == 0 {
			b2r[b] = next
			next++
		}
		v.Tokens = append(v.Tokens, string(b2r[b]))
		v.Types = append(v.Types, tokenizer.TypeNormal)
	}
	v.Tokens = append(v.Tokens, "<|im_end|>")
	v.Types = append(v.Types, tokenizer.TypeControl)
	tok, err := tokenizer.NewFromGGUF(v, "test")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestGenerateFollowsVocabularyRules: no BOS when the vocabulary adds none,
// a character split over byte tokens written once whole, and a stop at the
// end-of-generation token.
func TestGenerateFollowsVocabularyRules(t *testing.T) {
	tok := byteVocab(t)
	llama := []int{0xF0, 0x9F, 0xA6, 0x99}
	s := &scripted{next: append(append([]int{}, llama...), 256)}
	greedy, err := sample.New(0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	st, err := Generate(context.Background(), s, tok, 64, "hi", Options{Steps: 64, Sampler: greedy}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "🦙" {
		t.Errorf("output %q, want %q", got, "🦙")
	}
	if want := append([]int{'h', 'i'}, llama...); !slices.Equal(s.fed, want) {
		t.Errorf("fed %v, want %v (no BOS)", s.fed, want)
	}
	if st.StopReason != "eos" || st.PromptTokens != 2 || st.GeneratedTokens != 4 {
		t.Errorf("stats %+v, want stop eos, 2 prompt and 4 generated tokens", st)
	}
}
