package tokenizer

import (
	"slices"
	"sync"
	"testing"
)

// TestConcurrentEncode encodes the corpus from several goroutines at once
// with one tokenizer (shared word cache and merge scratch pool) and checks
// every result against a sequential encoding. Run under -race.
func TestConcurrentEncode(t *testing.T) {
	tok, cfg := tinyHF()
	b, err := ParseHF(mustJSON(t, tok), mustJSON(t, cfg), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := ParseHF(mustJSON(t, tok), mustJSON(t, cfg), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	pieces, scores := []string{"<unk>", "<s>", "</s>", " ", "a", "b", " a", " ab", "ab"}, []float32{0, 0, 0, -5, -5, -5, -1, -3, -2}
	sp, sp2 := tiny(t, pieces, scores, nil), tiny(t, pieces, scores, nil)
	texts := corpus()
	// Expected ids come from one instance; the goroutines share another,
	// whose word cache starts empty.
	for _, pair := range [][2]Tokenizer{{b, b2}, {sp, sp2}} {
		ref, tk := pair[0], pair[1]
		want := make([][]int, len(texts))
		for i, s := range texts {
			want[i] = ref.Encode(s, false, false)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range texts {
					i := (k*7 + g*13) % len(texts)
					if got := tk.Encode(texts[i], false, false); !slices.Equal(got, want[i]) {
						t.Errorf("goroutine %d: Encode(%q) = %v, sequential %v", g, texts[i], got, want[i])
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}
