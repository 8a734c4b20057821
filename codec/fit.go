package codec

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/seamlm/seam/tensor"
)

// MaxFitWidth bounds the width Fit accepts: the covariance and the
// eigenvector matrix take 8*d*d bytes each and the eigensolver O(d^3) time.
const MaxFitWidth = 16384

// relVarFloor: eigenvalues below this fraction of the largest are rounding
// noise of the eigensolver (about d * 2^-52 relative) and get no bits.
const relVarFloor = 1e-10

// FitOptions choose how a codec is fitted. Exactly one of Bytes and Rank is
// set.
type FitOptions struct {
	// Bytes is the payload budget per token. Bits go to components by
	// reverse water-filling (AllocateBits); the payload may come out smaller
	// when every component with variance is full.
	Bytes int
	// Rank is the plain truncation baseline: keep the Rank components of
	// largest variance at 8 bits each.
	Rank int
	// Holdout is the fraction of samples, taken from the last rows, kept out
	// of the fit to measure the reconstruction error; 0 measures nothing.
	// The held-out row count is floor(n * Holdout).
	Holdout float64
	// Gain sends a per-token gain (binary16, 16 bits of the budget) and
	// quantizes coefficients divided by it. Off by default: see docs/codec.md
	// for when it helps.
	Gain bool
	// Provenance is recorded in the file as given.
	Provenance Provenance
}

// Fit fits a codec to samples, n rows of d float32 values (row-major). The
// result is a deterministic function of the arguments: the same input gives
// a byte-identical Marshal on every machine.
func Fit(samples []float32, n, d int, opts FitOptions) (*Codec, error) {
	nh, err := checkFitArgs(samples, n, d, opts)
	if err != nil {
		return nil, err
	}
	nf := n - nh
	fitRows := samples[:nf*d]
	mean := sampleMean(fitRows, nf, d)
	cov := covariance(fitRows, nf, d, mean)
	for i, v := range cov {
		if !finite64(v) {
			return nil, fmt.Errorf("codec: fit: covariance[%d][%d] overflows; sample values are too large", i/d, i%d)
		}
	}
	vals, z, err := symEigen(cov, d)
	if err != nil {
		return nil, fmt.Errorf("codec: fit: %w", err)
	}
	order := descending(vals)
	bits := allocate(vals, order, d, opts)

	c := &Codec{d: d, gain: opts.Gain, mean: make([]float32, d)}
	for j, m := range mean {
		c.mean[j] = float32(m)
	}
	for p, b := range bits {
		if b == 0 {
			continue
		}
		c.bits = append(c.bits, b)
		c.comps = append(c.comps, signedColumn(z, d, order[p])...)
	}
	c.k = len(c.bits)
	if c.clips, err = fitClips(c, fitRows, nf); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("codec: fit produced an invalid codec: %w", err)
	}
	c.derive()
	c.prov = opts.Provenance
	c.stats = Stats{FitSamples: uint64(nf), HoldoutSamples: uint64(nh)}
	if nh > 0 {
		c.stats.HasMSE = true
		c.stats.HeldoutMSE, c.stats.HeldoutVar, err = c.heldout(samples[nf*d:], nh)
		if err != nil {
			return nil, err
		}
	}
	c.seal()
	return c, nil
}

// checkFitArgs validates the arguments and returns the held-out row count.
func checkFitArgs(samples []float32, n, d int, opts FitOptions) (int, error) {
	if d < 1 || d > MaxFitWidth {
		return 0, fmt.Errorf("codec: fit: width d=%d outside [1, %d]", d, MaxFitWidth)
	}
	if n < 1 {
		return 0, fmt.Errorf("codec: fit: %d samples", n)
	}
	size, err := tensor.MulSize(n, d)
	if err != nil {
		return 0, fmt.Errorf("codec: fit: %w", err)
	}
	if len(samples) != size {
		return 0, fmt.Errorf("codec: fit: %d sample values, n=%d x d=%d needs %d", len(samples), n, d, size)
	}
	if (opts.Bytes > 0) == (opts.Rank > 0) || opts.Bytes < 0 || opts.Rank < 0 {
		return 0, fmt.Errorf("codec: fit: set exactly one of Bytes (%d) and Rank (%d), positive", opts.Bytes, opts.Rank)
	}
	if opts.Rank > d {
		return 0, fmt.Errorf("codec: fit: rank %d exceeds width %d", opts.Rank, d)
	}
	if opts.Bytes > 0 && budgetBits(opts) < 1 {
		return 0, fmt.Errorf("codec: fit: %d bytes leave no bits after the %d-bit gain", opts.Bytes, GainBits)
	}
	if opts.Bytes > MaxWidth {
		return 0, fmt.Errorf("codec: fit: budget %d bytes exceeds %d", opts.Bytes, MaxWidth)
	}
	if !(opts.Holdout >= 0 && opts.Holdout < 1) {
		return 0, fmt.Errorf("codec: fit: holdout fraction %v outside [0, 1)", opts.Holdout)
	}
	nh := int(math.Floor(float64(n) * opts.Holdout))
	if n-nh < 2 {
		return 0, fmt.Errorf("codec: fit: %d samples with %d held out leave fewer than 2 to fit", n, nh)
	}
	for i, v := range samples {
		if !finite32(v) {
			return 0, fmt.Errorf("codec: fit: sample %d value %d is %v", i/d, i%d, v)
		}
	}
	return nh, nil
}

func budgetBits(opts FitOptions) int {
	b := opts.Bytes * 8
	if opts.Gain {
		b -= GainBits
	}
	return b
}

// sampleMean sums each column over rows in row order, in float64.
func sampleMean(rows []float32, n, d int) []float64 {
	sum := make([]float64, d)
	for r := 0; r < n; r++ {
		row := rows[r*d : (r+1)*d]
		for j, v := range row {
			sum[j] += float64(v)
		}
	}
	for j := range sum {
		sum[j] /= float64(n)
	}
	return sum
}

// covChunk is how many samples are centered and transposed at a time.
const covChunk = 64

// covariance returns the d x d sample covariance (divided by n-1) of rows
// about mean, both triangles filled. Entry (i, j) is summed over samples in
// row order, starting from zero: chunking only decides when the running sums
// are stored, not their order.
func covariance(rows []float32, n, d int, mean []float64) []float64 {
	c := make([]float64, d*d)
	t := make([]float64, d*covChunk) // t[j*covChunk + s]: centered value j of sample s
	for r0 := 0; r0 < n; r0 += covChunk {
		cn := min(covChunk, n-r0)
		for s := 0; s < cn; s++ {
			row := rows[(r0+s)*d : (r0+s+1)*d]
			for j, v := range row {
				t[j*covChunk+s] = float64(v) - mean[j]
			}
		}
		covAccumulate(c, t, d, cn)
	}
	scale := 1 / float64(n-1)
	for i := 0; i < d; i++ {
		for j := 0; j <= i; j++ {
			v := c[i*d+j] * scale
			c[i*d+j], c[j*d+i] = v, v
		}
	}
	return c
}

// covAccumulate adds one chunk's products to the lower triangle of c. Worker
// w takes rows i = w, w+W, ... so the triangle's work is balanced.
func covAccumulate(c, t []float64, d, cn int) {
	workers := runtime.GOMAXPROCS(0)
	if d*d*cn < parallelMinWork*4 || workers < 2 {
		workers = 1
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < d; i += workers {
				covRow(c[i*d:i*d+i+1], t, i, cn)
			}
		}()
	}
	wg.Wait()
}

// covRow adds sum_s t[i][s] t[j][s] to crow[j] for j <= i, four j at a time.
func covRow(crow, t []float64, i, cn int) {
	ti := t[i*covChunk : i*covChunk+cn]
	j := 0
	for ; j+4 <= len(crow); j += 4 {
		t0 := t[j*covChunk : j*covChunk+cn]
		t1 := t[(j+1)*covChunk : (j+1)*covChunk+cn]
		t2 := t[(j+2)*covChunk : (j+2)*covChunk+cn]
		t3 := t[(j+3)*covChunk : (j+3)*covChunk+cn]
		a0, a1, a2, a3 := crow[j], crow[j+1], crow[j+2], crow[j+3]
		for s, v := range ti {
			a0 += float64(v * t0[s])
			a1 += float64(v * t1[s])
			a2 += float64(v * t2[s])
			a3 += float64(v * t3[s])
		}
		crow[j], crow[j+1], crow[j+2], crow[j+3] = a0, a1, a2, a3
	}
	for ; j < len(crow); j++ {
		tj := t[j*covChunk : j*covChunk+cn]
		a := crow[j]
		for s, v := range ti {
			a += float64(v * tj[s])
		}
		crow[j] = a
	}
}

// descending returns eigenvalue indices by decreasing value; equal values
// keep the solver's order (a stable sort), which is itself deterministic.
func descending(vals []float64) []int {
	order := make([]int, len(vals))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return vals[order[a]] > vals[order[b]] })
	return order
}

// allocate returns the bits of each component in sorted order.
func allocate(vals []float64, order []int, d int, opts FitOptions) []uint8 {
	if opts.Rank > 0 {
		bits := make([]uint8, d)
		for p := 0; p < opts.Rank; p++ {
			bits[p] = MaxBits
		}
		return bits
	}
	top := math.Max(vals[order[0]], 0)
	variances := make([]float64, d)
	for p, i := range order {
		if v := vals[i]; v > top*relVarFloor {
			variances[p] = v
		}
	}
	return AllocateBits(variances, budgetBits(opts))
}

// signedColumn returns column col of z (row-major d x d) as float32, its sign
// chosen so that its largest-magnitude entry (the first of equals) is
// positive.
func signedColumn(z []float64, d, col int) []float32 {
	best, arg := -1.0, 0
	for j := 0; j < d; j++ {
		if a := math.Abs(z[j*d+col]); a > best {
			best, arg = a, j
		}
	}
	sign := 1.0
	if z[arg*d+col] < 0 {
		sign = -1
	}
	out := make([]float32, d)
	for j := range out {
		out[j] = float32(sign * z[j*d+col])
	}
	return out
}

// fitClips chooses each kept component's clip on the fit rows' coefficients,
// computed exactly as Encode computes them (normalized by the gain if any).
func fitClips(c *Codec, rows []float32, n int) ([]float32, error) {
	k, d := c.k, c.d
	ys := make([]float32, k*n) // ys[i*n + r]: coefficient i of row r
	parallelRows(n, n*k*d, func(lo, hi int) {
		e := c.NewEncoder()
		for r := lo; r < hi; r++ {
			e.coefficients(rows[r*d : (r+1)*d])
			for i, v := range e.y {
				ys[i*n+r] = v
			}
		}
	})
	clips := make([]float32, k)
	errs := make([]error, k)
	parallelRows(k, k*n*64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			clips[i], errs[i] = fitClip(ys[i*n:(i+1)*n], c.bits[i])
		}
	})
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("codec: fit: component %d: %w", i, err)
		}
	}
	return clips, nil
}

// Clip search grid: multiples of the coefficients' RMS in coarse steps of
// 1/4 up to 12, then steps of 1/32 within one coarse step of the best, plus
// the largest magnitude (no clipping at all).
const (
	clipCoarseStep  = 0.25
	clipCoarseCount = 48
	clipFineStep    = 1.0 / 32
)

// fitClip returns the clip minimising the b-bit quantization MSE of ys.
// Ties go to the first candidate tried.
func fitClip(ys []float32, b uint8) (float32, error) {
	var ss float64
	var maxAbs float32
	for _, y := range ys {
		ss += float64(float64(y) * float64(y))
		maxAbs = max(maxAbs, float32(math.Abs(float64(y))))
	}
	rms := math.Sqrt(ss / float64(len(ys)))
	if rms == 0 {
		// A constant-zero coefficient: any clip reconstructs it with error
		// clip/2^b; the smallest normal float32 makes that negligible.
		return 0x1p-126, nil
	}
	best, bestM, bestErr := float32(0), 0.0, math.Inf(1)
	try := func(clip float32, m float64) {
		if !finite32(clip) || !(clip > 0) {
			return
		}
		if e := quantError(ys, b, clip); e < bestErr {
			best, bestM, bestErr = clip, m, e
		}
	}
	for t := 1; t <= clipCoarseCount; t++ {
		m := float64(t) * clipCoarseStep
		try(float32(m*rms), m)
	}
	try(maxAbs, 0)
	if bestM > 0 {
		for t := -7; t <= 7; t++ {
			if m := bestM + float64(float64(t)*clipFineStep); t != 0 && m > 0 {
				try(float32(m*rms), m)
			}
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("no finite clip for coefficients of RMS %v", rms)
	}
	return best, nil
}

// quantError is the summed squared error of quantizing ys with b bits over
// [-clip, clip], with the quantizer Encode and Decode use.
func quantError(ys []float32, b uint8, clip float32) float64 {
	q := newQuant(b, clip)
	var sum float64
	for _, y := range ys {
		e := float64(y) - float64(q.value(q.index(y)))
		sum += float64(e * e)
	}
	return sum
}

// heldout encodes and decodes each held-out row and returns the mean squared
// error and the mean squared deviation from the mean, per element. Per-row
// sums run in parallel; the totals are summed in row order.
func (c *Codec) heldout(rows []float32, n int) (mse, variance float64, err error) {
	d := c.d
	errs := make([]float64, n)
	devs := make([]float64, n)
	var mu sync.Mutex
	parallelRows(n, n*c.k*d*2, func(lo, hi int) {
		e := c.NewEncoder()
		payload := make([]byte, c.payloadBytes)
		out := make([]float32, d)
		for r := lo; r < hi; r++ {
			x := rows[r*d : (r+1)*d]
			e.encode(payload, x)
			if derr := c.decode(out, payload); derr != nil {
				mu.Lock()
				err = fmt.Errorf("codec: fit: held-out row %d: own payload rejected: %w", r, derr)
				mu.Unlock()
				return
			}
			var se, sd float64
			for j, v := range x {
				de := float64(v) - float64(out[j])
				dm := float64(v) - float64(c.mean[j])
				se += float64(de * de)
				sd += float64(dm * dm)
			}
			errs[r], devs[r] = se, sd
		}
	})
	var te, td float64
	for r := range errs {
		te += errs[r]
		td += devs[r]
	}
	total := float64(n) * float64(d)
	return te / total, td / total, err
}
