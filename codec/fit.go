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
	// Entropy entropy-codes the coefficients (format version 2): Bytes is
	// then the mean payload of a one-token frame over the held-out rows
	// (the fit rows when none are held out), and the fit
	// chooses one quantizer step for every component (scaled by its
	// sensitivity when fitted for the output) to meet it.
	Entropy bool
	// Trellis, with Entropy, trellis-codes the coefficients (docs/codec.md
	// §11.7): the same steps and budget, the cells chosen by a search over
	// a state machine, two entropy tables per component.
	Trellis bool
	// Gain sends a per-token gain (binary16, 16 bits of the budget) and
	// quantizes coefficients divided by it. Off by default: see docs/codec.md
	// for when it helps.
	Gain bool
	// Provenance is recorded in the file as given.
	Provenance Provenance
	// Sensitivity, when set, fits the codec for the model's output rather
	// than for the activations: Fit calls it once with the PCA basis, and it
	// returns each direction's sensitivity, the output distortion (KL, say)
	// per unit of squared error along it. Bits then go by reverse
	// water-filling against sensitivity x variance instead of variance
	// alone (see docs/codec.md §5.3). Weights are rounded to 8 significant
	// bits before use, so that a last-bit difference in how the caller
	// measured them cannot change the allocation, and recorded in the file.
	Sensitivity func(b Basis) ([]float64, error)
	// TokenSensitivity, with Trellis, gives the codec token classes
	// (docs/codec.md §11.8): one value per sample row, the measured
	// sensitivity of the model's output to that row's error (KL per unit
	// of squared error, eval.TokenSensitivity), or 0 where it was not
	// measured. Values are rounded to 8 significant bits before use.
	TokenSensitivity []float64
	// version1 writes a version-1 codec (tests of the old format).
	version1 bool
}

// Basis is the PCA basis a fit found, handed to FitOptions.Sensitivity.
type Basis struct {
	Width int
	// Mean is the fit rows' mean, as the codec stores it.
	Mean []float32
	// Components holds the directions with variance, by decreasing variance,
	// len(Variances) x Width row-major, each a unit vector with the codec's
	// sign convention.
	Components []float32
	// Variances are the eigenvalues: the variance along each direction.
	Variances []float64
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
	weights, err := sensitivities(vals, order, z, d, mean, opts)
	if err != nil {
		return nil, err
	}
	var bits []uint8
	if !opts.Entropy {
		bits = allocate(vals, order, d, weights, opts)
	}

	c := &Codec{d: d, gain: opts.Gain, mean: meanF32(mean), version: 2}
	if opts.Gain || opts.version1 {
		c.version = 1 // the gain is a version-1 feature
	}
	var sens []float64
	if opts.TokenSensitivity != nil {
		sens = make([]float64, nf)
		for r, v := range opts.TokenSensitivity[:nf] {
			sens[r] = roundSignificant(v, 8)
		}
	}
	if opts.Entropy {
		if err := c.fitEntropy(fitRows, nf, samples[nf*d:], nh, usableVariances(vals, order), weights, z, order, opts.Bytes, opts.Trellis, sens); err != nil {
			return nil, err
		}
	} else {
		for p, b := range bits {
			if b == 0 {
				continue
			}
			c.bits = append(c.bits, b)
			c.comps = append(c.comps, signedColumn(z, d, order[p])...)
			if weights != nil {
				c.weights = append(c.weights, float32(weights[p]))
			}
		}
		c.k = len(c.bits)
		c.buildTensors()
		if c.clips, err = fitClips(c, fitRows, nf); err != nil {
			return nil, err
		}
	}
	validate := c.validate
	if c.version >= 2 {
		validate = c.validate2
	}
	if err := validate(); err != nil {
		return nil, fmt.Errorf("codec: fit produced an invalid codec: %w", err)
	}
	c.derive()
	c.prov = opts.Provenance
	c.stats = Stats{FitSamples: uint64(nf), HoldoutSamples: uint64(nh), MeanBytes: c.stats.MeanBytes}
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
	if opts.Trellis && !opts.Entropy {
		return 0, fmt.Errorf("codec: fit: Trellis needs Entropy: a trellis-coded codec entropy-codes its cells")
	}
	if opts.TokenSensitivity != nil {
		if !opts.Trellis {
			return 0, fmt.Errorf("codec: fit: TokenSensitivity (token classes) needs Trellis")
		}
		if len(opts.TokenSensitivity) != n {
			return 0, fmt.Errorf("codec: fit: %d token sensitivities for %d sample rows", len(opts.TokenSensitivity), n)
		}
		for r, v := range opts.TokenSensitivity {
			if !finite64(v) || v < 0 {
				return 0, fmt.Errorf("codec: fit: the sensitivity of row %d is %v, want finite and >= 0 (0: not measured)", r, v)
			}
		}
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

func meanF32(mean []float64) []float32 {
	out := make([]float32, len(mean))
	for j, m := range mean {
		out[j] = float32(m)
	}
	return out
}

// usableVariances returns the eigenvalues in sorted order, with those at or
// below relVarFloor of the largest set to 0 (rounding noise).
func usableVariances(vals []float64, order []int) []float64 {
	top := math.Max(vals[order[0]], 0)
	variances := make([]float64, len(order))
	for p, i := range order {
		if v := vals[i]; v > top*relVarFloor {
			variances[p] = v
		}
	}
	return variances
}

// sensitivities calls opts.Sensitivity with the basis of directions that have
// variance and returns one weight per sorted component (0 beyond them), each
// rounded to 8 significant bits; nil without a Sensitivity.
func sensitivities(vals []float64, order []int, z []float64, d int, mean []float64, opts FitOptions) ([]float64, error) {
	if opts.Sensitivity == nil || opts.Rank > 0 {
		return nil, nil
	}
	variances := usableVariances(vals, order)
	n := 0
	for n < len(variances) && variances[n] > 0 {
		n++
	}
	b := Basis{Width: d, Mean: meanF32(mean), Variances: variances[:n], Components: make([]float32, 0, n*d)}
	for p := 0; p < n; p++ {
		b.Components = append(b.Components, signedColumn(z, d, order[p])...)
	}
	w, err := opts.Sensitivity(b)
	if err != nil {
		return nil, fmt.Errorf("codec: fit: sensitivity: %w", err)
	}
	if len(w) != n {
		return nil, fmt.Errorf("codec: fit: sensitivity returned %d weights for %d directions", len(w), n)
	}
	out := make([]float64, d)
	any := false
	for p, v := range w {
		if !finite64(v) || v < 0 {
			return nil, fmt.Errorf("codec: fit: sensitivity of direction %d is %v, want finite and >= 0", p, v)
		}
		out[p] = roundSignificant(v, 8)
		any = any || out[p] > 0
	}
	if !any {
		return nil, fmt.Errorf("codec: fit: the sensitivity of every one of the %d directions is 0: nothing is worth sending", n)
	}
	return out, nil
}

// roundSignificant rounds v > 0 to bits significant bits (ties away from
// zero); values too small to matter against float32 become 0.
func roundSignificant(v float64, bits int) float64 {
	if v == 0 {
		return 0
	}
	frac, exp := math.Frexp(v) // v = frac * 2^exp, frac in [0.5, 1)
	return math.Ldexp(math.Round(math.Ldexp(frac, bits)), exp-bits)
}

// allocate returns the bits of each component in sorted order. With weights,
// a component's distortion counts weights[p] times (its sensitivity).
func allocate(vals []float64, order []int, d int, weights []float64, opts FitOptions) []uint8 {
	if opts.Rank > 0 {
		bits := make([]uint8, d)
		for p := 0; p < opts.Rank; p++ {
			bits[p] = MaxBits
		}
		return bits
	}
	variances := usableVariances(vals, order)
	if weights != nil {
		for p := range variances {
			variances[p] *= weights[p]
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
	k := c.k
	ys := c.coefficientsByComponent(rows, n)
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

// coefficientsByComponent returns the coefficients of n rows on the kept
// components, computed exactly as the encoder computes them (normalized by
// the gain if any), transposed: element i*n + r is coefficient i of row r.
func (c *Codec) coefficientsByComponent(rows []float32, n int) []float32 {
	k, d := c.k, c.d
	ys := make([]float32, k*n)
	if c.version >= 2 {
		const chunk = 256
		xc := make([]float32, chunk*d)
		y := make([]float32, chunk*max(k, 1))
		for r0 := 0; r0 < n; r0 += chunk {
			cn := min(chunk, n-r0)
			c.projectBatch(y, xc, rows[r0*d:(r0+cn)*d], cn)
			for r := 0; r < cn; r++ {
				for i := 0; i < k; i++ {
					ys[i*n+r0+r] = y[r*k+i]
				}
			}
		}
		return ys
	}
	parallelRows(n, n*k*d, func(lo, hi int) {
		e := c.NewEncoder()
		for r := lo; r < hi; r++ {
			e.coefficients(rows[r*d : (r+1)*d])
			for i, v := range e.y {
				ys[i*n+r] = v
			}
		}
	})
	return ys
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
			var derr error
			if c.version >= 2 {
				if payload, derr = c.AppendTokens(payload[:0], x); derr == nil {
					derr = c.DecodeTokens(out, payload)
				}
			} else {
				e.encode(payload, x)
				derr = c.decode(out, payload)
			}
			if derr != nil {
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
