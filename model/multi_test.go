package model_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seamlm/seam/kernels"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
)

// solo runs each session's tokens alone, in the given chunks, and returns
// the hidden states after the layers, per session.
func solo(t *testing.T, m *model.Model, embeds [][]float32, chunks [][]int, f16 bool) [][]float32 {
	t.Helper()
	d := m.Config().Dim
	out := make([][]float32, len(embeds))
	for i, e := range embeds {
		pool, _ := model.NewKVPool(0, 16)
		if f16 {
			pool, _ = model.NewKVPoolF16(0, 16)
		}
		st, _ := m.NewStateIn(0, m.Config().NLayers, pool)
		x := append([]float32(nil), e...)
		pos := 0
		for _, n := range chunks[i] {
			if err := m.LayersBatch(st, x[pos*d:(pos+n)*d], pos, n); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
		out[i] = x
	}
	return out
}

// Sessions of different lengths batched together, step by step (a prefill
// chunk of one beside a decode of another, as a stage's batcher runs them),
// give hidden states bit-identical to each session run alone, for f32,
// q8_0 and q4_0 weights, and whatever the KV block size.
func TestMultiSessionBatchIsBitIdentical(t *testing.T) {
	cfg := synth.DemoConfig()
	w, err := synth.Weights(cfg, 21)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []tensor.DType{tensor.F32, tensor.Q8_0, tensor.Q4_0} {
		wq := w
		if typ != tensor.F32 {
			wq = quantizedCopy(t, w, typ)
		}
		m, err := model.New(wq)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range []int{1, 5, 16} {
			for _, f16 := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/block%d/f16-%v", typ, block, f16), func(t *testing.T) {
					multiMatchesSolo(t, m, block, f16)
				})
			}
		}
	}
	t.Logf("SIMD level: %s", kernels.SIMD())
}

func multiMatchesSolo(t *testing.T, m *model.Model, block int, f16 bool) {
	c := m.Config()
	d := c.Dim
	rng := rand.New(rand.NewPCG(uint64(block), 7))
	const sessions = 6
	// Each session: a prompt of 1-40 tokens in chunks of up to 9, then
	// decode steps, to 50 positions at most.
	embeds := make([][]float32, sessions)
	chunks := make([][]int, sessions)
	for i := range embeds {
		total := 10 + rng.IntN(40)
		embeds[i] = make([]float32, total*d)
		for p := range total {
			m.Embed(rng.IntN(c.VocabSize), embeds[i][p*d:(p+1)*d])
		}
		for left := total; left > 0; {
			n := 1
			if left == total || rng.IntN(3) == 0 {
				n = min(left, 1+rng.IntN(9))
			}
			chunks[i] = append(chunks[i], n)
			left -= n
		}
	}
	want := solo(t, m, embeds, chunks, f16)

	newPool := model.NewKVPool
	if f16 {
		newPool = model.NewKVPoolF16
	}
	pool, err := newPool(0, block)
	if err != nil {
		t.Fatal(err)
	}
	states := make([]*model.State, sessions)
	xs := make([][]float32, sessions)
	pos := make([]int, sessions)
	step := make([]int, sessions)
	for i := range states {
		states[i], _ = m.NewStateIn(0, c.NLayers, pool)
		xs[i] = append([]float32(nil), embeds[i]...)
	}
	var sc model.Scratch
	for steps := 0; ; steps++ {
		var items []model.Item
		for i := range states {
			// Sessions join late and skip steps, so batches mix.
			if step[i] == len(chunks[i]) || (steps < 3*i) || rng.IntN(4) == 0 {
				continue
			}
			n := chunks[i][step[i]]
			items = append(items, model.Item{State: states[i], X: xs[i][pos[i]*d : (pos[i]+n)*d], Pos: pos[i], N: n})
			pos[i] += n
			step[i]++
		}
		if len(items) == 0 {
			done := true
			for i := range states {
				done = done && step[i] == len(chunks[i])
			}
			if done {
				break
			}
			continue
		}
		if err := m.LayersMulti(&sc, items); err != nil {
			t.Fatal(err)
		}
	}
	for i := range want {
		for j := range want[i] {
			if math.Float32bits(xs[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("session %d, position %d: batched %v, alone %v", i, j/d, xs[i][j], want[i][j])
			}
		}
	}
	var held int64
	for _, st := range states {
		held += st.KVBytes()
	}
	if held != pool.Used() {
		t.Errorf("states hold %d bytes, the pool counts %d", held, pool.Used())
	}
	for _, st := range states {
		st.Release()
	}
	if pool.Used() != 0 {
		t.Errorf("after release the pool still counts %d bytes", pool.Used())
	}
}

// A state holds blocks for the positions it has computed, not the context,
// and a pool's budget refuses the computation that would exceed it, whole:
// the refused batch changes no session, and the others go on.
func TestKVPoolBudget(t *testing.T) {
	cfg := synth.DemoConfig()
	w, _ := synth.Weights(cfg, 3)
	m, _ := model.New(w)
	d := cfg.Dim
	perBlock := int64(cfg.NLayers) * 2 * 16 * int64(cfg.KVDim()) * 4
	pool, _ := model.NewKVPool(3*perBlock, 16)
	a, _ := m.NewStateIn(0, cfg.NLayers, pool)
	b, _ := m.NewStateIn(0, cfg.NLayers, pool)
	x := make([]float32, 20*d)
	for p := range 20 {
		m.Embed(p+1, x[p*d:(p+1)*d])
	}
	if err := m.LayersBatch(a, append([]float32(nil), x[:17*d]...), 0, 17); err != nil {
		t.Fatal(err)
	}
	if got, want := a.KVBytes(), 2*perBlock; got != want {
		t.Fatalf("17 positions hold %d bytes, want 2 blocks of 16 (%d)", got, want)
	}
	// b needs 2 blocks; 1 is left.
	err := m.LayersMulti(&model.Scratch{}, []model.Item{{State: a, X: make([]float32, d), Pos: 17, N: 1}, {State: b, X: append([]float32(nil), x[:20*d]...), Pos: 0, N: 20}})
	if !errors.Is(err, model.ErrKVBudget) {
		t.Fatalf("a batch past the budget gave %v, want ErrKVBudget", err)
	}
	if a.Next() != 17 || b.Next() != 0 || pool.Used() != 2*perBlock {
		t.Fatalf("the refused batch changed state: a at %d, b at %d, pool %d", a.Next(), b.Next(), pool.Used())
	}
	if err := m.LayersBatch(b, append([]float32(nil), x[:16*d]...), 0, 16); err != nil {
		t.Fatalf("b within the budget: %v", err)
	}
	t.Logf("refused: %v", err)
}

// HeadBatch gives each token the logits Head gives it alone, for f32,
// q8_0 and q4_0 classifiers (the integer-dot path quantizes each token's
// activations on its own, so its neighbours in the batch change nothing).
func TestHeadBatchIsBitIdentical(t *testing.T) {
	cfg := synth.DemoConfig()
	w, _ := synth.Weights(cfg, 8)
	for _, typ := range []tensor.DType{tensor.F32, tensor.Q8_0, tensor.Q4_0} {
		wq := *w
		if typ != tensor.F32 {
			o := w.Output
			rb, _ := typ.RowBytes(o.Cols)
			enc := tensor.Tensor{Name: o.Name, Type: typ, Rows: o.Rows, Cols: o.Cols, Data: make([]byte, rb*o.Rows)}
			vals := tensor.AsF32(o.Data)
			for r := range o.Rows {
				if err := kernels.QuantizeRow(enc.Data[r*rb:(r+1)*rb], typ, vals[r*o.Cols:(r+1)*o.Cols]); err != nil {
					t.Fatal(err)
				}
			}
			wq.Output = enc
		}
		m, err := model.New(&wq)
		if err != nil {
			t.Fatal(err)
		}
		d, v := cfg.Dim, cfg.VocabSize
		const n = 7
		x := make([]float32, n*d)
		for i := range n {
			m.Embed(i*13+2, x[i*d:(i+1)*d])
		}
		want := make([]float32, n*v)
		for i := range n {
			xi := append([]float32(nil), x[i*d:(i+1)*d]...)
			if err := m.Head(xi, want[i*v:(i+1)*v]); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]float32, n*v)
		if err := m.HeadBatch(x, got, n); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: token %d, logit %d: batched %v, alone %v", typ, i/v, i%v, got[i], want[i])
			}
		}
	}
}
