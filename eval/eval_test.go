package eval_test

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/wire"
	"github.com/zeebo/blake3"
)

const bos, eos = 1, 2

// smallModel: width 32, 4 layers, 64-word vocabulary, context 32.
func smallModel(t testing.TB) *model.Model { return eval.SmallTestModel(t, 64) }

// wholeLogits runs the whole model over seq, one state, and returns the
// logits after each token.
func wholeLogits(t testing.TB, m *model.Model, seq []int) [][]float32 {
	t.Helper()
	cfg := m.Config()
	st, err := m.NewState(0, cfg.NLayers)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for p, id := range seq {
		x := make([]float32, cfg.Dim)
		logits := make([]float32, cfg.VocabSize)
		if err := m.Embed(id, x); err != nil {
			t.Fatal(err)
		}
		if err := m.Layers(st, x, p); err != nil {
			t.Fatal(err)
		}
		if err := m.Head(x, logits); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
	}
	return out
}

func TestSampleTokens(t *testing.T) {
	m := smallModel(t)
	const n = 300
	seqs, err := eval.SampleTokens(m, bos, eos, n, 42, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i, s := range seqs {
		total += len(s) - 1
		if s[0] != bos || len(s) < 2 || len(s) > 32 {
			t.Fatalf("sequence %d = %v: want BOS first, 2..32 tokens", i, s)
		}
		for p, id := range s[1 : len(s)-1] {
			if id == bos || id == eos {
				t.Fatalf("sequence %d has stop token %d inside, at %d", i, id, p+1)
			}
		}
		if last := s[len(s)-1]; i < len(seqs)-1 && last != bos && last != eos && len(s) != 32 {
			t.Fatalf("sequence %d ends with %d at length %d: neither a stop token nor the context", i, last, len(s))
		}
	}
	if total != n {
		t.Fatalf("%d tokens besides BOS, want %d", total, n)
	}

	// A naive generation loop with a sampler of the same seed gives the
	// same text.
	smp, err := sample.New(1, 1, 42)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		want := []int{bos}
		for len(want) < 32 && len(want) < len(s) {
			logits := wholeLogits(t, m, want)
			want = append(want, smp.Sample(logits[len(logits)-1]))
			if last := want[len(want)-1]; last == bos || last == eos {
				break
			}
		}
		if !slices.Equal(s, want) {
			t.Fatalf("sequence %d = %v, naive generation gives %v", i, s, want)
		}
	}

	again, _ := eval.SampleTokens(m, bos, eos, n, 42, 1, nil)
	other, _ := eval.SampleTokens(m, bos, eos, n, 43, 1, nil)
	if !slices.EqualFunc(seqs, again, slices.Equal) {
		t.Error("same seed, different tokens")
	}
	if slices.EqualFunc(seqs, other, slices.Equal) {
		t.Error("seeds 42 and 43 gave the same tokens")
	}
	if _, err := eval.SampleTokens(m, bos, eos, 0, 1, 1, nil); err == nil {
		t.Error("n = 0 accepted")
	}
	if _, err := eval.SampleTokens(m, bos, 64, 10, 1, 1, nil); err == nil {
		t.Error("eos outside the vocabulary accepted")
	}
}

func TestTokensFromText(t *testing.T) {
	tok, err := synth.Tokenizer(300)
	if err != nil {
		t.Fatal(err)
	}
	text := "Once upon a time there was a tiny model."
	ids := tok.Encode(text, false, false)
	if len(ids) < 7 {
		t.Fatalf("text encodes to only %d tokens", len(ids))
	}
	seqs := eval.TokensFromText(tok, text, 4)
	var want [][]int
	for i := 0; i < len(ids); i += 3 {
		want = append(want, append([]int{tok.BOS()}, ids[i:min(i+3, len(ids))]...))
	}
	if !slices.EqualFunc(seqs, want, slices.Equal) {
		t.Fatalf("got %v, want %v", seqs, want)
	}
	if eval.TokensFromText(tok, "", 4) != nil || eval.TokensFromText(tok, text, 1) != nil {
		t.Error("empty text or seqLen 1 gave sequences")
	}
}

func TestTokensDigest(t *testing.T) {
	// Lengths 2 and 1, then ids 1, 2, 3: five little-endian u32.
	var b []byte
	for _, v := range []uint32{2, 1, 1, 2, 3} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	if got, want := eval.TokensDigest([][]int{{1, 2}, {3}}), blake3.Sum256(b); got != want {
		t.Fatalf("digest %x, want %x", got, want)
	}
	if eval.TokensDigest([][]int{{1, 2}, {3}}) == eval.TokensDigest([][]int{{1}, {2, 3}}) {
		t.Error("the same tokens cut differently have the same digest")
	}
}

func TestTruncate(t *testing.T) {
	seqs := [][]int{{1, 5, 6}, {1, 7}, {1, 8, 9}}
	if got := eval.Truncate(seqs, 6); !slices.EqualFunc(got, [][]int{{1, 5, 6}, {1, 7}, {1}}, slices.Equal) {
		t.Fatalf("Truncate(6) = %v", got)
	}
	if got := eval.Truncate(seqs, 100); !slices.EqualFunc(got, seqs, slices.Equal) {
		t.Fatalf("Truncate(100) = %v", got)
	}
}

// Captured rows are the hidden states entering the boundary: running the
// remaining layers and the head on them gives the whole model's logits, bit
// for bit.
func TestCapture(t *testing.T) {
	m := smallModel(t)
	seqs, err := eval.SampleTokens(m, bos, eos, 100, 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	const boundary = 2
	rows, n, err := eval.Capture(m, seqs, boundary, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != eval.CountTokens(seqs) || len(rows) != n*32 {
		t.Fatalf("%d rows (%d values) for %d tokens", n, len(rows), eval.CountTokens(seqs))
	}
	r := 0
	for _, s := range seqs {
		want := wholeLogits(t, m, s)
		st, err := m.NewState(boundary, 4)
		if err != nil {
			t.Fatal(err)
		}
		for p := range s {
			x := slices.Clone(rows[r*32 : (r+1)*32])
			logits := make([]float32, 64)
			if err := m.Layers(st, x, p); err != nil {
				t.Fatal(err)
			}
			if err := m.Head(x, logits); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(logits, want[p]) {
				t.Fatalf("row %d: logits from the captured state differ from the whole model's", r)
			}
			r++
		}
	}

	capped, nc, err := eval.Capture(m, seqs, boundary, 40, nil)
	if err != nil {
		t.Fatal(err)
	}
	if nc != 40 || !slices.Equal(capped, rows[:40*32]) {
		t.Fatalf("capped capture: %d rows, prefix equal %v", nc, slices.Equal(capped, rows[:min(len(capped), 40*32)]))
	}
	for _, b := range []int{0, 4} {
		if _, _, err := eval.Capture(m, seqs, b, 0, nil); err == nil {
			t.Errorf("boundary %d accepted", b)
		}
	}
	if _, _, err := eval.Capture(m, [][]int{{1, 64}}, boundary, 0, nil); err == nil {
		t.Error("token 64 of a 64-word vocabulary accepted")
	}
}

// naiveKL is KL(softmax(a) || softmax(b)) from explicit probabilities.
func naiveKL(a, b []float32) float64 {
	pa, pb := softmax(a), softmax(b)
	var s float64
	for i := range pa {
		s += pa[i] * math.Log(pa[i]/pb[i])
	}
	return s
}

func softmax(x []float32) []float64 {
	var z float64
	p := make([]float64, len(x))
	for i, v := range x {
		p[i] = math.Exp(float64(v))
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

func TestCompare(t *testing.T) {
	m := smallModel(t)
	seqs, err := eval.SampleTokens(m, bos, eos, 400, 3, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	const boundary = 2
	encs := []wire.Encoding{wire.F32, wire.F16, wire.Q8, wire.Q5, wire.Q4}
	rep, err := eval.Compare(m, seqs, boundary, encs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Positions != 400 || rep.Boundary != boundary {
		t.Fatalf("%d positions at boundary %d, want 400 at %d", rep.Positions, rep.Boundary, boundary)
	}

	// The parity rule: f32 is the whole model exactly.
	f32 := rep.Results[0]
	if f32.Wire != "f32" || f32.KL != 0 || f32.PPLDeltaPct != 0 || f32.Top1 != 1 || f32.Perplexity != rep.Perplexity {
		t.Fatalf("f32: %+v; whole-model perplexity %v", f32, rep.Perplexity)
	}

	// Payload bytes per token at width 32, from docs/wire.md: f32 4 bytes a
	// value, f16 2, and q8/q5/q4 a 4-byte scale plus 32 codes of 8, 5, 4 bits.
	wantBytes := []float64{128, 64, 36, 24, 20}
	for i, r := range rep.Results {
		if r.BytesPerToken != wantBytes[i] || r.Rank != 32 {
			t.Errorf("%s: %v bytes per token, rank %d; want %v, 32", r.Wire, r.BytesPerToken, r.Rank, wantBytes[i])
		}
		if i > 0 && !(r.KL > 0) {
			t.Errorf("%s: KL %v, want > 0 for a lossy encoding", r.Wire, r.KL)
		}
	}

	// The whole-model perplexity and the q8 KL, recomputed naively: the
	// whole model's logits from one state per sequence, NLL from
	// generate.NLL, the split by hand with wire.Q8 one token at a time.
	var nll, klSum float64
	for _, s := range seqs {
		whole := wholeLogits(t, m, s[:len(s)-1])
		split := naiveSplit(t, m, s[:len(s)-1], boundary, wire.Q8)
		for p := range whole {
			nll += generate.NLL(whole[p], s[p+1])
			klSum += naiveKL(whole[p], split[p])
		}
	}
	// Both sides sum 400 float64 terms of size <= ~5 in different orders and
	// forms (log-sum-exp against explicit probabilities); the rounding
	// differences are below 400 * 5 * 2^-52 ~ 5e-13 absolute on the sums.
	if got, want := math.Log(rep.Perplexity), nll/400; math.Abs(got-want) > 1e-12 {
		t.Errorf("whole-model mean NLL %v, naive %v", got, want)
	}
	if got, want := rep.Results[2].KL, klSum/400; math.Abs(got-want) > 1e-12 {
		t.Errorf("q8 KL %v, naive %v", got, want)
	}
	if rep.Results[4].KL <= rep.Results[2].KL {
		t.Errorf("q4 KL %v not above q8 KL %v", rep.Results[4].KL, rep.Results[2].KL)
	}
}

// naiveSplit runs layers [0, boundary), passes each token's state through
// enc on its own, then the rest and the head.
func naiveSplit(t *testing.T, m *model.Model, seq []int, boundary int, enc wire.Encoding) [][]float32 {
	t.Helper()
	up, _ := m.NewState(0, boundary)
	down, _ := m.NewState(boundary, 4)
	var out [][]float32
	for p, id := range seq {
		x := make([]float32, 32)
		if err := m.Embed(id, x); err != nil {
			t.Fatal(err)
		}
		if err := m.Layers(up, x, p); err != nil {
			t.Fatal(err)
		}
		size, _ := enc.PayloadSize(1, 32)
		b := make([]byte, size)
		if err := enc.Encode(b, x, 1, 32); err != nil {
			t.Fatal(err)
		}
		if err := enc.Decode(x, b, 1, 32); err != nil {
			t.Fatal(err)
		}
		logits := make([]float32, 64)
		if err := m.Layers(down, x, p); err != nil {
			t.Fatal(err)
		}
		if err := m.Head(x, logits); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
	}
	return out
}

func TestCompareErrors(t *testing.T) {
	m := smallModel(t)
	seqs := [][]int{{1, 5, 6, 7}}
	for _, c := range []struct {
		name     string
		seqs     [][]int
		boundary int
		encs     []wire.Encoding
	}{
		{"boundary 0", seqs, 0, []wire.Encoding{wire.F32}},
		{"boundary n_layers", seqs, 4, []wire.Encoding{wire.F32}},
		{"no encodings", seqs, 2, nil},
		{"token outside the vocabulary", [][]int{{1, 99}}, 2, []wire.Encoding{wire.F32}},
		{"nothing to score", [][]int{{1}}, 2, []wire.Encoding{wire.F32}},
		{"beyond the context", [][]int{make([]int, 33)}, 2, []wire.Encoding{wire.F32}},
	} {
		if _, err := eval.Compare(m, c.seqs, c.boundary, c.encs, nil); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// calibration samples and captures a small calibration set at boundary 2.
func calibration(t testing.TB, m *model.Model, n int, seed uint64) *eval.CaptureFile {
	t.Helper()
	seqs, err := eval.SampleTokens(m, bos, eos, n, seed, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, nr, err := eval.Capture(m, seqs, 2, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &eval.CaptureFile{Boundary: 2, Width: 32, Model: [32]byte{1, 2, 3}, Seqs: eval.Truncate(seqs, nr), Rows: rows}
}

func TestCompareCodec(t *testing.T) {
	m := smallModel(t)
	cf := calibration(t, m, 1500, 11)
	c, _, err := eval.FitCapture(cf, eval.FitSpec{Bytes: 16, Holdout: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	seqs, _ := eval.SampleTokens(m, bos, eos, 200, 12, 1, nil)
	rep, err := eval.Compare(m, seqs, 2, []wire.Encoding{codec.NewWire(c)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Wire != "lowrank" || r.Rank != c.Kept() || r.BytesPerToken != float64(c.PayloadBytes()) || !(r.KL > 0) {
		t.Fatalf("codec result %+v; codec keeps %d, %d bytes", r, c.Kept(), c.PayloadBytes())
	}
}

func TestSplitHoldout(t *testing.T) {
	seqs := [][]int{make([]int, 10), make([]int, 5), make([]int, 3), make([]int, 2)} // 20 rows
	for _, c := range []struct {
		frac           float64
		fitRows, nHeld int
	}{
		{0, 20, 0},
		{0.1, 18, 1},  // 2 rows wanted: the last sequence
		{0.2, 15, 2},  // 4 wanted: 2 + 3
		{0.25, 15, 2}, // 5 wanted: 2 + 3
		{0.26, 10, 3}, // 5.2 -> 6 wanted: 2 + 3 + 5
		{0.5, 10, 3},  // 10 wanted
	} {
		sp, err := eval.SplitHoldout(seqs, c.frac)
		if err != nil {
			t.Fatalf("holdout %v: %v", c.frac, err)
		}
		if sp.FitRows != c.fitRows || len(sp.Held) != c.nHeld || sp.HeldRows != 20-c.fitRows {
			t.Errorf("holdout %v: fit %d rows, %d held sequences (%d rows); want %d, %d", c.frac, sp.FitRows, len(sp.Held), sp.HeldRows, c.fitRows, c.nHeld)
		}
	}
	// 0.505 and 0.55 want 11 rows: every sequence, leaving none to fit on.
	for _, f := range []float64{0.505, 0.55, -0.1, 1, math.NaN()} {
		if _, err := eval.SplitHoldout(seqs, f); err == nil {
			t.Errorf("holdout %v accepted", f)
		}
	}
}

func TestFitCapture(t *testing.T) {
	m := smallModel(t)
	cf := calibration(t, m, 1500, 11)
	spec := eval.FitSpec{Bytes: 12, Holdout: 0.2}
	c1, sp, err := eval.FitCapture(cf, spec)
	if err != nil {
		t.Fatal(err)
	}
	c2, _, err := eval.FitCapture(cf, spec)
	if err != nil {
		t.Fatal(err)
	}
	if string(c1.Marshal()) != string(c2.Marshal()) {
		t.Fatal("two fits of the same capture differ")
	}
	st, p := c1.Stats(), c1.Provenance()
	if int(st.HoldoutSamples) != sp.HeldRows || int(st.FitSamples) != sp.FitRows || !st.HasMSE || st.HasKL {
		t.Fatalf("stats %+v, split %d fit / %d held", st, sp.FitRows, sp.HeldRows)
	}
	if p.Model != cf.Model || p.Boundary != 2 || p.CalibData != cf.CalibDigest() {
		t.Fatalf("provenance %+v", p)
	}
	if c1.PayloadBytes() != 12 {
		t.Fatalf("payload %d bytes, budget 12", c1.PayloadBytes())
	}
	other := calibration(t, m, 1500, 99)
	c3, _, err := eval.FitCapture(other, spec)
	if err != nil {
		t.Fatal(err)
	}
	if c3.Digest() == c1.Digest() {
		t.Fatal("codecs fitted on different data have the same digest")
	}

	measured, err := eval.FitMeasured(m, cf, spec)
	if err != nil {
		t.Fatal(err)
	}
	kl, err := eval.HeldoutKL(m, sp.Held, 2, c1)
	if err != nil {
		t.Fatal(err)
	}
	if s := measured.Stats(); !s.HasKL || s.HeldoutKL != kl || !(kl > 0) {
		t.Fatalf("measured stats %+v, held-out KL %v", s, kl)
	}
}

func TestSearchKL(t *testing.T) {
	m := smallModel(t)
	cf := calibration(t, m, 1500, 11)
	spec := eval.FitSpec{Holdout: 0.2}
	const target = 0.002
	var tried []eval.Trial
	c, trials, err := eval.SearchKL(m, cf, target, spec, func(tr eval.Trial) { tried = append(tried, tr) })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tried, trials) {
		t.Fatal("progress and trials disagree")
	}
	if s := c.Stats(); !s.HasKL || !(s.HeldoutKL < target) {
		t.Fatalf("chosen codec: KL %v (measured %v), target %v", s.HeldoutKL, s.HasKL, target)
	}
	b := c.PayloadBytes()
	if b <= 1 {
		t.Fatalf("chosen budget %d: the target should need more than 1 byte", b)
	}
	// The next smaller budget, fitted and measured on its own, misses.
	spec.Bytes = b - 1
	smaller, err := eval.FitMeasured(m, cf, spec)
	if err != nil {
		t.Fatal(err)
	}
	if kl := smaller.Stats().HeldoutKL; kl < target {
		t.Fatalf("budget %d gives KL %v, also under %v: the search did not find the smallest", b-1, kl, target)
	}
	if _, _, err := eval.SearchKL(m, cf, 1e-30, spec, nil); err == nil {
		t.Error("unreachable target accepted")
	}
	if _, _, err := eval.SearchKL(m, cf, 0.1, eval.FitSpec{}, nil); err == nil {
		t.Error("search without a holdout accepted")
	}
}

// TestCompareEntropyCodec: for an entropy-coded codec Compare reports the
// measured bytes, one-token frames and whole-sequence frames, and every
// result carries its compute cost beside the stages'.
func TestCompareEntropyCodec(t *testing.T) {
	m := smallModel(t)
	cf := calibration(t, m, 1500, 11)
	c, _, err := eval.FitCapture(cf, eval.FitSpec{Bytes: 16, Holdout: 0.2, Entropy: true})
	if err != nil {
		t.Fatal(err)
	}
	fixed, _, err := eval.FitCapture(cf, eval.FitSpec{Bytes: 16, Holdout: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	seqs, _ := eval.SampleTokens(m, bos, eos, 200, 12, 1, nil)
	enc := codec.NewWire(c)
	encs := []wire.Encoding{enc, codec.NewWire(fixed), wire.F16}
	rep, err := eval.Compare(m, seqs, 2, encs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Results[0].EncodeUS != 0 || rep.UpperUS != 0 {
		t.Fatal("Compare timed the encodings itself")
	}
	if err := eval.MeasureCost(m, seqs, 2, encs, rep); err != nil {
		t.Fatal(err)
	}
	// The sizes, counted here one position at a time.
	var one, whole, positions int
	for _, s := range seqs {
		P := len(s) - 1
		if P < 1 {
			continue
		}
		rows, _, err := eval.Capture(m, [][]int{s[:P]}, 2, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for p := 0; p < P; p++ {
			b, err := c.AppendTokens(nil, rows[p*32:(p+1)*32])
			if err != nil {
				t.Fatal(err)
			}
			one += len(b)
		}
		b, err := c.AppendTokens(nil, rows)
		if err != nil {
			t.Fatal(err)
		}
		whole += len(b)
		positions += P
	}
	r, rf := rep.Results[0], rep.Results[1]
	if r.BytesPerToken != float64(one)/float64(positions) || r.PrefillBytesPerToken != float64(whole)/float64(positions) {
		t.Fatalf("bytes per token %v (prefill %v), counted %v (%v)", r.BytesPerToken, r.PrefillBytesPerToken,
			float64(one)/float64(positions), float64(whole)/float64(positions))
	}
	if !(r.PrefillBytesPerToken < r.BytesPerToken) || rf.BytesPerToken != 16 || rf.PrefillBytesPerToken != 0 {
		t.Fatalf("entropy %v / %v, fixed %v / %v", r.BytesPerToken, r.PrefillBytesPerToken, rf.BytesPerToken, rf.PrefillBytesPerToken)
	}
	if !(r.KL > 0 && r.KL < rf.KL) {
		t.Fatalf("entropy-coded KL %v, fixed bits' %v at the same budget", r.KL, rf.KL)
	}
	for _, x := range rep.Results {
		if !(x.EncodeUS > 0 && x.DecodeUS > 0 && x.PrefillEncodeUS > 0 && x.PrefillDecodeUS > 0) || x.UpperUS != rep.UpperUS || x.LowerUS != rep.LowerUS {
			t.Fatalf("%s: costs %+v", x.Wire, x)
		}
	}
	if !(rep.UpperUS > 0 && rep.LowerUS > 0) {
		t.Fatalf("stage costs %v, %v", rep.UpperUS, rep.LowerUS)
	}
}

// TestOutputFitMemo: an output fit whose sensitivity comes from a shared
// measurement is the same file as one that measures its own, at every
// budget.
func TestOutputFitMemo(t *testing.T) {
	m := smallModel(t)
	cf := calibration(t, m, 1500, 11)
	calls := 0
	memo := eval.MemoSensitivity(func(b codec.Basis) ([]float64, error) {
		calls++
		sp, err := eval.SplitHoldout(cf.Seqs, 0.2)
		if err != nil {
			return nil, err
		}
		return eval.Sensitivity(m, eval.Truncate(cf.Seqs[:len(cf.Seqs)-len(sp.Held)], eval.DefaultOutputTokens), 2, b, nil)
	})
	for _, b := range []int{8, 16} {
		for _, ent := range []bool{false, true} {
			own, _, err := eval.FitCapture(cf, eval.FitSpec{Bytes: b, Holdout: 0.2, Output: m, Entropy: ent})
			if err != nil {
				t.Fatal(err)
			}
			shared, _, err := eval.FitCapture(cf, eval.FitSpec{Bytes: b, Holdout: 0.2, Output: m, Entropy: ent, Weights: memo})
			if err != nil {
				t.Fatal(err)
			}
			if own.Digest() != shared.Digest() || own.Weights() == nil {
				t.Fatalf("%d bytes, entropy %v: the shared measurement gives another codec", b, ent)
			}
		}
	}
	if calls != 1 {
		t.Fatalf("sensitivity measured %d times, want once", calls)
	}
}
