package model

import (
	"fmt"
	"math"
	"runtime"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/tensor"
)

// Model runs the forward pass over the weights it holds. It is safe for
// concurrent use by many sessions, each with its own State.
type Model struct {
	W *Weights
	// rope holds cos/sin per (position, rotated pair), computed once in
	// float64 and rounded, so every stage computes identical rotations.
	ropeCos, ropeSin []float32
	// Norm weights and biases viewed as f32 once, not per token; per layer,
	// nil when the layer is not held or the config has no such tensor.
	attnNorm, ffnNorm [][]float32
	bq, bk, bv        [][]float32
	qNorm, kNorm      [][]float32
	finalNorm         []float32
}

// New prepares a model for the forward pass. The weights must be valid.
func New(w *Weights) (*Model, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	n := w.Config.NLayers
	m := &Model{W: w, attnNorm: make([][]float32, n), ffnNorm: make([][]float32, n),
		bq: make([][]float32, n), bk: make([][]float32, n), bv: make([][]float32, n),
		qNorm: make([][]float32, n), kNorm: make([][]float32, n)}
	c := &w.Config
	for l := w.First; l < w.Last; l++ {
		L := &w.Layers[l]
		m.attnNorm[l] = tensor.AsF32(L.AttnNorm.Data)
		m.ffnNorm[l] = tensor.AsF32(L.FFNNorm.Data)
		if c.QKVBias {
			m.bq[l], m.bk[l], m.bv[l] = tensor.AsF32(L.Bq.Data), tensor.AsF32(L.Bk.Data), tensor.AsF32(L.Bv.Data)
		}
		if c.QKNorm {
			m.qNorm[l], m.kNorm[l] = tensor.AsF32(L.QNorm.Data), tensor.AsF32(L.KNorm.Data)
		}
	}
	if w.HasHead() {
		m.finalNorm = tensor.AsF32(w.FinalNorm.Data)
	}
	var factors []float32
	if c.RopeFreqs {
		factors = tensor.AsF32(w.Layers[w.First].RopeFreqs.Data)
	}
	m.ropeCos, m.ropeSin = RopeTable(c, factors)
	return m, nil
}

// Config returns the model configuration.
func (m *Model) Config() *Config { return &m.W.Config }

// State is one session's KV cache for a layer range, in blocks taken as
// positions fill (kv.go), plus scratch for the batches it runs alone.
type State struct {
	First, Last int
	next        int // positions [0, next) are cached
	kv          kvCache
	scratch     Scratch
	one         [1]Item // LayersBatch's item: a slice of it allocates nothing
}

// NewState makes the KV cache of layers [first, last), unbounded: its
// blocks are counted by no pool.
func (m *Model) NewState(first, last int) (*State, error) { return m.NewStateIn(first, last, nil) }

// NewStateIn makes the KV cache of layers [first, last), taking its blocks
// from pool (nil: unbounded, blocks of DefaultKVBlock positions). Nothing
// is allocated until positions are computed.
func (m *Model) NewStateIn(first, last int, pool *KVPool) (*State, error) {
	c := &m.W.Config
	if first < m.W.First || last > m.W.Last || first >= last {
		return nil, fmt.Errorf("layer range [%d, %d) is not within the held layers [%d, %d)", first, last, m.W.First, m.W.Last)
	}
	block, f16 := DefaultKVBlock, false
	if pool != nil {
		block, f16 = pool.Block(), pool.F16()
	}
	kv, err := newKVCache(pool, last-first, block, c.KVDim(), c.HeadDim(), f16)
	if err != nil {
		return nil, err
	}
	s := &State{First: first, Last: last, kv: kv}
	// A state dropped without Release gives its blocks back when collected.
	runtime.AddCleanup(s, func(m *kvMem) { m.freeAll() }, kv.kvMem)
	return s, nil
}

// Reset forgets every cached position, keeping the blocks for reuse.
func (s *State) Reset() { s.next = 0 }

// Release forgets every cached position and gives the blocks back to the
// pool; the state stays usable and takes blocks again as it fills.
func (s *State) Release() {
	s.next = 0
	s.kv.release()
}

// Reserve takes the KV blocks that positions [0, end) need from the pool
// now, so that a batch holding this state cannot fail for the budget. It
// fails with ErrKVBudget, taking nothing, when the pool has no room.
func (s *State) Reserve(end int) error { return s.kv.ensure(end) }

// Next is the first position not yet cached: the position of the next token.
func (s *State) Next() int { return s.next }

// KVBytes is the bytes of KV cache blocks the state holds now.
func (s *State) KVBytes() int64 { return s.kv.bytes() }

// Scratch holds the buffers of a batch's forward pass, sized for the
// largest batch run so far. One Scratch serves one batch at a time.
type Scratch struct {
	x, xb, xb2 []float32 // batch x Dim (x: the batch's hidden states, gathered)
	q, ao      []float32 // batch x QDim: queries, attention output
	kb, vb     []float32 // batch x KVDim: new keys and values, before caching
	hb, hb2    []float32 // batch x HiddenDim
	att        []float32 // attention scores: per worker, the positions of a token
	owner, pos []int32   // per token of the batch: its item, its position
	wide       []float32 // per worker, one block of one head's f16 rows widened

	// attn is the call attentionBatch's groups read, and attnGroup
	// runAttnGroup bound to attnFor, made once (again if the Scratch was
	// copied): a closure per call escaped to the heap, an allocation per
	// layer of every decode step.
	attn      attnCall
	attnGroup func(worker, g int)
	attnFor   *Scratch
}

// attnCall is one attentionBatch call, for its groups (Scratch.runAttnGroup).
type attnCall struct {
	m          *Model
	items      []Item
	l          int
	q, out     []float32
	span, wide int // the most positions a token attends to; one f16 block's values
	per, total int // (token, head) items per group, and in all
}

func (sc *Scratch) ensure(n int, c *Config) {
	if len(sc.xb) >= n*c.Dim {
		return
	}
	sc.x, sc.xb, sc.xb2 = make([]float32, n*c.Dim), make([]float32, n*c.Dim), make([]float32, n*c.Dim)
	sc.q, sc.ao = make([]float32, n*c.QDim()), make([]float32, n*c.QDim())
	sc.kb, sc.vb = make([]float32, n*c.KVDim()), make([]float32, n*c.KVDim())
	sc.hb, sc.hb2 = make([]float32, n*c.HiddenDim), make([]float32, n*c.HiddenDim)
}

// Embed writes the embedding of token into x (length Dim).
func (m *Model) Embed(token int, x []float32) error {
	if !m.W.HasEmbedding() {
		return fmt.Errorf("this model part holds layers [%d, %d) and no token embedding", m.W.First, m.W.Last)
	}
	if token < 0 || token >= m.W.Config.VocabSize {
		return fmt.Errorf("token id %d is outside the vocabulary of %d", token, m.W.Config.VocabSize)
	}
	kernels.DequantRow(x, &m.W.Embedding, token)
	return nil
}

// Layers runs the state's layers on the hidden state x of the token at
// position pos, in place, caching its keys and values.
func (m *Model) Layers(s *State, x []float32, pos int) error {
	return m.LayersBatch(s, x, pos, 1)
}

// LayersBatch runs the state's layers on the hidden states of n consecutive
// tokens (x is n x Dim, updated in place) at positions pos .. pos+n-1. The
// result is bit-identical to n calls of Layers (which is this with n = 1);
// batching only lets each weight matrix be streamed once for all n tokens.
func (m *Model) LayersBatch(s *State, x []float32, pos, n int) error {
	s.one[0] = Item{State: s, X: x, Pos: pos, N: n}
	err := m.LayersMulti(&s.scratch, s.one[:])
	s.one[0] = Item{}
	return err
}

// Item is one session's part of a batch: n consecutive tokens at positions
// Pos .. Pos+N-1, their hidden states X (N x Dim, updated in place).
type Item struct {
	State  *State
	X      []float32
	Pos, N int
}

// LayersMulti runs the layers of many sessions' tokens as one batch: each
// weight matrix is streamed once for all of them, and each token attends
// over its own session's cache. Every session's result is bit-identical to
// running its item alone (LayersBatch): the kernels compute each token's
// products the same way wherever it sits in a batch, and attention never
// mixes sessions. The items' states must hold the same layers and be
// distinct. Every item is checked, and the KV blocks of all are taken,
// before anything is computed: an error changes no state.
func (m *Model) LayersMulti(sc *Scratch, items []Item) error {
	c := &m.W.Config
	total := 0
	for i, it := range items {
		if err := m.checkItem(&it, items[0].State); err != nil {
			return fmt.Errorf("batch item %d: %w", i, err)
		}
		for _, other := range items[:i] {
			if other.State == it.State {
				return fmt.Errorf("batch item %d: its session is in the batch twice", i)
			}
		}
		total += it.N
	}
	if total == 0 {
		return nil
	}
	for i, it := range items {
		if err := it.State.kv.ensure(it.Pos + it.N); err != nil {
			for _, done := range items[:i] {
				done.State.kv.shrink(done.State.next)
			}
			return err
		}
	}
	sc.ensure(total, c)
	sc.owner, sc.pos = sc.owner[:0], sc.pos[:0]
	for i, it := range items {
		for p := it.Pos; p < it.Pos+it.N; p++ {
			sc.owner, sc.pos = append(sc.owner, int32(i)), append(sc.pos, int32(p))
		}
	}
	x := gather(sc, items, c.Dim)
	for l := items[0].State.First; l < items[0].State.Last; l++ {
		m.layer(sc, items, l, x, total)
	}
	scatter(x, items, c.Dim)
	for _, it := range items {
		it.State.next = it.Pos + it.N
	}
	return nil
}

func (m *Model) checkItem(it *Item, first *State) error {
	c := &m.W.Config
	s := it.State
	if s == nil || s.First != first.First || s.Last != first.Last {
		return fmt.Errorf("state for another layer range than the batch's [%d, %d)", first.First, first.Last)
	}
	if it.N < 1 || it.Pos < 0 || it.Pos+it.N > c.SeqLen {
		return fmt.Errorf("positions [%d, %d) are outside the context of %d", it.Pos, it.Pos+it.N, c.SeqLen)
	}
	if len(it.X) != it.N*c.Dim {
		return fmt.Errorf("hidden states hold %d values, %d tokens of width %d need %d", len(it.X), it.N, c.Dim, it.N*c.Dim)
	}
	// Attention reads positions [0, pos]: all of them must have been computed
	// in this session. Rewinding (pos < next) is allowed and drops the rest.
	if it.Pos > s.next {
		return fmt.Errorf("position %d skips ahead: only positions [0, %d) are cached", it.Pos, s.next)
	}
	return nil
}

// gather is the batch's hidden states, contiguous: one item's own buffer
// when it is alone, else copies in sc.x.
func gather(sc *Scratch, items []Item, dim int) []float32 {
	if len(items) == 1 {
		return items[0].X
	}
	off := 0
	for _, it := range items {
		off += copy(sc.x[off:], it.X)
	}
	return sc.x[:off]
}

func scatter(x []float32, items []Item, dim int) {
	if len(items) == 1 {
		return
	}
	off := 0
	for _, it := range items {
		off += copy(it.X, x[off:off+it.N*dim])
	}
}

func (m *Model) layer(sc *Scratch, items []Item, l int, x []float32, n int) {
	c := &m.W.Config
	w := &m.W.Layers[l]
	d, qDim, kvDim := c.Dim, c.QDim(), c.KVDim()
	xb, xb2, q, ao := sc.xb[:n*d], sc.xb2[:n*d], sc.q[:n*qDim], sc.ao[:n*qDim]
	keys, vals := sc.kb[:n*kvDim], sc.vb[:n*kvDim]
	hb, hb2 := sc.hb[:n*c.HiddenDim], sc.hb2[:n*c.HiddenDim]

	m.perToken(sc, items, l, x, n, attnNormPart)
	m.prefetchStores(sc, items, l, n)
	// One parallel region for the three projections of the same input.
	kernels.MatMuls([]kernels.Product{{Out: q, W: &w.Wq}, {Out: keys, W: &w.Wk}, {Out: vals, W: &w.Wv}}, xb, n)
	m.perToken(sc, items, l, x, n, ropeStorePart)
	m.attentionBatch(sc, items, l, q, ao, n)
	kernels.MatMul(xb2, &w.Wo, ao, n)
	kernels.Axpy(x, 1, xb2)

	m.perToken(sc, items, l, x, n, ffnNormPart)
	kernels.MatMuls([]kernels.Product{{Out: hb, W: &w.W1}, {Out: hb2, W: &w.W3}}, xb, n)
	m.perToken(sc, items, l, x, n, swigluPart)
	kernels.MatMul(xb2, &w.W2, hb, n)
	kernels.Axpy(x, 1, xb2)
}

// prefetchStores asks, before a decode step's query, key and value
// products, for the cache rows its keys and values will be stored in, so
// that the lines arrive while the products run rather than when the stores
// wait for them: a stories110M layer's stores took 1.4-1.7 µs without it
// and 0.7 with it (2026-12-05, docs/performance.md). Only for up to
// prefetchStoresMax tokens: a prompt's rows would crowd the weights the
// products stream through the cache.
func (m *Model) prefetchStores(sc *Scratch, items []Item, l, n int) {
	if n > prefetchStoresMax {
		return
	}
	for t := range n {
		s := items[sc.owner[t]].State
		s.kv.prefetchRows(l-s.First, int(sc.pos[t]))
	}
}

// prefetchStoresMax is the most tokens of a step prefetchStores asks for:
// 16 positions' rows of a stories110M layer are 96 KiB.
const prefetchStoresMax = 16

// tokenPart names a layer's per-token work between its products.
type tokenPart int

const (
	attnNormPart  tokenPart = iota // the attention norm, x into xb
	ropeStorePart                  // biases, q/k norms, RoPE, and the cache stores
	ffnNormPart                    // the feed-forward norm, x into xb
	swigluPart                     // SwiGLU of hb and hb2
)

// tokens does part of layer l for tokens [t0, t1) of the batch, in the
// scratch buffers layer uses.
func (m *Model) tokens(sc *Scratch, items []Item, l int, x []float32, part tokenPart, t0, t1 int) {
	c := &m.W.Config
	d, qDim, kvDim, h := c.Dim, c.QDim(), c.KVDim(), c.HiddenDim
	switch part {
	case attnNormPart, ffnNormPart:
		norm := m.attnNorm[l]
		if part == ffnNormPart {
			norm = m.ffnNorm[l]
		}
		for t := t0; t < t1; t++ {
			kernels.RMSNorm(sc.xb[t*d:(t+1)*d], x[t*d:(t+1)*d], norm, c.NormEps)
		}
	case ropeStorePart:
		for t := t0; t < t1; t++ {
			qt, kt, vt := sc.q[t*qDim:(t+1)*qDim], sc.kb[t*kvDim:(t+1)*kvDim], sc.vb[t*kvDim:(t+1)*kvDim]
			if c.QKVBias {
				kernels.Axpy(qt, 1, m.bq[l])
				kernels.Axpy(kt, 1, m.bk[l])
				kernels.Axpy(vt, 1, m.bv[l])
			}
			if c.QKNorm {
				m.normHeads(qt, m.qNorm[l])
				m.normHeads(kt, m.kNorm[l])
			}
			s, p := items[sc.owner[t]].State, int(sc.pos[t])
			m.rope(qt, p)
			m.rope(kt, p)
			s.kv.store(l-s.First, p, kt, vt)
		}
	case swigluPart:
		kernels.SwiGLU(sc.hb[t0*h:t1*h], sc.hb2[t0*h:t1*h])
	}
}

// perTokenMin is the fewest tokens for which a layer's per-token work
// between its products (norms, RoPE and the cache stores, SwiGLU) is
// spread over the threads: with one thread doing it, the other waited
// through about a tenth of a batched step (a profile of 16 q8_0 streams,
// 2026-12-04). Below it the dispatch costs about what the second thread
// would save.
const perTokenMin = 8

// perToken does part of layer l for the batch's n tokens: on the caller
// alone for few tokens, else over the kernels' threads in consecutive
// ranges. Every token's values are computed alone, so the split changes
// no bit. The part is named rather than passed as a closure so that a
// decode token, which never splits, allocates nothing here.
func (m *Model) perToken(sc *Scratch, items []Item, l int, x []float32, n int, part tokenPart) {
	threads := kernels.Threads()
	if n < perTokenMin || threads == 1 {
		m.tokens(sc, items, l, x, part, 0, n)
		return
	}
	parts := min(threads, n)
	kernels.Parallel(parts, parts, func(_, i int) { m.tokens(sc, items, l, x, part, i*n/parts, (i+1)*n/parts) })
}

// normHeads RMS-normalises every head of v (all tokens' heads side by side,
// head_dim values each) in place, with one weight vector shared by all heads
// (Qwen 3's q_norm and k_norm).
func (m *Model) normHeads(v, weight []float32) {
	hd := len(weight)
	for h := 0; h+hd <= len(v); h += hd {
		kernels.RMSNorm(v[h:h+hd], v[h:h+hd], weight, m.W.Config.NormEps)
	}
}

// attentionBatch computes attention for the batch's n tokens (queries q,
// n x QDim) into out, every (token, head) pair a separate item spread over
// the kernels' threads. Causal: a token at position p attends to its own
// session's positions up to p, all cached by now. Each head's arithmetic is
// the same whichever thread runs it, so the result does not depend on the
// thread count.
func (m *Model) attentionBatch(sc *Scratch, items []Item, l int, q, out []float32, n int) {
	c := &m.W.Config
	heads := c.NHeads
	span := 0 // the most positions one token attends to
	for _, it := range items {
		span = max(span, it.Pos+it.N)
	}
	workers := kernels.Threads()
	if len(sc.att) < workers*span {
		sc.att = make([]float32, workers*span)
	}
	wide := items[0].State.kv.block * c.HeadDim()
	if items[0].State.kv.half && len(sc.wide) < workers*wide {
		sc.wide = make([]float32, workers*wide)
	}
	total := n * heads
	groups := min(total, workers*attnGroupsPerWorker(n))
	per := (total + groups - 1) / groups
	groups = (total + per - 1) / per
	if sc.attnFor != sc {
		sc.attnGroup, sc.attnFor = sc.runAttnGroup, sc
	}
	sc.attn = attnCall{m: m, items: items, l: l, q: q, out: out, span: span, wide: wide, per: per, total: total}
	kernels.Parallel(groups, workers, sc.attnGroup)
	sc.attn = attnCall{} // no references kept past the call
}

// runAttnGroup computes group g of the (token, head) items of sc.attn on
// worker's scratch.
func (sc *Scratch) runAttnGroup(worker, g int) {
	a := &sc.attn
	c := &a.m.W.Config
	qDim, heads := c.QDim(), c.NHeads
	att := sc.att[worker*a.span : (worker+1)*a.span]
	for i := g * a.per; i < min((g+1)*a.per, a.total); i++ {
		t, h := i/heads, i%heads
		st := a.items[sc.owner[t]].State
		var w []float32
		if st.kv.half {
			w = sc.wide[worker*a.wide : (worker+1)*a.wide]
		}
		a.m.attendHead(st, a.l, h, a.q[t*qDim:(t+1)*qDim], a.out[t*qDim:(t+1)*qDim], int(sc.pos[t]), att, w)
	}
}

// attendHead computes grouped-query attention of head h of query q (one
// token, all heads) over cached positions 0..pos of layer l, writing the
// head's output into its part of out. att is scratch of at least pos+1.
// The cache is read block by block, in position order: the scores are one
// dot product per position, and the weighted sum adds the positions' values
// in order, so the blocks' size does not change a bit of the result. An f16
// cache is widened a block at a time into wide (block x head_dim), exactly,
// so it equals an f32 cache whose values were rounded to f16.
func (m *Model) attendHead(s *State, l, h int, q, out []float32, pos int, att, wide []float32) {
	c := &m.W.Config
	hd := c.HeadDim()
	group := c.NHeads / c.NKVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	kvh := h / group
	li := l - s.First
	lo, hi := s.kv.headRows(kvh)
	// rows returns block b's rows of this head's keys (or values), n of
	// them, contiguous (kv.go).
	rows := func(vals bool, b, n int) []float32 {
		if s.kv.half {
			blocks := s.kv.hkeys[li]
			if vals {
				blocks = s.kv.hvals[li]
			}
			s.kv.widen(wide, blocks[b], kvh, n)
			return wide
		}
		if vals {
			return s.kv.vals[li][b][lo:hi]
		}
		return s.kv.keys[li][b][lo:hi]
	}
	block := s.kv.block
	att = att[:pos+1]
	qh := q[h*hd : (h+1)*hd]
	for b, p := 0, 0; p <= pos; b, p = b+1, p+block {
		n := min(block, pos+1-p)
		// A head's rows of one block are a short run the hardware
		// prefetchers start over on: ask for the next block's keys, and
		// this block's values for the second pass, while these are read.
		if p+block <= pos {
			s.kv.prefetch(false, li, b+1, lo, lo+min(block, pos+1-p-block)*hd)
		}
		s.kv.prefetch(true, li, b, lo, lo+n*hd)
		kernels.DotRows(att[p:p+n], qh, rows(false, b, n), hd)
	}
	for t := range att {
		att[t] *= scale
	}
	kernels.Softmax(att)
	oh := out[h*hd : (h+1)*hd]
	clear(oh)
	for b, p := 0, 0; p <= pos; b, p = b+1, p+block {
		n := min(block, pos+1-p)
		kernels.AxpyRows(oh, att[p:p+n], rows(true, b, n), hd)
	}
}

// HeadBatch is Head for n tokens at once (x is n x Dim, normalised in
// place; logits n x VocabSize): the classifier, often the largest matrix,
// is streamed once for all of them. Each token's logits are bit-identical
// to Head's.
func (m *Model) HeadBatch(x, logits []float32, n int) error {
	c := &m.W.Config
	if !m.W.HasHead() {
		return fmt.Errorf("this model part holds layers [%d, %d) of %d and no classifier", m.W.First, m.W.Last, c.NLayers)
	}
	if n < 1 || len(x) != n*c.Dim || len(logits) != n*c.VocabSize {
		return fmt.Errorf("head of %d tokens: %d hidden values and %d logits, want %d and %d", n, len(x), len(logits), n*c.Dim, n*c.VocabSize)
	}
	for t := range n {
		kernels.RMSNorm(x[t*c.Dim:(t+1)*c.Dim], x[t*c.Dim:(t+1)*c.Dim], m.finalNorm, c.NormEps)
	}
	kernels.MatMul(logits, &m.W.Output, x, n)
	return nil
}

// Head applies the final norm to x (in place) and writes the logits.
func (m *Model) Head(x []float32, logits []float32) error {
	if !m.W.HasHead() {
		return fmt.Errorf("this model part holds layers [%d, %d) of %d and no classifier", m.W.First, m.W.Last, m.W.Config.NLayers)
	}
	if len(logits) != m.W.Config.VocabSize {
		return fmt.Errorf("logits buffer has %d entries, vocabulary has %d", len(logits), m.W.Config.VocabSize)
	}
	kernels.RMSNorm(x, x, m.finalNorm, m.W.Config.NormEps)
	kernels.MatVec(logits, &m.W.Output, x)
	return nil
}

// attnGroupsPerWorker is how many groups of consecutive (token, head) items
// attention splits into per thread: one for a single token, so that each
// thread reads one contiguous run of the cache; more for a batch, whose
// items differ in length.
func attnGroupsPerWorker(tokens int) int {
	if tokens == 1 {
		return 1
	}
	return 4
}
