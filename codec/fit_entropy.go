package codec

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/seamlm/seam/codec/entropy"
)

// Entropy fit (docs/codec.md §11.3). With weights w_i (1 for a fit for the
// activations) the weighted squared error of an entropy-coded uniform
// quantizer is about sum_i w_i step_i^2 / 12, and its rate about
// sum_i (h_i - log2 step_i); the two balance when w_i step_i^2 is the same
// for every component. So one scale s sets every step, step_i = s / sqrt(w_i),
// and the fit bisects s for the budget.

// entropyRateRows bounds the fit rows the budget search codes per trial.
const entropyRateRows = 4096

// entropySearchSteps is the number of bisection steps over log2(s).
const entropySearchSteps = 40

// fitEntropy fills an entropy-coded codec's components, steps and tables for
// a mean payload of budget bytes per token on the fit rows.
//
// The rate is measured on the held-out rows when there are any: with few
// rows per dimension the PCA basis and the tables are overfitted to the fit
// rows, which then code cheaper than new data (on a width-1024 model fitted
// on 2991 rows, 256 bytes on the fit rows were 290 on held-out ones).
//
// With trellis set the codec is trellis-coded (docs/codec.md §11.7): the
// same steps, the cells found by the trellis search, two tables per
// component.
//
// With sens (trellis only: the measured sensitivity of each of the n fit
// rows, 0 where not measured) the codec has token classes (§11.8).
func (c *Codec) fitEntropy(rows []float32, n int, held []float32, nh int, variances, weights, z []float64, order []int, budget int, trellis bool, sens []float64) error {
	d := c.d
	// Candidates: the directions up to the last with variance (and, fitted
	// for the output, sensitivity); one of zero weight inside sends nothing.
	nv := 0
	for p := range variances {
		if variances[p] > 0 && (weights == nil || weights[p] > 0) {
			nv = p + 1
		}
	}
	if nv == 0 {
		return fmt.Errorf("codec: fit: no direction has variance")
	}
	// Every candidate direction, as the encoder will project onto it.
	all := &Codec{d: d, k: nv, version: 2, mean: c.mean}
	for p := 0; p < nv; p++ {
		all.comps = append(all.comps, signedColumn(z, d, order[p])...)
	}
	all.buildTensors()
	ys := all.coefficientsByComponent(rows, n)
	rateYs, rateN := ys, n
	if nh > 0 {
		rateYs, rateN = all.coefficientsByComponent(held, nh), nh
	}
	w := make([]float64, nv)
	for p := range w {
		w[p] = 1
		if weights != nil {
			w[p] = weights[p]
		}
	}
	var classes func(kept []int) (*tokenClasses, []uint8, error)
	if sens != nil {
		classes = memoClasses(ys, n, sens)
	}
	trial := func(scale float64) (*entropyFit, error) {
		if trellis {
			return buildTrellis(ys, n, rateYs, rateN, nv, w, scale, classes)
		}
		return buildEntropy(ys, n, rateYs, rateN, nv, w, scale)
	}
	// Bracket: a scale of 16 standard deviations of the largest direction
	// sends almost nothing; 2^-20 of it more than any budget.
	hi := 16 * math.Sqrt(variances[0]*maxFloat(w))
	lo := math.Ldexp(hi, -24)
	best, err := trial(hi)
	if err != nil {
		return err
	}
	if best.meanBytes > float64(budget) {
		return fmt.Errorf("codec: fit: even the coarsest quantizer needs %.2f bytes per token, above the budget of %d", best.meanBytes, budget)
	}
	for range entropySearchSteps {
		mid := math.Sqrt(lo * hi) // bisect log2(scale)
		f, err := trial(mid)
		if err != nil {
			return err
		}
		if f.meanBytes <= float64(budget) {
			hi, best = mid, f
		} else {
			lo = mid
		}
	}
	if len(best.kept) == 0 {
		return fmt.Errorf("codec: fit: a budget of %d bytes per token sends no component once entropy-coded", budget)
	}
	c.scheme = schemeEntropy
	if trellis {
		// Quantizers and tables are in kept order already, class by class.
		c.scheme = schemeTrellis
		c.tc, c.tables, c.cls, c.steps = best.tquants, best.tables, best.cls, best.steps
	}
	for _, p := range best.kept {
		c.comps = append(c.comps, all.comps[p*d:(p+1)*d]...)
		if !trellis {
			c.ec = append(c.ec, best.quants[p])
			c.tables = append(c.tables, best.tables[p])
		}
		if weights != nil {
			c.weights = append(c.weights, float32(weights[p]))
		}
	}
	c.k = len(best.kept)
	c.stats.MeanBytes = best.meanBytes
	return nil
}

func maxFloat(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// entropyFit is one trial scale's quantizers and tables over the candidate
// directions, the directions it keeps (some cell other than 0 occurs), and
// its measured mean bytes per token.
//
// A trellis fit has instead tquants and two tables for each kept direction,
// in the order of kept.
type entropyFit struct {
	quants    []ecQuant
	tquants   []tcQuant     // trellis: every class's k quantizers, class by class
	cls       *tokenClasses // trellis with token classes
	steps     []float32     // trellis: the base steps of the kept directions
	tables    []*entropy.Table
	kept      []int
	meanBytes float64
}

// buildEntropy quantizes the coefficients ys of n rows at steps
// scale/sqrt(w_i), counts the cells of each kept direction into its table,
// and codes the first entropyRateRows of the rateN rows rateYs one token
// per stream to measure the mean payload.
func buildEntropy(ys []float32, n int, rateYs []float32, rateN, nv int, w []float64, scale float64) (*entropyFit, error) {
	rateRows := min(rateN, entropyRateRows)
	f := &entropyFit{quants: make([]ecQuant, nv), tables: make([]*entropy.Table, nv)}
	counts := make([]uint64, MaxCells)
	for p := 0; p < nv; p++ {
		if !(w[p] > 0) {
			continue // no sensitivity: the direction sends nothing
		}
		col := ys[p*n : (p+1)*n]
		step, qmax, ok := entropyStep(col, w[p], scale)
		if !ok {
			continue // every coefficient rounds to 0: the direction sends nothing
		}
		q := newECQuant(step, qmax)
		cnt := counts[:2*qmax+1]
		clear(cnt)
		for _, y := range col {
			cnt[q.index(y)+qmax]++
		}
		t, err := entropy.TableFromCounts(cnt, EntropyPrecision)
		if err != nil {
			return nil, fmt.Errorf("codec: fit: direction %d: %w", p, err)
		}
		f.quants[p], f.tables[p] = q, t
		f.kept = append(f.kept, p)
	}
	var enc entropy.Encoder
	var buf []byte
	total := 0
	for r := 0; r < rateRows; r++ {
		enc.Reset()
		for _, p := range f.kept {
			q := &f.quants[p]
			enc.Encode(f.tables[p], q.index(rateYs[p*rateN+r])+q.qmax)
		}
		var err error
		if buf, err = enc.Finish(buf[:0]); err != nil {
			return nil, fmt.Errorf("codec: fit: %w", err)
		}
		total += len(buf)
	}
	f.meanBytes = float64(total) / float64(rateRows)
	return f, nil
}

// entropyStep is the step and range of a direction with fit-row
// coefficients col, weight w, at a scale: step = scale/sqrt(w), but no finer
// than the alphabet allows, so that cells never clamp on the fit rows and a
// finer scale never makes a stream cheaper (the rate falls monotonically
// with the scale, and the bisection holds). ok is false when every
// coefficient rounds to 0 and the direction sends nothing.
func entropyStep(col []float32, w, scale float64) (step float32, q int, ok bool) {
	var maxAbs float32
	for _, y := range col {
		maxAbs = max(maxAbs, float32(math.Abs(float64(y))))
	}
	step = float32(max(scale/math.Sqrt(w), float64(maxAbs)/MaxIndex))
	if !(step > 0) || math.IsInf(float64(step), 0) {
		return 0, 0, false
	}
	q = int(min(math.Round(float64(maxAbs)/float64(step)), MaxIndex))
	return step, q, q >= 1
}

// buildTrellis is buildEntropy for a trellis-coded codec: the same steps and
// kept directions, the cells of each row found by the trellis search, their
// counts per direction and union made into the two tables of each
// direction, and the first entropyRateRows rate rows coded one token per
// stream.
//
// With classes (memoClasses) the codec has token classes (docs/codec.md
// §11.8): the classes fitted on the kept directions' coefficients, each
// class's quantizers the base steps times its multiplier, its tables
// counting its own rows, and the class table the rows of each class.
func buildTrellis(ys []float32, n int, rateYs []float32, rateN, nv int, w []float64, scale float64, classes func(kept []int) (*tokenClasses, []uint8, error)) (*entropyFit, error) {
	f := &entropyFit{}
	for p := 0; p < nv; p++ {
		if !(w[p] > 0) {
			continue
		}
		step, q, ok := entropyStep(ys[p*n:(p+1)*n], w[p], scale)
		if !ok {
			continue
		}
		f.tquants = append(f.tquants, newTCQuant(step, q))
		f.steps = append(f.steps, step)
		f.kept = append(f.kept, p)
	}
	k := len(f.kept)
	if k == 0 {
		return f, nil
	}
	var rowClass []uint8
	if classes != nil {
		cls, rc, err := classes(f.kept)
		if err != nil {
			return nil, err
		}
		fc := *cls // this trial's own copy: its class table is set below
		f.cls, rowClass = &fc, rc
		f.tquants = classQuantizers(f.tquants, f.cls.mults)
	}
	tables, classCounts, err := trellisTables(ys, n, f, rowClass)
	if err != nil {
		return nil, err
	}
	f.tables = tables
	if f.cls != nil {
		if f.cls.table, err = entropy.TableFromCounts(classCounts, EntropyPrecision); err != nil {
			return nil, fmt.Errorf("codec: fit: class table: %w", err)
		}
	}
	rateRows := min(rateN, entropyRateRows)
	sizes := make([]int, rateRows)
	var failed error
	var mu sync.Mutex
	parallelRows(rateRows, rateRows*k*trellisStates, func(lo, hi int) {
		var v viterbi
		var enc entropy.Encoder
		var buf []byte
		y := make([]float32, k)
		un, cells := make([]uint8, k), make([]int, k)
		for r := lo; r < hi; r++ {
			for i, p := range f.kept {
				y[i] = rateYs[p*rateN+r]
			}
			enc.Reset()
			cl := 0
			if f.cls != nil {
				cl = f.cls.classOf(y)
				enc.Encode(f.cls.table, cl)
			}
			qs, tables := f.tquants[cl*k:(cl+1)*k], f.tables[2*cl*k:2*(cl+1)*k]
			codecTrellis.search(&v, qs, y, un, cells)
			encodeTrellis(&enc, tables, qs, un, cells)
			var err error
			if buf, err = enc.Finish(buf[:0]); err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
				return
			}
			sizes[r] = len(buf)
		}
	})
	if failed != nil {
		return nil, fmt.Errorf("codec: fit: %w", failed)
	}
	total := 0
	for _, s := range sizes {
		total += s
	}
	f.meanBytes = float64(total) / float64(rateRows)
	return f, nil
}

// memoClasses fits token classes (fitTokenClasses) for a kept set of
// directions, once: the bisection's trials mostly keep the same directions,
// and the classes depend only on them, not on the scale.
func memoClasses(ys []float32, n int, sens []float64) func(kept []int) (*tokenClasses, []uint8, error) {
	var (
		lastKept []int
		cls      *tokenClasses
		rows     []uint8
		err      error
	)
	return func(kept []int) (*tokenClasses, []uint8, error) {
		if lastKept == nil || !slices.Equal(kept, lastKept) {
			lastKept = slices.Clone(kept)
			cls, rows, err = fitTokenClasses(ys, n, kept, sens)
		}
		return cls, rows, err
	}
}

// classQuantizers returns every class's quantizers, class by class: the
// base quantizers' steps times the class's multiplier (classStep), each
// with the range that covers the base quantizer's (at least 1, at most
// MaxIndex cells a side).
func classQuantizers(base []tcQuant, mults []float32) []tcQuant {
	out := make([]tcQuant, 0, len(mults)*len(base))
	for _, m := range mults {
		for _, b := range base {
			step := classStep(b.step, m)
			q := math.Round(float64(b.q) * float64(b.step) / float64(step))
			out = append(out, newTCQuant(step, int(max(1, min(q, MaxIndex)))))
		}
	}
	return out
}

// trellisTables searches every fit row (in parallel), each with its class's
// quantizers (rowClass nil: one class), and makes each class's and kept
// direction's two tables from the counts of its cells, counted in row
// order; it also returns the rows of each class.
func trellisTables(ys []float32, n int, f *entropyFit, rowClass []uint8) ([]*entropy.Table, []uint64, error) {
	k := len(f.kept)
	classes := len(f.tquants) / k
	class := func(r int) int {
		if rowClass == nil {
			return 0
		}
		return int(rowClass[r])
	}
	unions := make([]uint8, n*k)
	cells := make([]int16, n*k)
	parallelRows(n, n*k*trellisStates, func(lo, hi int) {
		var v viterbi
		y := make([]float32, k)
		cl := make([]int, k)
		for r := lo; r < hi; r++ {
			for i, p := range f.kept {
				y[i] = ys[p*n+r]
			}
			c := class(r)
			codecTrellis.search(&v, f.tquants[c*k:(c+1)*k], y, unions[r*k:(r+1)*k], cl)
			for i, c := range cl {
				cells[r*k+i] = int16(c)
			}
		}
	})
	counts := make([][2][]uint64, classes*k)
	for i := range counts {
		q := &f.tquants[i]
		counts[i] = [2][]uint64{make([]uint64, q.cells(0)), make([]uint64, q.cells(1))}
	}
	classCounts := make([]uint64, classes)
	for r := 0; r < n; r++ {
		c := class(r)
		classCounts[c]++
		for i := range f.kept {
			a, j := unions[r*k+i], c*k+i
			counts[j][a][f.tquants[j].symbol(a, int(cells[r*k+i]))]++
		}
	}
	var tables []*entropy.Table
	for j := range counts {
		for a := range counts[j] {
			t, err := entropy.TableFromCounts(counts[j][a], EntropyPrecision)
			if err != nil {
				return nil, nil, fmt.Errorf("codec: fit: class %d, direction %d, union %d: %w", j/k, f.kept[j%k], a, err)
			}
			tables = append(tables, t)
		}
	}
	return tables, classCounts, nil
}
