package cluster

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/seamlm/seam/wire"
)

// Request is what a plan is made from.
type Request struct {
	Shape   Shape
	Members []Member
	Links   Links // between members, and between each member and HeadName
	// Sessions is how many sessions' KV caches each stage must hold at once
	// (default 4). The stages are then capped at this many sessions.
	Sessions int
	// Overhead is the memory a stage needs beyond weights and KV caches:
	// runtime, buffers, scratch (default 64 MiB).
	Overhead int64
	// MaxKL is the per-boundary quality budget: an encoding other than f32
	// is used at a boundary only if its measured KL there is at most this.
	// Zero keeps every boundary f32 (exact).
	MaxKL float64
	// KL holds the measured mean KL (nats per position, against the whole
	// model) of each encoding at each boundary, by boundary layer. An
	// encoding with no measurement at a boundary is not used there.
	KL KLTable
	// Codecs are the learned codecs the head holds, by boundary layer.
	Codecs map[int]CodecInfo
	// Encodings are the candidates, most exact first (default f32, f16,
	// q8, q5, q4, lowrank).
	Encodings []wire.EncodingID
	// Prompt and Generate describe the request the plan is scored on:
	// Prompt tokens of prefill, then Generate decode steps (default 128 each).
	Prompt, Generate int
	// Logits: results travel back as logits (sampling on the head) rather
	// than as greedy token ids.
	Logits bool
}

// CodecInfo describes a learned codec for the planner.
type CodecInfo struct {
	Digest wire.CodecDigest
	// BytesPerToken is the payload of one token: for an entropy-coded
	// codec the mean its fit measured, rounded up.
	BytesPerToken int
	KL            float64 // held-out KL recorded when it was fitted
	// EncodeStep and DecodeStep are the codec's compute per token with one
	// token per frame (a decode step), EncodePrefill and DecodePrefill per
	// token of a prompt sent as one frame: what seam eval reports as
	// encode_us, decode_us and their prefill counterparts, measured on the
	// head's machine (eval.CodecCost). The sending member pays the encode,
	// the receiving one the decode, so a codec whose compute costs more than
	// its bytes save on a fast link is not chosen there. 0: not priced.
	EncodeStep, DecodeStep, EncodePrefill, DecodePrefill time.Duration
}

// Stage is one member's part of a plan.
type Stage struct {
	Member      Member
	First, Last int   // layers [First, Last)
	Bytes       int64 // memory the part needs
}

// Boundary is the hop between two consecutive stages.
type Boundary struct {
	Layer    int // the first layer of the downstream stage
	From, To string
	Encoding wire.EncodingID
	Codec    uint32 // short id, for lowrank
	KL       float64
	Link     Link
}

// Prediction is a plan's predicted speed.
type Prediction struct {
	Decode  float64       // tokens per second, one session
	Prefill float64       // prompt tokens per second
	Step    time.Duration // one decode step
	Prompt  time.Duration // the whole prefill of Request.Prompt tokens
}

func (p Prediction) String() string {
	return fmt.Sprintf("decode %.1f tok/s (%.2f ms per token), prefill %.0f tok/s", p.Decode, p.Step.Seconds()*1e3, p.Prefill)
}

// Plan is a chain: stages in order, the encoding of each boundary, the
// predicted speed, and the reasons for each choice (one line each).
type Plan struct {
	Stages     []Stage
	Boundaries []Boundary
	Predicted  Prediction
	Reasons    []string
}

// Ranges returns the stages' layer ranges.
func (p *Plan) Ranges() [][2]int {
	var out [][2]int
	for _, s := range p.Stages {
		out = append(out, [2]int{s.First, s.Last})
	}
	return out
}

// String is the plan as a short table.
func (p *Plan) String() string {
	var b strings.Builder
	for i, s := range p.Stages {
		fmt.Fprintf(&b, "stage %d: %-16s layers [%d, %d)  %s\n", i+1, s.Member.String(), s.First, s.Last, GiB(s.Bytes))
		if i < len(p.Boundaries) {
			bd := p.Boundaries[i]
			enc := bd.Encoding.String()
			fmt.Fprintf(&b, "   └─ %s over %s\n", enc, bd.Link)
		}
	}
	fmt.Fprintf(&b, "predicted: %s\n", p.Predicted)
	return b.String()
}

// Defaults.
const (
	defaultSessions = 4
	defaultOverhead = 64 << 20
	defaultTokens   = 128
	// messageOverhead is a frame header and a TLS record's framing.
	messageOverhead = wire.HeaderSize + 22 + 8
	// exactnessMargin: a lossier encoding must save at least this fraction
	// of the request's predicted time to be chosen over a more exact one.
	exactnessMargin = 0.01
	maxSearched     = 8 // members considered; more are pre-filtered by capacity
)

// withDefaults validates r and fills defaults.
func (r Request) withDefaults() (Request, error) {
	if r.Sessions <= 0 {
		r.Sessions = defaultSessions
	}
	if r.Overhead <= 0 {
		r.Overhead = defaultOverhead
	}
	if r.Prompt <= 0 {
		r.Prompt = defaultTokens
	}
	if r.Generate <= 0 {
		r.Generate = defaultTokens
	}
	if len(r.Encodings) == 0 {
		r.Encodings = []wire.EncodingID{wire.EncodingF32, wire.EncodingF16, wire.EncodingQ8, wire.EncodingQ5, wire.EncodingQ4, wire.EncodingLowRank}
	}
	if !(r.MaxKL >= 0) || math.IsInf(r.MaxKL, 0) {
		return r, fmt.Errorf("--max-kl %v: want a finite number >= 0", r.MaxKL)
	}
	if err := r.Shape.Config.Validate(); err != nil {
		return r, err
	}
	if r.Shape.LayerBytes <= 0 {
		return r, errors.New("model shape has no layer size")
	}
	if len(r.Members) == 0 {
		return r, errors.New("the pool has no members")
	}
	names := map[string]bool{HeadName: true}
	for i := range r.Members {
		m := &r.Members[i]
		if err := m.Validate(); err != nil {
			return r, err
		}
		if names[m.String()] {
			return r, fmt.Errorf("two members are named %q (or one is named %q)", m.String(), HeadName)
		}
		names[m.String()] = true
	}
	return r, nil
}

// stageBytes is the memory a stage holding n layers needs.
func (r *Request) stageBytes(n int, first, last bool) int64 {
	perLayer := r.Shape.LayerBytes + int64(r.Sessions)*r.Shape.KVBytesPerLayer()
	b := int64(n)*perLayer + r.Overhead
	if first {
		b += r.Shape.EmbedBytes
	}
	if last {
		b += r.Shape.HeadBytes
	}
	return b
}

// capacity is how many layers m can hold in the given role.
func (r *Request) capacity(m *Member, first, last bool) int {
	free := m.Free - r.stageBytes(0, first, last)
	if free <= 0 {
		return 0
	}
	perLayer := r.Shape.LayerBytes + int64(r.Sessions)*r.Shape.KVBytesPerLayer()
	return int(min(free/perLayer, int64(r.Shape.Config.NLayers)))
}

// MakePlan chooses the best chain for r.
func MakePlan(r Request) (*Plan, error) {
	r, err := r.withDefaults()
	if err != nil {
		return nil, err
	}
	members := candidates(&r)
	s := &search{r: &r, members: members, bestWith: map[string]*Plan{}}
	s.walk(nil, make([]bool, len(members)))
	if s.best == nil {
		if s.linkErr != nil {
			return nil, s.linkErr
		}
		return nil, shortfall(&r)
	}
	s.explain()
	return s.best, nil
}

// candidates limits the search to the maxSearched members with the most
// memory (the search is over ordered subsets).
func candidates(r *Request) []Member {
	ms := slices.Clone(r.Members)
	if len(ms) > maxSearched {
		slices.SortStableFunc(ms, func(a, b Member) int { return int(b.Free>>20) - int(a.Free>>20) })
		ms = ms[:maxSearched]
	}
	return ms
}

type search struct {
	r        *Request
	members  []Member
	best     *Plan
	bestWith map[string]*Plan // the best plan that uses each member
	linkErr  error
}

// walk tries every ordered subset of the members.
func (s *search) walk(order []int, used []bool) {
	if len(order) > 0 {
		s.try(order)
	}
	if len(order) == len(s.members) || len(order) == s.r.Shape.Config.NLayers {
		return
	}
	for i := range s.members {
		if used[i] {
			continue
		}
		used[i] = true
		s.walk(append(order, i), used)
		used[i] = false
	}
}

func (s *search) try(order []int) {
	var ms []Member
	for _, i := range order {
		ms = append(ms, s.members[i])
	}
	ranges, ok := s.r.allocate(ms)
	if !ok {
		return
	}
	p, err := s.r.build(ms, ranges, true)
	if err != nil {
		if s.linkErr == nil {
			s.linkErr = err
		}
		return
	}
	if better(p, s.best, s.r) {
		s.best = p
	}
	for _, st := range p.Stages {
		if b := s.bestWith[st.Member.String()]; better(p, b, s.r) {
			s.bestWith[st.Member.String()] = p
		}
	}
}

// requestTime is the predicted time of the reference request.
func requestTime(p Prediction, r *Request) float64 {
	return p.Prompt.Seconds() + float64(r.Generate)*p.Step.Seconds()
}

// better: shorter reference request; on a tie, fewer stages.
func better(p, than *Plan, r *Request) bool {
	if than == nil {
		return true
	}
	a, b := requestTime(p.Predicted, r), requestTime(than.Predicted, r)
	if a != b {
		return a < b
	}
	return len(p.Stages) < len(than.Stages)
}

// allocate gives each member in order at least one layer and the rest to
// the members with the cheapest per-layer time, within their capacities.
func (r *Request) allocate(ms []Member) ([][2]int, bool) {
	L := r.Shape.Config.NLayers
	k := len(ms)
	counts := make([]int, k)
	caps := make([]int, k)
	total := 0
	for i := range ms {
		caps[i] = r.capacity(&ms[i], i == 0, i == k-1)
		if caps[i] < 1 {
			return nil, false
		}
		counts[i] = 1
		total += caps[i]
	}
	if total < L {
		return nil, false
	}
	// One layer at a time to the cheapest member with room; members whose
	// costs are within 2% of each other count as equally fast (probes are
	// noisy), and among those the one with the most room left is filled,
	// so equal machines get balanced shares.
	bucket := func(i int) int {
		c := float64(r.Generate)*ms[i].Speed.DecodeLayer.Seconds() + float64(r.Prompt)*ms[i].Speed.PrefillLayer.Seconds()
		return int(math.Floor(math.Log(c) / math.Log(1.02)))
	}
	for left := L - k; left > 0; left-- {
		best := -1
		for i := range ms {
			if counts[i] >= caps[i] {
				continue
			}
			if best < 0 || bucket(i) < bucket(best) ||
				(bucket(i) == bucket(best) && float64(counts[i])/float64(caps[i]) < float64(counts[best])/float64(caps[best])) {
				best = i
			}
		}
		counts[best]++
	}
	out := make([][2]int, k)
	next := 0
	for i, n := range counts {
		out[i] = [2]int{next, next + n}
		next += n
	}
	return out, true
}

// build makes the plan for members ms holding ranges; with choose, each
// boundary's encoding is chosen, else every boundary is f32.
func (r *Request) build(ms []Member, ranges [][2]int, choose bool) (*Plan, error) {
	p := &Plan{}
	k := len(ms)
	for i, m := range ms {
		a, b := ranges[i][0], ranges[i][1]
		p.Stages = append(p.Stages, Stage{Member: m, First: a, Last: b, Bytes: r.stageBytes(b-a, i == 0, i == k-1)})
	}
	for i := 0; i+1 < k; i++ {
		l, err := r.Links.Get(ms[i].String(), ms[i+1].String())
		if err != nil {
			return nil, err
		}
		p.Boundaries = append(p.Boundaries, Boundary{Layer: ranges[i+1][0], From: ms[i].String(), To: ms[i+1].String(), Encoding: wire.EncodingF32, Link: l})
	}
	if _, err := r.Links.Get(HeadName, ms[0].String()); err != nil {
		return nil, err
	}
	if _, err := r.Links.Get(ms[k-1].String(), HeadName); err != nil {
		return nil, err
	}
	if choose {
		r.chooseEncodings(p)
	}
	p.Predicted = r.predict(p)
	return p, nil
}

// option is an encoding usable at a boundary.
type option struct {
	enc   wire.EncodingID
	codec uint32
	kl    float64
	bytes func(tokens int) int
	// step and prefill are the encoding's own compute, in seconds per
	// token, on both sides of the hop: one decode step, and per token of a
	// batched prompt (a learned codec's measured encode and decode; 0 for the
	// others).
	step, prefill float64
}

// codecCompute is a codec's compute on a hop, in seconds per token: the
// encode on the sender plus the decode on the receiver, as measured on the
// head (CodecInfo), for a decode step and per token of a prompt.
func codecCompute(ci CodecInfo) (step, prefill float64) {
	return (ci.EncodeStep + ci.DecodeStep).Seconds(), (ci.EncodePrefill + ci.DecodePrefill).Seconds()
}

// options lists the encodings usable at boundary b (into stage to), most
// exact first: f32 always, others when the receiver decodes them and their
// measured KL there is within the budget.
func (r *Request) options(b int, to *Member, from *Member) []option {
	dim := r.Shape.Config.Dim
	var out []option
	for _, id := range r.Encodings {
		if id != wire.EncodingF32 && !hasEncoding(to.Encodings, id) {
			continue
		}
		if id == wire.EncodingLowRank {
			ci, ok := r.Codecs[b]
			if !ok || ci.BytesPerToken <= 0 {
				continue
			}
			dt, okTo := to.codecAt(b)
			df, okFrom := from.codecAt(b)
			if !okTo || !okFrom || dt != ci.Digest || df != ci.Digest || ci.KL > r.MaxKL {
				continue
			}
			per := ci.BytesPerToken
			step, prefill := codecCompute(ci)
			out = append(out, option{enc: id, codec: ci.Digest.ID, kl: ci.KL, bytes: func(t int) int { return t * per }, step: step, prefill: prefill})
			continue
		}
		kl := 0.0
		if id != wire.EncodingF32 {
			v, ok := r.KL[b][id]
			if !ok || !(v <= r.MaxKL) {
				continue
			}
			kl = v
		}
		e, err := wire.Default.Lookup(id, 0)
		if err != nil {
			continue
		}
		out = append(out, option{enc: id, kl: kl, bytes: func(t int) int {
			n, err := e.PayloadSize(t, dim)
			if err != nil {
				return math.MaxInt32
			}
			return n
		}})
	}
	slices.SortStableFunc(out, func(a, b option) int {
		switch {
		case a.kl < b.kl:
			return -1
		case a.kl > b.kl:
			return 1
		}
		return 0
	})
	return out
}

// hopCost is the time a boundary's hops take over the reference request,
// the encoding's own compute included.
func (r *Request) hopCost(l Link, o option) float64 {
	return float64(r.Generate)*(l.transfer(o.bytes(1)+messageOverhead)+o.step) +
		l.transfer(o.bytes(r.Prompt)+messageOverhead) + float64(r.Prompt)*o.prefill
}

// chooseEncodings picks each boundary's encoding: the fastest within the
// budget, unless a more exact one is within exactnessMargin of the
// request's time.
func (r *Request) chooseEncodings(p *Plan) {
	// First pass: fastest everywhere, to know the request's time.
	pick := make([]option, len(p.Boundaries))
	opts := make([][]option, len(p.Boundaries))
	for i := range p.Boundaries {
		opts[i] = r.options(p.Boundaries[i].Layer, &p.Stages[i+1].Member, &p.Stages[i].Member)
		pick[i] = opts[i][0]
		for _, o := range opts[i] {
			if r.hopCost(p.Boundaries[i].Link, o) < r.hopCost(p.Boundaries[i].Link, pick[i]) {
				pick[i] = o
			}
		}
		setEncoding(&p.Boundaries[i], pick[i])
	}
	total := requestTime(r.predict(p), r)
	for i := range p.Boundaries {
		fast := r.hopCost(p.Boundaries[i].Link, pick[i])
		for _, o := range opts[i] { // most exact first
			if r.hopCost(p.Boundaries[i].Link, o)-fast <= exactnessMargin*total {
				setEncoding(&p.Boundaries[i], o)
				break
			}
		}
	}
}

func setEncoding(b *Boundary, o option) {
	b.Encoding, b.Codec, b.KL = o.enc, o.codec, o.kl
}

// predict computes a plan's speed from the members' speeds and the links.
func (r *Request) predict(p *Plan) Prediction {
	dim, vocab := r.Shape.Config.Dim, r.Shape.Config.VocabSize
	P := r.Prompt
	var step, prompt float64
	for _, s := range p.Stages {
		n := float64(s.Last - s.First)
		step += n * s.Member.Speed.DecodeLayer.Seconds()
		prompt += n * float64(P) * s.Member.Speed.PrefillLayer.Seconds()
	}
	last := p.Stages[len(p.Stages)-1].Member
	step += last.Speed.Head.Seconds()
	prompt += last.Speed.Head.Seconds()
	// Token ids in, to the first stage.
	in, _ := r.Links.Get(HeadName, p.Stages[0].Member.String())
	step += in.transfer(4 + messageOverhead)
	prompt += in.transfer(4*P + messageOverhead)
	for _, b := range p.Boundaries {
		o := r.optionFor(b, dim)
		step += b.Link.transfer(o.bytes(1)+messageOverhead) + o.step
		prompt += b.Link.transfer(o.bytes(P)+messageOverhead) + float64(P)*o.prefill
	}
	// The result back to the head: logits of one position, or one id.
	out, _ := r.Links.Get(last.String(), HeadName)
	result := 4
	if r.Logits {
		result = 4 * vocab
	}
	step += out.transfer(result + messageOverhead)
	prompt += out.transfer(result + messageOverhead)
	return Prediction{Decode: 1 / step, Prefill: float64(P) / prompt,
		Step: time.Duration(step * 1e9), Prompt: time.Duration(prompt * 1e9)}
}

// optionFor is the option a boundary's chosen encoding stands for.
func (r *Request) optionFor(b Boundary, dim int) option {
	if b.Encoding == wire.EncodingLowRank {
		ci := r.Codecs[b.Layer]
		per := ci.BytesPerToken
		step, prefill := codecCompute(ci)
		return option{enc: b.Encoding, codec: b.Codec, kl: b.KL, bytes: func(t int) int { return t * per }, step: step, prefill: prefill}
	}
	e, err := wire.Default.Lookup(b.Encoding, 0)
	if err != nil {
		e, _ = wire.Default.Lookup(wire.EncodingF32, 0)
	}
	return option{enc: b.Encoding, kl: b.KL, bytes: func(t int) int {
		n, err := e.PayloadSize(t, dim)
		if err != nil {
			return math.MaxInt32
		}
		return n
	}}
}

// shortfall explains why no plan fits.
func shortfall(r *Request) error {
	L := r.Shape.Config.NLayers
	perLayer := r.Shape.LayerBytes + int64(r.Sessions)*r.Shape.KVBytesPerLayer()
	k := min(len(r.Members), L)
	need := int64(L)*perLayer + r.Shape.EmbedBytes + r.Shape.HeadBytes + int64(k)*r.Overhead
	var have int64
	var parts []string
	for i := range r.Members {
		m := &r.Members[i]
		have += m.Free
		parts = append(parts, fmt.Sprintf("%s %s", m, GiB(m.Free)))
	}
	detail := fmt.Sprintf("%d layers x %s (weights %s + KV for %d sessions %s) + embedding %s + classifier %s + %s overhead per stage",
		L, GiB(perLayer), GiB(r.Shape.LayerBytes), r.Sessions, GiB(int64(r.Sessions)*r.Shape.KVBytesPerLayer()),
		GiB(r.Shape.EmbedBytes), GiB(r.Shape.HeadBytes), GiB(r.Overhead))
	if need > have {
		return fmt.Errorf("the model does not fit in the pool: short by %s; it needs %s (%s), the pool offers %s (%s); add a member or lower --sessions",
			GiB(need-have), GiB(need), detail, GiB(have), strings.Join(parts, ", "))
	}
	// Enough bytes, but not as whole layers: say how many layers the best
	// arrangement holds.
	n, first, last := maxLayers(r)
	if n == 0 {
		return fmt.Errorf("the model does not fit in the pool as whole layers: no member has room for the embedding (%s) or the classifier (%s) with one layer and %s overhead; the pool offers %s (%s); add a bigger member or lower --sessions",
			GiB(r.Shape.EmbedBytes), GiB(r.Shape.HeadBytes), GiB(r.Overhead), GiB(have), strings.Join(parts, ", "))
	}
	return fmt.Errorf("the model does not fit in the pool as whole layers: short by %d layers (%s); the best arrangement (first %s, last %s) holds %d of its %d layers of %s each (weights %s + KV for %d sessions %s); the pool offers %s (%s) but each member's remainder is less than a layer; add a member or lower --sessions",
		L-n, GiB(int64(L-n)*perLayer), first, last, n, L, GiB(perLayer), GiB(r.Shape.LayerBytes), r.Sessions,
		GiB(int64(r.Sessions)*r.Shape.KVBytesPerLayer()), GiB(have), strings.Join(parts, ", "))
}

// maxLayers is the most layers the members can hold as whole layers: a
// first stage (with the embedding), a last one (with the classifier), and
// every other member in the middle; 0 when no member can be first or last.
func maxLayers(r *Request) (n int, first, last string) {
	ms := r.Members
	for i := range ms { // one member, first and last
		if c := r.capacity(&ms[i], true, true); c > n {
			n, first, last = c, ms[i].String(), ms[i].String()
		}
	}
	for f := range ms {
		cf := r.capacity(&ms[f], true, false)
		if cf < 1 {
			continue
		}
		for l := range ms {
			cl := r.capacity(&ms[l], false, true)
			if l == f || cl < 1 {
				continue
			}
			total := cf + cl
			for i := range ms {
				if i != f && i != l {
					total += r.capacity(&ms[i], false, false)
				}
			}
			if total > n {
				n, first, last = total, ms[f].String(), ms[l].String()
			}
		}
	}
	return n, first, last
}

// StageBytes is the memory a stage holding layers [first, last) of r's
// shape needs, with r's sessions and overhead (their defaults when unset):
// what a pool member must offer to take over such a stage.
func (r Request) StageBytes(first, last int) int64 {
	if r.Sessions <= 0 {
		r.Sessions = defaultSessions
	}
	if r.Overhead <= 0 {
		r.Overhead = defaultOverhead
	}
	return r.stageBytes(last-first, first == 0, last == r.Shape.Config.NLayers)
}
