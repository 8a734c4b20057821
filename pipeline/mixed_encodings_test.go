package pipeline

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// fitCodecs fits a lowrank codec of perToken bytes at every boundary of
// the model and records its held-out KL, measured on sampled tokens.
func fitCodecs(t *testing.T, m *loader.Model, perToken int) map[int]*codec.Codec {
	t.Helper()
	mod, calib := calibration(t, m)
	held, err := eval.SampleTokens(mod, m.Tokenizer.BOS(), m.Tokenizer.EOS(), 128, 7, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]*codec.Codec{}
	for b := 1; b < m.Weights.Config.NLayers; b++ {
		rows, n, err := eval.Capture(mod, calib, b, 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := codec.Fit(rows, n, m.Weights.Config.Dim, codec.FitOptions{Bytes: perToken})
		if err != nil {
			t.Fatal(err)
		}
		kl, err := eval.HeldoutKL(mod, held, b, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetHeldoutKL(kl); err != nil {
			t.Fatal(err)
		}
		out[b] = c
	}
	return out
}

// calibration is the model's forward pass and the calibration text the
// codecs of these tests are fitted on: the shared greedy reference, twice.
func calibration(t *testing.T, m *loader.Model) (*model.Model, [][]int) {
	t.Helper()
	mod, err := model.New(m.Weights)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	if err != nil {
		t.Fatal(err)
	}
	return mod, eval.TokensFromText(m.Tokenizer, strings.Repeat(string(ref), 2), m.Weights.Config.SeqLen)
}

// encodingsFor resolves a chain's boundary encodings for the simulation:
// the built-ins from the default registry, lowrank from the codec of the
// boundary.
func encodingsFor(t *testing.T, ranges [][2]int, ids []wire.EncodingID, codecs map[int]*codec.Codec) []wire.Encoding {
	t.Helper()
	var out []wire.Encoding
	for i, id := range ids {
		if id == wire.EncodingLowRank {
			out = append(out, codec.NewWire(codecs[ranges[i+1][0]]))
			continue
		}
		e, err := wire.Default.Lookup(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// simulate runs the whole model in this process over ranges, passing the
// hidden states through each boundary's encoding (encoded, then decoded)
// as a chain does, and returns the logits of every position.
func simulate(t *testing.T, w *model.Weights, tokens []int, ranges [][2]int, encs []wire.Encoding) [][]float32 {
	t.Helper()
	mod, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	c := w.Config
	n, d := len(tokens), c.Dim
	x := make([]float32, n*d)
	for i, id := range tokens {
		if err := mod.Embed(id, x[i*d:(i+1)*d]); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range ranges {
		st, err := mod.NewState(r[0], r[1])
		if err != nil {
			t.Fatal(err)
		}
		if err := mod.LayersBatch(st, x, 0, n); err != nil {
			t.Fatal(err)
		}
		if i == len(encs) {
			break
		}
		buf, err := encodeFrame(encs[i], x, n, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := encs[i].Decode(x, buf, n, d); err != nil {
			t.Fatal(err)
		}
	}
	var out [][]float32
	for p := range n {
		logits := make([]float32, c.VocabSize)
		if err := mod.Head(x[p*d:(p+1)*d], logits); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
	}
	return out
}

// encodeFrame is the payload of a frame of n tokens in e, fixed-size or
// variable-length.
func encodeFrame(e wire.Encoding, x []float32, n, d int) ([]byte, error) {
	if ve, ok := e.(wire.VariableEncoding); ok {
		return ve.AppendEncode(nil, x[:n*d], n, d)
	}
	size, err := e.PayloadSize(n, d)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	return buf, e.Encode(buf, x[:n*d], n, d)
}

// meanKL is the mean over positions of KL(softmax(want) || softmax(got)).
func meanKL(got, want [][]float32) float64 {
	logSoftmax := func(v []float32) []float64 {
		mx := float64(slices.Max(v))
		z := 0.0
		for _, x := range v {
			z += math.Exp(float64(x) - mx)
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x) - mx - math.Log(z)
		}
		return out
	}
	s := 0.0
	for i := range want {
		p, q := logSoftmax(want[i]), logSoftmax(got[i])
		for j := range p {
			s += math.Exp(p[j]) * (p[j] - q[j])
		}
	}
	return s / float64(len(want))
}

// A chain dialed with a different encoding at each boundary (f32, f16, q8
// and a learned codec) carries each boundary in its own encoding: the
// logits are bit-identical to the whole model run with the same encodings
// applied at the same boundaries, they differ from the exact model's, and
// each stage sent exactly its encoding's bytes downstream.
func TestChainWithMixedEncodings(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	codecs := fitCodecs(t, m, 16)
	ranges := [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}
	ids := []wire.EncodingID{wire.EncodingF32, wire.EncodingF16, wire.EncodingQ8, wire.EncodingLowRank}
	local, err := stage.StartLocal(m.Weights, ranges, stage.Config{Identity: id, Timeout: 5 * time.Second, Logger: quiet}, map[int]*codec.Codec{4: codecs[4]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	c, err := Dial(context.Background(), local.Addrs, Options{Identity: id, Config: m.Weights.Config, Encodings: ids,
		Codecs: codec.Digests(map[int]*codec.Codec{4: codecs[4]}), Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tokens := m.Tokenizer.Encode("Once upon a time, there was a little girl named Lily. She loved to play outside.", true, false)
	s, err := c.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Forward(context.Background(), tokens, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	encs := encodingsFor(t, ranges, ids, codecs)
	testmodels.SameBits(t, "mixed chain against the simulated encodings", got, simulate(t, m.Weights, tokens, ranges, encs))
	exact := simulate(t, m.Weights, tokens, [][2]int{{0, 5}}, nil)
	kl := meanKL(got, exact)
	if !(kl > 0) {
		t.Fatalf("mean KL %v against the exact model: the lossy boundaries changed nothing", kl)
	}
	t.Logf("mean KL against the exact model: %.5f (codec at layer 4: %d bytes a token, recorded KL %.5f)", kl, codecs[4].PayloadBytes(), codecs[4].Stats().HeldoutKL)
	// Stage i sent one Prefill frame of len(tokens) positions in its
	// boundary's encoding.
	for i, e := range encs {
		size, _ := e.PayloadSize(len(tokens), m.Weights.Config.Dim)
		want := uint64(wire.HeaderSize + size)
		if got := downBytes(t, c, i, want); got != want {
			t.Errorf("stage %d sent %d bytes downstream, want %d (%s)", i+1, got, want, e.Name())
		}
	}
}

// downBytes is stage i's count of bytes sent downstream, asked for until it
// reaches want or 5 s pass. The count is a statistic that a ping may read a
// moment before the last frame's bytes are added (a CI run under load saw
// 1896 of 1969): asking again keeps the check exact without that race.
func downBytes(t *testing.T, c *Chain, i int, want uint64) uint64 {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, _, err := c.Ping(context.Background(), i, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if st.DownBytes >= want || time.Now().After(deadline) {
			return st.DownBytes
		}
	}
}

// mixedPool starts three in-process pool members that hold the codecs;
// the first sends through an emulated 2 Mbit/s link, so every link it
// measures to another member is slow, and the other links are loopback.
func mixedPool(t *testing.T, m *loader.Model, codecs map[int]*codec.Codec) []string {
	t.Helper()
	id, _ := m.Identity()
	var addrs []string
	for i := range 3 {
		open := func(first, last int) (*stage.Part, error) {
			part := *m.Weights
			part.First, part.Last = first, last
			mod, err := model.New(&part)
			if err != nil {
				return nil, err
			}
			return &stage.Part{Model: mod, Codecs: codecs, Close: func() error { return nil }}, nil
		}
		base := stage.Config{Name: fmt.Sprintf("member-%d", i+1), Timeout: 10 * time.Second, Logger: quiet}
		if i == 0 {
			base.Link = link.Config{RateMbps: 2}
		}
		addrs = append(addrs, listenPoolMember(t, stage.PoolConfig{
			Base: base, Identity: id, Model: m.Weights.Config, Open: open, Codecs: codec.Digests(codecs),
			Describe: wire.Description{Free: 3 * mib, DecodeNanos: 20_000, PrefillNanos: 10_000, HeadNanos: 30_000},
		}))
	}
	return addrs
}

// The planner, given a slow member, chooses a lossy encoding for the
// boundaries over its slow link and f32 for the fast one; the chain dialed
// from the Assembly carries those encodings (bit-identical to the
// simulation). A second head reuses the assignment with the same encodings
// from the plan's record; without the record, or with a budget the
// recorded encodings exceed, it falls back to f32.
func TestAssembleMixedEncodings(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	codecs := fitCodecs(t, m, 16)
	mod, _ := model.New(m.Weights)
	kl, err := cluster.MeasureKL(mod, cluster.KLOptions{Tokens: 64, BOS: m.Tokenizer.BOS(), EOS: m.Tokenizer.EOS()})
	if err != nil {
		t.Fatal(err)
	}
	budget := 0.0
	for _, c := range codecs {
		budget = max(budget, 1.01*c.Stats().HeldoutKL)
	}
	shape, err := cluster.ShapeOf(m.Weights)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := cluster.CodecInfos(codecs)
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(t.TempDir(), "plan.json")
	po := PoolOptions{Request: cluster.Request{Shape: shape, Overhead: mib, MaxKL: budget, KL: kl, Codecs: infos},
		Measure: cluster.MeasureOptions{Pings: 2, MinTime: 5 * time.Millisecond, MaxBytes: 1 << 20}, Logger: quiet, Record: record}
	addrs := mixedPool(t, m, codecs)
	opts := Options{Identity: id, Config: m.Weights.Config, Codecs: codec.Digests(codecs), Timeout: 10 * time.Second, Logger: quiet}
	asm, err := Assemble(context.Background(), addrs, opts, po)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s%s", asm.Plan, strings.Join(asm.Plan.Reasons, "\n"))
	if len(asm.Addrs) != 3 {
		t.Fatalf("plan over %d members, want all 3", len(asm.Addrs))
	}
	// Over the slow member's link a lossy encoding must be chosen. Over the
	// loopback links it depends on what they measured: at 139 Mbit/s under
	// CI's load f16 saved 5 % of prefill, more than the planner's 1 %
	// margin, and was rightly chosen; so those are not asserted.
	for i, b := range asm.Plan.Boundaries {
		if slow := b.From == "member-1" || b.To == "member-1"; slow && asm.Encodings[i] == wire.EncodingF32 {
			t.Fatalf("boundary %d (%s → %s over %v): f32; want a lossy encoding over the slow link", i+1, b.From, b.To, b.Link)
		}
	}
	tokens := m.Tokenizer.Encode("Once upon a time, there was a little girl named Lily.", true, false)
	want := simulate(t, m.Weights, tokens, asm.Plan.Ranges(), encodingsFor(t, asm.Plan.Ranges(), asm.Encodings, codecs))
	check := func(what string, a *Assembly) {
		t.Helper()
		o := opts
		o.Encodings = a.Encodings
		c, err := Dial(context.Background(), a.Addrs, o)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := c.NewSession(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Forward(context.Background(), tokens, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		testmodels.SameBits(t, what, got, want)
	}
	check("the planned chain against the simulated encodings", asm)

	again, err := Assemble(context.Background(), addrs, opts, po)
	if err != nil {
		t.Fatal(err)
	}
	if again.Plan != nil || !slices.Equal(again.Addrs, asm.Addrs) || !slices.Equal(again.Encodings, asm.Encodings) {
		t.Fatalf("second head: %v %v, want the planned chain %v %v reused", again.Addrs, again.Encodings, asm.Addrs, asm.Encodings)
	}
	check("the reused chain against the simulated encodings", again)

	allF32 := func(a *Assembly) bool {
		return !slices.ContainsFunc(a.Encodings, func(e wire.EncodingID) bool { return e != wire.EncodingF32 })
	}
	for _, c := range []struct {
		what string
		edit func(*PoolOptions)
	}{
		{"no record", func(p *PoolOptions) { p.Record = "" }},
		{"a record of another pool", func(p *PoolOptions) { p.Record = filepath.Join(t.TempDir(), "absent.json") }},
		{"--max-kl 0", func(p *PoolOptions) { p.Request.MaxKL = 0 }},
	} {
		p := po
		c.edit(&p)
		a, err := Assemble(context.Background(), addrs, opts, p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Addrs, asm.Addrs) || len(a.Encodings) != 2 || !allF32(a) {
			t.Fatalf("reuse with %s: %v %v, want the chain %v with f32 boundaries", c.what, a.Addrs, a.Encodings, asm.Addrs)
		}
	}
}

// A chain whose boundary carries an entropy-coded codec (frames of varying
// length, one stream per frame), or a trellis-coded one with or without
// token classes, gives, for a
// prefill and then decode steps, the same logits bit for bit as the model
// run with that codec applied per frame; the stage's byte counter holds the
// frames' real sizes.
func TestChainWithEntropyCodec(t *testing.T) {
	m := openStories(t)
	mod, calib := calibration(t, m)
	rows, n, err := eval.Capture(mod, calib, 2, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Token classes need a sensitivity per row; any will do for the wire.
	sens := make([]float64, n)
	for r := range sens {
		sens[r] = 1 + float64(r%7)
	}
	for _, tc := range []struct {
		name string
		opts codec.FitOptions
	}{
		{"entropy", codec.FitOptions{Bytes: 24, Entropy: true}},
		{"trellis", codec.FitOptions{Bytes: 24, Entropy: true, Trellis: true}},
		{"token classes", codec.FitOptions{Bytes: 24, Entropy: true, Trellis: true, TokenSensitivity: sens}},
	} {
		c, err := codec.Fit(rows, n, m.Weights.Config.Dim, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if c.Trellis() != tc.opts.Trellis || (c.ClassMultipliers() != nil) != (tc.opts.TokenSensitivity != nil) {
			t.Fatalf("%s: codec Trellis() %v, multipliers %v", tc.name, c.Trellis(), c.ClassMultipliers())
		}
		t.Run(tc.name, func(t *testing.T) { chainWithVariableCodec(t, m, mod, c) })
	}
}

func chainWithVariableCodec(t *testing.T, m *loader.Model, mod *model.Model, c *codec.Codec) {
	id, _ := m.Identity()
	codecs := map[int]*codec.Codec{2: c}
	ranges := [][2]int{{0, 2}, {2, 5}}
	local, err := stage.StartLocal(m.Weights, ranges, stage.Config{Identity: id, Timeout: 5 * time.Second, Logger: quiet}, codecs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	chain, err := Dial(context.Background(), local.Addrs, Options{Identity: id, Config: m.Weights.Config, Encoding: wire.EncodingLowRank,
		Codecs: codec.Digests(codecs), Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	tokens := m.Tokenizer.Encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the park.", true, false)
	prompt := 12
	s, err := chain.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Forward(context.Background(), tokens[:prompt], 0, true)
	if err != nil {
		t.Fatal(err)
	}
	for p := prompt; p < len(tokens); p++ {
		l, err := s.Forward(context.Background(), tokens[p:p+1], p, false)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, l...)
	}
	// The simulation: layers [0, 2) over every token, the prompt's states as
	// one frame and each later state as its own, layers [2, 5) and the head.
	d := m.Weights.Config.Dim
	enc := codec.NewWire(c)
	x := make([]float32, len(tokens)*d)
	for i, tok := range tokens {
		if err := mod.Embed(tok, x[i*d:(i+1)*d]); err != nil {
			t.Fatal(err)
		}
	}
	upper, _ := mod.NewState(0, 2)
	if err := mod.LayersBatch(upper, x, 0, len(tokens)); err != nil {
		t.Fatal(err)
	}
	var wantBytes uint64
	frame := func(lo, hi int) {
		b, err := encodeFrame(enc, x[lo*d:hi*d], hi-lo, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Decode(x[lo*d:hi*d], b, hi-lo, d); err != nil {
			t.Fatal(err)
		}
		wantBytes += uint64(wire.HeaderSize + len(b))
	}
	frame(0, prompt)
	prefillBytes := wantBytes
	for p := prompt; p < len(tokens); p++ {
		frame(p, p+1)
	}
	lower, _ := mod.NewState(2, 5)
	if err := mod.LayersBatch(lower, x, 0, len(tokens)); err != nil {
		t.Fatal(err)
	}
	var want [][]float32
	for p := range tokens {
		l := make([]float32, m.Weights.Config.VocabSize)
		if err := mod.Head(x[p*d:(p+1)*d], l); err != nil {
			t.Fatal(err)
		}
		want = append(want, l)
	}
	testmodels.SameBits(t, "chain with a variable-length codec against the simulation", got, want)
	if got := downBytes(t, chain, 0, wantBytes); got != wantBytes {
		t.Fatalf("stage 1 counted %d bytes sent downstream, the frames take %d", got, wantBytes)
	}
	steps := len(tokens) - prompt
	t.Logf("%d tokens (%d prompt): %d bytes downstream; decode steps' payloads %.2f bytes on average (the codec's fit rows: %.2f)",
		len(tokens), prompt, wantBytes, float64(wantBytes-prefillBytes)/float64(steps)-wire.HeaderSize, c.MeanPayloadBytes())
}
