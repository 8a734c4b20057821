package bench

import (
	"context"
	"testing"

	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/wire"
)

// Serve against the batched whole model and against 2 in-process stages:
// every stream generates its tokens, the whole model batches them (fewer
// steps than tokens), and utilisation is reported per stage.
func TestServeCurve(t *testing.T) {
	w, err := synth.Weights(synth.DemoConfig(), 2)
	if err != nil {
		t.Fatal(err)
	}
	o := ServeOptions{Prompt: 8, Output: 12}
	for _, split := range []int{0, 2} {
		rows, err := ServeCurve(context.Background(), w, wire.Digest{9}, ServeSetup{Split: split}, []int{1, 6}, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			t.Logf("split %d: %s", split, r)
			if r.TokS <= 0 || r.TTFTp50 <= 0 || r.ITLp50 <= 0 || r.ITLp99 < r.ITLp50 {
				t.Errorf("split %d, %d streams: implausible figures %+v", split, r.Streams, r)
			}
			if want := max(split, 1); len(r.Utilisation) != want {
				t.Errorf("split %d: utilisation of %d stages, want %d", split, len(r.Utilisation), want)
			}
		}
		if split == 0 {
			o := o
			o.LongPrompt = 100
			long, err := ServeCurve(context.Background(), w, wire.Digest{9}, ServeSetup{}, []int{3}, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(long) != 2 || long[0].LongPrompt != 0 || long[1].LongPrompt != 100 || long[1].LongTTFT <= 0 {
				t.Errorf("a long prompt mid-load: rows %+v, want one without it and one with its time to first token", long)
			}
			six := rows[1]
			// 6 x (1 prompt step + 11 decode steps) tokens-steps if unbatched.
			if six.Steps == 0 || six.Steps >= 6*12 {
				t.Errorf("6 streams ran in %d steps: not batched", six.Steps)
			}
		}
	}
}
