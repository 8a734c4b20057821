package cluster

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/wire"
)

const mib = 1 << 20

func stories(t *testing.T) Shape {
	t.Helper()
	s, err := ShapeFromConfig(synth.Stories110MConfig(), tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func member(name string, free int64, decode time.Duration) Member {
	return Member{Name: name, Free: free, Speed: Speed{DecodeLayer: decode, PrefillLayer: decode / 6, Head: 4 * decode},
		Encodings: []wire.EncodingID{wire.EncodingF32, wire.EncodingF16, wire.EncodingQ8, wire.EncodingQ5, wire.EncodingQ4}}
}

var (
	loopback = Link{RTT: 50 * time.Microsecond, Mbps: 20000}
	gigabit  = Link{RTT: 200 * time.Microsecond, Mbps: 1000}
	slow     = Link{RTT: 30 * time.Millisecond, Mbps: 20}
)

// The testbed's pool: a and b on a gigabit link, c behind 20 Mbit/s and
// 30 ms; the head beside a.
func pool(freeA, freeB, freeC int64) Request {
	ls := Links{}
	ls.Set(HeadName, "a", loopback)
	ls.Set(HeadName, "b", gigabit)
	ls.Set(HeadName, "c", slow)
	ls.Set("a", "b", gigabit)
	ls.Set("a", "c", slow)
	ls.Set("b", "c", slow)
	return Request{Members: []Member{member("a", freeA, 3*time.Millisecond), member("b", freeB, 3*time.Millisecond), member("c", freeC, 3*time.Millisecond)}, Links: ls}
}

func TestShapeFromConfigMatchesWeights(t *testing.T) {
	cfg := synth.DemoConfig()
	w, err := synth.Weights(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ShapeOf(w)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ShapeFromConfig(cfg, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	// The demo model is untied: its classifier is its own matrix plus the final norm.
	if got.LayerBytes != want.LayerBytes || got.EmbedBytes != want.EmbedBytes || got.HeadBytes != want.HeadBytes {
		t.Fatalf("measured %+v, computed %+v", got, want)
	}
	// dim 128, hidden 344, kv 64: 2*128*128 + 2*64*128 + 3*344*128 floats + 2 norms.
	if wantLayer := int64(4 * (2*128*128 + 2*64*128 + 3*344*128 + 2*128)); got.LayerBytes != wantLayer {
		t.Fatalf("layer bytes %d, want %d", got.LayerBytes, wantLayer)
	}
}

// When two members hold the model, the planner leaves out the one behind
// the slow link, which the even and exo splits both use; it predicts
// faster decode and prefill than both.
func TestPlanLeavesOutTheSlowMember(t *testing.T) {
	r := pool(700*mib, 700*mib, 400*mib)
	r.Shape = stories(t)
	p, err := MakePlan(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range p.Stages {
		if st.Member.Name == "c" {
			t.Fatalf("plan uses c behind the slow link:\n%s", p)
		}
		if st.Bytes > st.Member.Free {
			t.Fatalf("stage on %s needs %s, has %s", st.Member.Name, GiB(st.Bytes), GiB(st.Member.Free))
		}
	}
	if len(p.Stages) != 2 {
		t.Fatalf("want 2 stages:\n%s", p)
	}
	even, err := EvenPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	prop, err := ProportionalPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []*Plan{even, prop} {
		if p.Predicted.Decode <= base.Predicted.Decode || p.Predicted.Prefill <= base.Predicted.Prefill {
			t.Fatalf("plan %v does not beat %v", p.Predicted, base.Predicted)
		}
	}
	joined := strings.Join(p.Reasons, "\n")
	if !strings.Contains(joined, "c unused: the best plan with it predicts") || !strings.Contains(joined, "exact: --max-kl 0 allows only f32") {
		t.Fatalf("reasons do not explain the choices:\n%s", joined)
	}
	t.Logf("plan:\n%s\nreasons:\n%s\neven %v\nexo %v", p, joined, even.Predicted, prop.Predicted)
}

// When every member is needed, a boundary over the slow link gets a lossy
// encoding within the KL budget (f16: q8 would save under 1% of the
// request's time more) and the fast ones stay exact.
func TestPlanChoosesEncodingPerBoundary(t *testing.T) {
	r := pool(450*mib, 450*mib, 300*mib)
	r.Shape = stories(t)
	r.MaxKL = 0.01
	r.KL = map[int]map[wire.EncodingID]float64{}
	for b := 1; b < 12; b++ {
		r.KL[b] = map[wire.EncodingID]float64{wire.EncodingF16: 0.0004, wire.EncodingQ8: 0.003, wire.EncodingQ5: 0.02, wire.EncodingQ4: 0.08}
	}
	p, err := MakePlan(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Stages) != 3 {
		t.Fatalf("want all 3 members:\n%s", p)
	}
	var sawSlow bool
	for i, b := range p.Boundaries {
		crossesSlow := b.From == "c" || b.To == "c"
		switch {
		case crossesSlow && b.Encoding != wire.EncodingF16:
			t.Fatalf("boundary %d over the slow link: %v, want f16", i+1, b.Encoding)
		case !crossesSlow && b.Encoding != wire.EncodingF32:
			t.Fatalf("boundary %d over a fast link: %v, want f32", i+1, b.Encoding)
		}
		sawSlow = sawSlow || crossesSlow
	}
	if !sawSlow {
		t.Fatal("no boundary crosses the slow link")
	}
	joined := strings.Join(p.Reasons, "\n")
	if !strings.Contains(joined, "→ f16 (KL 0.0004 ≤ 0.01)") || !strings.Contains(joined, "f32 would cap decode at") {
		t.Fatalf("reasons:\n%s", joined)
	}
	t.Logf("plan:\n%s\n%s", p, joined)

	// With no budget, everything is exact.
	r.MaxKL = 0
	p, err = MakePlan(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Boundaries {
		if b.Encoding != wire.EncodingF32 {
			t.Fatalf("--max-kl 0 chose %v", b.Encoding)
		}
	}
	// An encoding without a measurement is never used.
	r.MaxKL = 1
	r.KL = nil
	p, err = MakePlan(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Boundaries {
		if b.Encoding != wire.EncodingF32 {
			t.Fatalf("unmeasured encoding %v chosen", b.Encoding)
		}
	}
}

// A faster member gets more layers.
func TestPlanFavoursFasterMembers(t *testing.T) {
	r := pool(900*mib, 900*mib, 100*mib)
	r.Shape = stories(t)
	r.Members[1].Speed = Speed{DecodeLayer: 6 * time.Millisecond, PrefillLayer: time.Millisecond, Head: 20 * time.Millisecond}
	p, err := MakePlan(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range p.Stages {
		if st.Member.Name == "b" && st.Last-st.First != 1 {
			t.Fatalf("slow member b got %d layers:\n%s", st.Last-st.First, p)
		}
	}
}

func TestPlanRefusesWithShortfall(t *testing.T) {
	r := pool(200*mib, 200*mib, 100*mib)
	r.Shape = stories(t)
	_, err := MakePlan(r)
	if err == nil || !strings.Contains(err.Error(), "short by") {
		t.Fatalf("err %v, want a refusal naming the shortfall", err)
	}
	t.Log(err)
	// Enough bytes in total, but not as whole layers with the embedding.
	r = pool(200*mib, 200*mib, 400*mib)
	r.Shape = stories(t)
	r.Members = r.Members[2:]
	r.Members[0].Free = 700 * mib
	if _, err := MakePlan(r); err == nil || !strings.Contains(err.Error(), "short by") {
		t.Fatalf("single small member: %v", err)
	}
}

// Enough bytes in all, but every member's remainder is just short of a
// layer: the refusal names how many layers the best arrangement holds and
// how many are missing.
func TestPlanRefusesWholeLayersShortfall(t *testing.T) {
	r := Request{Shape: stories(t), Sessions: 1, Overhead: mib, Links: Links{}}
	P := r.Shape.LayerBytes + r.Shape.KVBytesPerLayer() // one session
	// first and last hold one layer each, the four in the middle two each:
	// 10 of 12 layers, though the bytes would cover 16.
	room := func(extra int64, layers int64) int64 { return r.Overhead + extra + layers*P + P - 1 }
	ends := min(r.Shape.EmbedBytes, r.Shape.HeadBytes) // either way round, one layer
	r.Members = []Member{member("f", room(ends, 1), time.Millisecond), member("t", room(ends, 1), time.Millisecond)}
	for _, n := range []string{"m1", "m2", "m3", "m4"} {
		r.Members = append(r.Members, member(n, room(0, 2), time.Millisecond))
	}
	names := []string{HeadName}
	for _, m := range r.Members {
		names = append(names, m.Name)
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			r.Links.Set(a, b, gigabit)
		}
	}
	_, err := MakePlan(r)
	if err == nil {
		t.Fatal("planned a pool that cannot hold 12 whole layers")
	}
	for _, want := range []string{"as whole layers", "short by 2 layers", "holds 10 of its 12 layers", "first f, last t"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal lacks %q:\n%v", want, err)
		}
	}
	t.Log(err)
	// One more byte for each middle member completes a third layer there.
	for i := 2; i < len(r.Members); i++ {
		r.Members[i].Free++
	}
	if _, err := MakePlan(r); err != nil {
		t.Fatalf("with a layer more in each middle member: %v", err)
	}
	// No member can hold the embedding with a layer.
	for i := range r.Members {
		r.Members[i].Free = room(0, 2)
	}
	if _, err := MakePlan(r); err == nil || !strings.Contains(err.Error(), "no member has room for the embedding") {
		t.Fatalf("no member can be first: %v", err)
	}
}

func TestPlanNeedsEveryLink(t *testing.T) {
	r := pool(700*mib, 700*mib, 300*mib)
	r.Shape = stories(t)
	delete(r.Links, [2]string{"a", "b"})
	delete(r.Links, [2]string{HeadName, "a"})
	_, err := MakePlan(r)
	if err != nil {
		t.Fatal(err) // b and c alone, or with a via the measured links, still plan
	}
	r.Links = Links{}
	if _, err := MakePlan(r); err == nil || !strings.Contains(err.Error(), "no measurement of the link") {
		t.Fatalf("no links: %v", err)
	}
}

// exo's rule: cumulative memory fractions, rounded.
func TestProportionalSplit(t *testing.T) {
	r := pool(2000*mib, 1000*mib, 1000*mib)
	r.Shape = stories(t)
	p, err := ProportionalPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]int{{0, 6}, {6, 9}, {9, 12}}
	if got := p.Ranges(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("ranges %v, want %v", got, want)
	}
	e, err := EvenPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Ranges(); got[0] != [2]int{0, 4} || got[2] != [2]int{8, 12} {
		t.Fatalf("even ranges %v", got)
	}
	// An even split that overflows a member is reported with the shortfall.
	r = pool(2000*mib, 2000*mib, 150*mib)
	r.Shape = stories(t)
	if _, err := EvenPlan(r); err == nil || !strings.Contains(err.Error(), "stage 3 on c") || !strings.Contains(err.Error(), "short by") {
		t.Fatalf("even split over a small member: %v", err)
	}
}

// The prediction, worked by hand for a two-stage chain of a tiny model.
func TestPredictionArithmetic(t *testing.T) {
	cfg := synth.DemoConfig() // dim 128, 6 layers, vocab 512
	shape, err := ShapeFromConfig(cfg, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	a := Member{Name: "a", Free: 1 << 30, Speed: Speed{DecodeLayer: time.Millisecond, PrefillLayer: 100 * time.Microsecond, Head: 2 * time.Millisecond}, Encodings: []wire.EncodingID{wire.EncodingF32}}
	b := a
	b.Name = "b"
	ls := Links{}
	ls.Set(HeadName, "a", Link{RTT: 2 * time.Millisecond, Mbps: 8})
	ls.Set("a", "b", Link{RTT: 10 * time.Millisecond, Mbps: 8})
	ls.Set("b", HeadName, Link{RTT: 4 * time.Millisecond, Mbps: 8})
	r := Request{Shape: shape, Links: ls, Members: []Member{a, b}, Prompt: 10, Generate: 10}
	p, err := Evaluate(r, []Member{a, b}, [][2]int{{0, 2}, {2, 6}})
	if err != nil {
		t.Fatal(err)
	}
	// At 8 Mbit/s a byte takes 1 µs. Every message carries 82 bytes of framing.
	const us = 1e-6
	step := 6*1e-3 + 2e-3 + // six layers and the classifier
		(1e-3 + (4+82)*us) + // ids in: half of 2 ms + 4 bytes
		(5e-3 + (512+82)*us) + // one token of f32 activations: 128*4 bytes
		(2e-3 + (4+82)*us) // the greedy id back
	prompt := 6*10*100e-6 + 2e-3 +
		(1e-3 + (40+82)*us) + (5e-3 + (5120+82)*us) + (2e-3 + (4+82)*us)
	if got := p.Predicted.Step.Seconds(); math.Abs(got-step) > 1e-9 {
		t.Fatalf("step %.9f s, want %.9f", got, step)
	}
	if got := p.Predicted.Prompt.Seconds(); math.Abs(got-prompt) > 1e-9 {
		t.Fatalf("prompt %.9f s, want %.9f", got, prompt)
	}
	if math.Abs(p.Predicted.Decode-1/step) > 1e-6 || math.Abs(p.Predicted.Prefill-10/prompt) > 1e-6 {
		t.Fatalf("prediction %v", p.Predicted)
	}
}

func TestMemberValidation(t *testing.T) {
	m := member("x", 0, 0)
	m.Encodings = nil
	err := m.Validate()
	for _, want := range []string{"free memory 0", "decode time per layer 0s", "lack f32"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want %q", err, want)
		}
	}
	if _, err := MakePlan(Request{Shape: stories(t), Members: []Member{m}}); err == nil {
		t.Fatal("planned with an invalid member")
	}
}

// KL is measured teacher-forced: f16 loses less than q8, which loses less
// than q4, at every boundary, and nothing is exactly zero.
func TestMeasureKL(t *testing.T) {
	w, err := synth.Weights(synth.DemoConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(w)
	if err != nil {
		t.Fatal(err)
	}
	kl, err := MeasureKL(m, KLOptions{Tokens: 64, BOS: 1, EOS: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(kl) != w.Config.NLayers-1 {
		t.Fatalf("%d boundaries measured, want %d", len(kl), w.Config.NLayers-1)
	}
	for b, row := range kl {
		f16, q8, q4 := row[wire.EncodingF16], row[wire.EncodingQ8], row[wire.EncodingQ4]
		if !(0 < f16 && f16 < q8 && q8 < q4) {
			t.Errorf("boundary %d: f16 %g, q8 %g, q4 %g: want 0 < f16 < q8 < q4", b, f16, q8, q4)
		}
	}
	t.Logf("\n%s", kl)
}

// withCodecs gives r a codec at every boundary, of perToken bytes a token
// and recorded KL kl, held by every member.
func withCodecs(r *Request, perToken int, kl float64) {
	r.Codecs = map[int]CodecInfo{}
	var ds []wire.CodecDigest
	for b := 1; b < r.Shape.Config.NLayers; b++ {
		d := wire.CodecDigest{Boundary: uint32(b), ID: uint32(0xc0de00 + b), Digest: [32]byte{byte(b), 0xc0}}
		r.Codecs[b] = CodecInfo{Digest: d, BytesPerToken: perToken, KL: kl}
		ds = append(ds, d)
	}
	for i := range r.Members {
		r.Members[i].Codecs = ds
		r.Members[i].Encodings = append(r.Members[i].Encodings, wire.EncodingLowRank)
	}
}

// A learned codec whose recorded KL is within the budget wins a slow
// boundary: at 96 bytes a token it is 16x smaller than f16, and it is more
// exact than q8. The fast boundaries stay f32.
func TestPlanChoosesLowRankOverSlowLink(t *testing.T) {
	r := pool(450*mib, 450*mib, 300*mib)
	r.Shape = stories(t)
	r.MaxKL = 0.01
	r.KL = map[int]map[wire.EncodingID]float64{}
	for b := 1; b < 12; b++ {
		r.KL[b] = map[wire.EncodingID]float64{wire.EncodingF16: 0.0004, wire.EncodingQ8: 0.003, wire.EncodingQ5: 0.02, wire.EncodingQ4: 0.08}
	}
	withCodecs(&r, 96, 0.002)
	p, err := MakePlan(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Stages) != 3 {
		t.Fatalf("want all 3 members:\n%s", p)
	}
	slowSeen := 0
	for i, b := range p.Boundaries {
		crossesSlow := b.From == "c" || b.To == "c"
		want := wire.EncodingF32
		if crossesSlow {
			want = wire.EncodingLowRank
			slowSeen++
			if b.Codec != r.Codecs[b.Layer].Digest.ID || b.KL != 0.002 {
				t.Errorf("boundary %d: codec %08x KL %v, want the codec of boundary %d (%08x, KL 0.002)", i+1, b.Codec, b.KL, b.Layer, r.Codecs[b.Layer].Digest.ID)
			}
		}
		if b.Encoding != want {
			t.Errorf("boundary %d (%s → %s): %v, want %v\n%s", i+1, b.From, b.To, b.Encoding, want, p)
		}
	}
	if slowSeen == 0 {
		t.Fatalf("no boundary crosses the slow link:\n%s", p)
	}
	joined := strings.Join(p.Reasons, "\n")
	if !strings.Contains(joined, "→ lowrank (KL 0.002 ≤ 0.01)") || !strings.Contains(joined, "f32 would cap decode at") {
		t.Fatalf("reasons:\n%s", joined)
	}
	t.Logf("plan:\n%s\n%s", p, joined)
	lowrank := p.Predicted

	// Over the budget, the codec is not a candidate: f16 again.
	withCodecs(&r, 96, 0.02)
	if p, err = MakePlan(r); err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Boundaries {
		if b.Encoding == wire.EncodingLowRank {
			t.Fatalf("a codec with KL 0.02 chosen under --max-kl 0.01:\n%s", p)
		}
	}
	if !(lowrank.Decode > p.Predicted.Decode && lowrank.Prefill > p.Predicted.Prefill) {
		t.Errorf("lowrank plan predicts %v, the f16 one %v: want lowrank faster", lowrank, p.Predicted)
	}
	// A codec only one neighbour holds is not a candidate either.
	withCodecs(&r, 96, 0.002)
	r.Members[2].Codecs = nil
	if p, err = MakePlan(r); err != nil {
		t.Fatal(err)
	}
	for _, b := range p.Boundaries {
		if b.Encoding == wire.EncodingLowRank {
			t.Fatalf("lowrank chosen though c holds no codec:\n%s", p)
		}
	}
}

// A codec's projections cost compute on both sides of the hop: priced at
// the members' layer speed, a codec that reads as much as several layers
// per token loses the slow boundary to q8, while a cheap one wins it, and
// its compute shows in the prediction.
func TestPlanPricesCodecCompute(t *testing.T) {
	r := pool(450*mib, 450*mib, 300*mib)
	r.Shape = stories(t)
	r.MaxKL = 0.01
	r.KL = map[int]map[wire.EncodingID]float64{}
	for b := 1; b < 12; b++ {
		r.KL[b] = map[wire.EncodingID]float64{wire.EncodingF16: 0.0004, wire.EncodingQ8: 0.003}
	}
	// The codec's measured compute per token, each way (encode on one
	// side, decode on the other), as a multiple of one layer's decode step
	// and prefill token on the members.
	plan := func(layers float64) *Plan {
		t.Helper()
		withCodecs(&r, 96, 0.002)
		m := r.Members[0].Speed
		for b, ci := range r.Codecs {
			ci.EncodeStep = time.Duration(layers * float64(m.DecodeLayer))
			ci.DecodeStep = ci.EncodeStep
			ci.EncodePrefill = time.Duration(layers * float64(m.PrefillLayer))
			ci.DecodePrefill = ci.EncodePrefill
			r.Codecs[b] = ci
		}
		p, err := MakePlan(r)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	slow := func(p *Plan) Boundary {
		for _, b := range p.Boundaries {
			if b.From == "c" || b.To == "c" {
				return b
			}
		}
		t.Fatalf("no boundary crosses the slow link:\n%s", p)
		return Boundary{}
	}
	free, cheap, dear := plan(0), plan(1.0/50), plan(8)
	if slow(free).Encoding != wire.EncodingLowRank || slow(cheap).Encoding != wire.EncodingLowRank {
		t.Fatalf("a cheap codec lost the slow boundary:\n%s\n%s", free, cheap)
	}
	if e := slow(dear).Encoding; e == wire.EncodingLowRank {
		t.Fatalf("a codec costing 8 layers' compute per token each way still chosen:\n%s", dear)
	}
	if !(cheap.Predicted.Step > free.Predicted.Step && cheap.Predicted.Prompt > free.Predicted.Prompt) {
		t.Fatalf("the codec's compute is not in the prediction: %v with it, %v without", cheap.Predicted, free.Predicted)
	}
	// The reasons say what the codec costs: encode plus decode, each 1/50
	// of a layer's decode step.
	step := 2 * r.Members[0].Speed.DecodeLayer.Seconds() / 50 * 1e6
	if want := fmt.Sprintf("the codec's encode plus decode: %.1f µs a decode step", step); !strings.Contains(strings.Join(cheap.Reasons, "\n"), want) {
		t.Fatalf("reasons do not say %q:\n%s", want, strings.Join(cheap.Reasons, "\n"))
	}
	t.Logf("slow boundary: %v free, %v at 1/50 of a layer, %v at 8 layers", slow(free).Encoding, slow(cheap).Encoding, slow(dear).Encoding)
}
