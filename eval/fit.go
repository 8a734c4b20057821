package eval

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
)

// DefaultHoldout is the fraction of a capture's rows held out of a fit to
// measure the codec's reconstruction error and KL divergence.
const DefaultHoldout = 0.2

// FitSpec chooses how FitCapture fits a codec. Exactly one of Bytes and Rank
// is set.
type FitSpec struct {
	Bytes int // payload budget per token (reverse water-filling)
	Rank  int // plain truncation: the Rank largest components at 8 bits
	// Holdout is the fraction of rows to hold out, rounded up to whole
	// sequences taken from the end of the capture (so that the held-out KL
	// is measured on sequences the fit never saw); 0 holds out nothing.
	Holdout float64
	Gain    bool // send a per-token gain (see docs/codec.md §4.3)
	// Output, when set, fits the codec for the model's output: each
	// direction's sensitivity is measured with this model (Sensitivity) on
	// the first OutputTokens tokens of the fit sequences, and bits go
	// against sensitivity x variance. The model must match the capture.
	Output       *model.Model
	OutputTokens int
	// Weights, when set with Output, stands in for measuring: fits of one
	// capture at several budgets share a basis, so they can share one
	// measurement (see MemoSensitivity).
	Weights func(codec.Basis) ([]float64, error)
	// Entropy entropy-codes the coefficients (codec format version 2):
	// Bytes is then the mean payload of a one-token frame on the fit rows.
	Entropy bool
	// Trellis, with Entropy, trellis-codes the coefficients
	// (docs/codec.md §11.7).
	Trellis bool
	// TokenClasses, when set (with Trellis), gives the codec token classes
	// (docs/codec.md §11.8): the sensitivity of each token of the fit
	// sequences is measured with this model (TokenSensitivity, bounded by
	// TokenSensOptions) and the codec learns to predict it. The model must
	// match the capture.
	TokenClasses     *model.Model
	TokenSensOptions TokenSensOptions
	// TokenSens, when set with TokenClasses, stands in for measuring: one
	// value per capture row, 0 where not measured (fits of one capture at
	// several budgets can share one measurement: FitTokenSens).
	TokenSens []float64
	// Progress hears how the token sensitivity's probes advance.
	Progress Progress
}

// DefaultOutputTokens is how many calibration tokens the sensitivity of an
// output fit is measured on.
const DefaultOutputTokens = 2048

// Split is a capture's division into fit and held-out sequences.
type Split struct {
	FitRows  int     // rows of the leading sequences, which the codec is fitted on
	Held     [][]int // the trailing sequences held out
	HeldRows int
}

// SplitHoldout holds out the fewest trailing sequences whose rows make at
// least frac of the capture, keeping at least one sequence and two rows to
// fit on.
func SplitHoldout(seqs [][]int, frac float64) (Split, error) {
	if !(frac >= 0 && frac < 1) {
		return Split{}, fmt.Errorf("holdout fraction %v outside [0, 1)", frac)
	}
	n := CountTokens(seqs)
	want := int(math.Ceil(frac * float64(n)))
	held, k := 0, len(seqs)
	for held < want && k > 0 {
		k--
		held += len(seqs[k])
	}
	if k == 0 || n-held < 2 {
		return Split{}, fmt.Errorf("holding out %.0f%% of %d rows leaves %d sequences, %d rows to fit on: capture more data or lower the holdout", 100*frac, n, k, n-held)
	}
	return Split{FitRows: n - held, Held: seqs[k:], HeldRows: held}, nil
}

// holdoutFraction is a fraction h for codec.FitOptions.Holdout such that
// floor(n*h), the row count Fit holds out, is exactly r.
func holdoutFraction(n, r int) (float64, error) {
	if r == 0 {
		return 0, nil
	}
	h := float64(r) / float64(n)
	// n*h is within an ulp or two of r; step h up until the product's floor is r.
	for range 8 {
		if int(math.Floor(float64(n)*h)) == r {
			return h, nil
		}
		h = math.Nextafter(h, 1)
	}
	return 0, fmt.Errorf("no holdout fraction holds out exactly %d of %d rows", r, n)
}

// FitCapture fits a codec to a capture: on the rows of its leading sequences,
// holding out trailing ones as spec.Holdout asks (the codec's held-out MSE is
// measured on them). Provenance is the capture's model, boundary and
// calibration-data digest. The result is a deterministic function of the
// capture and spec.
func FitCapture(c *CaptureFile, spec FitSpec) (*codec.Codec, Split, error) {
	sp, err := SplitHoldout(c.Seqs, spec.Holdout)
	if err != nil {
		return nil, sp, fmt.Errorf("fit: %w", err)
	}
	n := c.N()
	h, err := holdoutFraction(n, sp.HeldRows)
	if err != nil {
		return nil, sp, fmt.Errorf("fit: %w", err)
	}
	opts := codec.FitOptions{
		Bytes: spec.Bytes, Rank: spec.Rank, Holdout: h, Gain: spec.Gain, Entropy: spec.Entropy, Trellis: spec.Trellis,
		Provenance: codec.Provenance{Model: c.Model, Boundary: uint32(c.Boundary), CalibData: c.CalibDigest()},
	}
	if spec.Output != nil {
		if err := checkCaptureModel(spec.Output, c); err != nil {
			return nil, sp, fmt.Errorf("fit for the output: %w", err)
		}
		tokens := spec.OutputTokens
		if tokens <= 0 {
			tokens = DefaultOutputTokens
		}
		probeSeqs := Truncate(c.Seqs[:len(c.Seqs)-len(sp.Held)], tokens)
		opts.Sensitivity = func(b codec.Basis) ([]float64, error) {
			return Sensitivity(spec.Output, probeSeqs, c.Boundary, b, nil)
		}
		if spec.Weights != nil {
			opts.Sensitivity = spec.Weights
		}
	}
	if spec.TokenClasses != nil {
		if !spec.Trellis {
			return nil, sp, errors.New("fit: token classes need the trellis-coded scheme")
		}
		sens := spec.TokenSens
		if sens == nil {
			if sens, err = FitTokenSens(spec.TokenClasses, c, sp, spec.TokenSensOptions, spec.Progress); err != nil {
				return nil, sp, err
			}
		}
		if len(sens) != n {
			return nil, sp, fmt.Errorf("fit: %d token sensitivities for a capture of %d rows", len(sens), n)
		}
		opts.TokenSensitivity = sens
	}
	cd, err := codec.Fit(c.Rows, n, c.Width, opts)
	if err != nil {
		return nil, sp, err
	}
	return cd, sp, nil
}

// FitTokenSens measures the token sensitivity (TokenSensitivity) of a
// capture's fit sequences with m, as FitCapture does for token classes:
// one value per capture row, 0 for the held-out rows and the rows past the
// probed positions.
func FitTokenSens(m *model.Model, c *CaptureFile, sp Split, opts TokenSensOptions, progress Progress) ([]float64, error) {
	if err := checkCaptureModel(m, c); err != nil {
		return nil, fmt.Errorf("token classes: %w", err)
	}
	sens, err := TokenSensitivity(m, c.Seqs[:len(c.Seqs)-len(sp.Held)], c.Boundary, opts, progress)
	if err != nil {
		return nil, err
	}
	return append(sens, make([]float64, sp.HeldRows)...), nil
}

// MemoSensitivity returns a FitSpec.Weights that measures the sensitivity
// of the first basis it is given with measure and returns that for every
// later call: for fits of one capture with one holdout, whose bases are the
// same.
func MemoSensitivity(measure func(codec.Basis) ([]float64, error)) func(codec.Basis) ([]float64, error) {
	var w []float64
	var err error
	done := false
	return func(b codec.Basis) ([]float64, error) {
		if !done {
			w, err = measure(b)
			done = true
		}
		return slices.Clone(w), err
	}
}

// HeldoutKL measures the mean KL divergence a codec causes on held-out
// sequences (see Compare), clamped at 0: float rounding can leave a sum of
// zero terms a hair below 0.
func HeldoutKL(m *model.Model, held [][]int, boundary int, c *codec.Codec) (float64, error) {
	if len(held) == 0 {
		return 0, errors.New("held-out KL: no held-out sequences (set a holdout fraction)")
	}
	rep, err := Compare(m, held, boundary, []wire.Encoding{codec.NewWire(c)}, nil)
	if err != nil {
		return 0, fmt.Errorf("held-out KL: %w", err)
	}
	return max(rep.Results[0].KL, 0), nil
}

// FitMeasured fits a codec with FitCapture and, when m is not nil, measures
// its held-out KL with the model and records it in the codec.
func FitMeasured(m *model.Model, c *CaptureFile, spec FitSpec) (*codec.Codec, error) {
	cd, sp, err := FitCapture(c, spec)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return cd, nil
	}
	if err := checkCaptureModel(m, c); err != nil {
		return nil, err
	}
	kl, err := HeldoutKL(m, sp.Held, c.Boundary, cd)
	if err != nil {
		return nil, err
	}
	if err := cd.SetHeldoutKL(kl); err != nil {
		return nil, err
	}
	return cd, nil
}

// checkCaptureModel checks that the model's shape fits the capture; the
// caller checks the identity digest, which needs the loader.
func checkCaptureModel(m *model.Model, c *CaptureFile) error {
	cfg := m.Config()
	if cfg.Dim != c.Width {
		return fmt.Errorf("the capture has width %d, the model %d", c.Width, cfg.Dim)
	}
	return checkBoundary(m, c.Boundary)
}

// Trial is one budget tried by SearchKL.
type Trial struct {
	Bytes        int     // budget asked for
	PayloadBytes int     // payload the fit gave (smaller when every component is full)
	KL           float64 // held-out KL
}

// SearchKL finds the smallest byte budget whose codec keeps the held-out KL
// strictly below target, by bisection over 1..(width + gain bytes): it
// assumes the KL falls as the budget grows, which water-filling makes true
// up to measurement noise; the codec returned was always measured below the
// target. The codec comes with its held-out KL recorded. trials lists every
// budget tried, in order.
func SearchKL(m *model.Model, c *CaptureFile, target float64, spec FitSpec, progress func(Trial)) (*codec.Codec, []Trial, error) {
	if !(target > 0) || math.IsInf(target, 0) {
		return nil, nil, fmt.Errorf("target KL %v: want a finite value above 0", target)
	}
	if spec.Holdout <= 0 {
		return nil, nil, errors.New("target KL: the search measures KL on held-out sequences; set a holdout fraction above 0")
	}
	if err := checkCaptureModel(m, c); err != nil {
		return nil, nil, err
	}
	var trials []Trial
	best := map[int]*codec.Codec{}
	try := func(b int) (bool, error) {
		s := spec
		s.Bytes, s.Rank = b, 0
		cd, err := FitMeasured(m, c, s)
		if err != nil {
			return false, fmt.Errorf("budget %d bytes: %w", b, err)
		}
		t := Trial{Bytes: b, PayloadBytes: cd.PayloadBytes(), KL: cd.Stats().HeldoutKL}
		trials = append(trials, t)
		if progress != nil {
			progress(t)
		}
		if t.KL < target {
			best[b] = cd
			return true, nil
		}
		return false, nil
	}
	hi := c.Width // 8 bits for every component
	if spec.Gain {
		hi += codec.GainBits / 8
	}
	ok, err := try(hi)
	if err != nil {
		return nil, trials, err
	}
	if !ok {
		return nil, trials, fmt.Errorf("target KL %g is out of reach: the largest budget, %d bytes per token (8 bits for every component), gives held-out KL %.4g", target, hi, trials[0].KL)
	}
	// Invariant: budgets <= lo failed or carry no coefficient bits (0 bytes,
	// or only the gain), hi passed.
	lo := 0
	if spec.Gain {
		lo = codec.GainBits / 8
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := try(mid)
		if err != nil {
			return nil, trials, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return best[hi], trials, nil
}
