package eval

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/seamlm/seam/model"
)

// checkBoundary validates a split boundary: the hidden state entering layer
// boundary, after layers [0, boundary), for boundary in [1, n_layers).
func checkBoundary(m *model.Model, boundary int) error {
	if n := m.Config().NLayers; boundary < 1 || boundary >= n {
		return fmt.Errorf("boundary %d: a split boundary is a layer in [1, %d) (the model has %d layers)", boundary, n, n)
	}
	return nil
}

// checkSeqs validates every token id and sequence length against the model.
func checkSeqs(m *model.Model, seqs [][]int) error {
	cfg := m.Config()
	for i, s := range seqs {
		if len(s) > cfg.SeqLen {
			return fmt.Errorf("sequence %d has %d tokens, beyond the context of %d", i, len(s), cfg.SeqLen)
		}
		for p, id := range s {
			if id < 0 || id >= cfg.VocabSize {
				return fmt.Errorf("sequence %d, position %d: token id %d is outside the vocabulary of %d", i, p, id, cfg.VocabSize)
			}
		}
	}
	return nil
}

// Capture runs layers [0, boundary) over each sequence and returns the hidden
// states entering layer boundary, one row of m.Config().Dim values per
// position, sequences in order, and the number of rows. It stops after
// maxRows rows (the size cap; 0 means no cap): the rows then belong to
// Truncate(seqs, n). Sequences run in parallel, each in its own KV cache and
// as one batch (model.LayersBatch, bit-identical to token by token), and
// every row is what a pipeline stage ending at boundary would send.
func Capture(m *model.Model, seqs [][]int, boundary, maxRows int, progress Progress) (rows []float32, n int, err error) {
	if err := checkBoundary(m, boundary); err != nil {
		return nil, 0, fmt.Errorf("capture: %w", err)
	}
	if maxRows < 0 {
		return nil, 0, fmt.Errorf("capture: row cap %d is negative", maxRows)
	}
	n = CountTokens(seqs)
	if maxRows > 0 {
		n = min(n, maxRows)
	}
	seqs = Truncate(seqs, n)
	if err := checkSeqs(m, seqs); err != nil {
		return nil, 0, fmt.Errorf("capture: %w", err)
	}
	d := m.Config().Dim
	rows = make([]float32, n*d) // n tokens are already held in memory; d <= model.MaxDim
	offsets := make([]int, len(seqs))
	for i, off := 0, 0; i < len(seqs); i++ {
		offsets[i], off = off, off+len(seqs[i])
	}
	err = forEach(len(seqs), progress,
		func() (*model.State, error) { return m.NewState(0, boundary) },
		func(st *model.State, i int) error {
			st.Reset()
			x := rows[offsets[i]*d : (offsets[i]+len(seqs[i]))*d]
			if err := embedAll(m, seqs[i], x); err != nil {
				return fmt.Errorf("sequence %d: %w", i, err)
			}
			if err := m.LayersBatch(st, x, 0, len(seqs[i])); err != nil {
				return fmt.Errorf("sequence %d: %w", i, err)
			}
			return nil
		})
	if err != nil {
		return nil, 0, fmt.Errorf("capture: %w", err)
	}
	return rows, n, nil
}

// embedAll writes the embeddings of toks into x, one row of Dim values each.
func embedAll(m *model.Model, toks []int, x []float32) error {
	d := m.Config().Dim
	for p, id := range toks {
		if err := m.Embed(id, x[p*d:(p+1)*d]); err != nil {
			return fmt.Errorf("position %d: %w", p, err)
		}
	}
	return nil
}

// forEach runs work(state, i) for i in [0, n) on up to GOMAXPROCS goroutines,
// each with its own state from newState, and returns the error of the lowest
// failing i. Items must write only to their own outputs.
func forEach[S any](n int, progress Progress, newState func() (S, error), work func(S, int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	errs := make([]error, n)
	var (
		mu   sync.Mutex
		next int
		done int
		wg   sync.WaitGroup
	)
	claim := func(finished bool) (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			done++
			progress.report(done, n)
		}
		if next >= n {
			return 0, false
		}
		next++
		return next - 1, true
	}
	startErr := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := newState()
			if err != nil {
				startErr[w] = err
				return
			}
			for i, ok := claim(false); ok; i, ok = claim(true) {
				errs[i] = work(st, i)
			}
		}()
	}
	wg.Wait()
	for _, err := range startErr {
		if err != nil {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
