package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/seamlm/seam/codec/entropy"
)

// Token classes (docs/codec.md §11.8). How much the model's output cares
// about a token's error varies a hundredfold from token to token (tokens
// whose next-token distribution is confident barely care), so a
// trellis-coded codec may give each token one of a few step multipliers:
// the encoder predicts the token's sensitivity from its own coefficients
// (a score linear in the first coefficients and their squares), the score
// picks a class, the class is coded first in the token's stream, and the
// token's cells follow at the class's steps with the class's tables. The
// fit measures the sensitivity of calibration tokens with the model
// (FitOptions.TokenSensitivity, eval.TokenSensitivity), fits the score to
// its logarithm, and sets each class's multiplier from the class's mean.

const (
	// fitClasses is how many classes a fit makes (quartiles of the score);
	// a file may hold 2 to maxClasses.
	fitClasses = 4
	maxClasses = 8
	// classLinear and classSquares bound the coefficients the score weighs
	// (the first ones: the directions of largest variance).
	classLinear  = 64
	classSquares = 16
	// classAlpha is how far the steps follow the measured sensitivity: a
	// class whose mean log-sensitivity is Δ above the mean gets steps
	// exp(-classAlpha Δ / 2) times the base. Quantization theory at high
	// rate says 1; measured on stories260K's boundary 4 at 25 bytes, 1 made
	// the KL 1.6x worse (steps that coarse leave the quadratic regime the
	// sensitivity is measured in) and 0.3 to 0.6 were best.
	classAlpha = 0.4
	// classRidge regularizes the score's fit: each feature's own term of
	// the normal equations is raised by this fraction of itself.
	classRidge = 1e-3
)

// tokenClasses is a codec's class predictor and per-class multipliers.
type tokenClasses struct {
	lin    []float64 // weights of the first len(lin) coefficients
	sq     []float64 // weights of the squares of the first len(sq)
	bias   float64
	bounds []float64 // n-1, non-decreasing: a token's class counts the bounds <= its score
	mults  []float32 // n step multipliers, finite and > 0
	table  *entropy.Table
}

// classStep is a class's step for a component: the base step times the
// class's multiplier, rounded to float32 (1 without token classes: the
// base step itself).
func classStep(base, mult float32) float32 { return float32(base * mult) }

// n is the number of classes.
func (t *tokenClasses) n() int { return len(t.mults) }

// score is the predicted log-sensitivity of a token with coefficients y,
// summed in float64 in a fixed order (each product explicitly rounded, so
// no machine fuses it into a multiply-add): the same on every machine.
func (t *tokenClasses) score(y []float32) float64 {
	s := t.bias
	for i, w := range t.lin {
		s += float64(w * float64(y[i]))
	}
	for i, w := range t.sq {
		v := float64(y[i])
		s += float64(w * float64(v*v))
	}
	return s
}

// classOf is the class of a token with coefficients y. A NaN score (from a
// NaN input) is class 0.
func (t *tokenClasses) classOf(y []float32) int { return t.classOfScore(t.score(y)) }

// classOfScore is the class of a score: the number of bounds at most it.
func (t *tokenClasses) classOfScore(s float64) int {
	c := 0
	for c < len(t.bounds) && s >= t.bounds[c] {
		c++
	}
	return c
}

// classesSize is the bytes of the class block of a file: three u32 counts,
// the score's float64 weights and bias, the bounds and the multipliers.
func classesSize(n, lin, sq int) int { return 12 + 8*(lin+sq+1) + 8*(n-1) + 4*n }

// maxClassesSize bounds the class block for k components.
func maxClassesSize(k int) int {
	return classesSize(maxClasses, min(k, classLinear), min(k, classSquares))
}

// appendBinary serializes the class block (docs/codec.md §11.2).
func (t *tokenClasses) appendBinary(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(t.n()))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(t.lin)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(t.sq)))
	for _, group := range [][]float64{t.lin, t.sq, {t.bias}, t.bounds} {
		for _, v := range group {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return appendF32s(b, t.mults)
}

// readClasses parses and checks the class block at b[off:] of a codec with
// k components.
func readClasses(b []byte, off, k int) (*tokenClasses, int, error) {
	if len(b)-off < 12 {
		return nil, 0, fmt.Errorf("codec: class block truncated at byte %d", off)
	}
	n := int(binary.LittleEndian.Uint32(b[off:]))
	lin := int(binary.LittleEndian.Uint32(b[off+4:]))
	sq := int(binary.LittleEndian.Uint32(b[off+8:]))
	if n < 2 || n > maxClasses {
		return nil, 0, fmt.Errorf("codec: %d token classes, want 2 to %d", n, maxClasses)
	}
	if lin < 1 || lin > min(k, classLinear) {
		return nil, 0, fmt.Errorf("codec: the class score weighs %d coefficients, want 1 to %d", lin, min(k, classLinear))
	}
	if sq > min(k, classSquares) {
		return nil, 0, fmt.Errorf("codec: the class score weighs %d squares, want 0 to %d", sq, min(k, classSquares))
	}
	if len(b)-off < classesSize(n, lin, sq) {
		return nil, 0, fmt.Errorf("codec: class block of %d classes truncated at byte %d", n, off)
	}
	off += 12
	f64s := func(name string, count int) ([]float64, error) {
		out := make([]float64, count)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[off:]))
			off += 8
			if !finite64(out[i]) {
				return nil, fmt.Errorf("codec: class %s[%d]=%v is not finite", name, i, out[i])
			}
		}
		return out, nil
	}
	t := &tokenClasses{}
	var err error
	var bias []float64
	if t.lin, err = f64s("linear weight", lin); err != nil {
		return nil, 0, err
	}
	if t.sq, err = f64s("square weight", sq); err != nil {
		return nil, 0, err
	}
	if bias, err = f64s("bias", 1); err != nil {
		return nil, 0, err
	}
	t.bias = bias[0]
	if t.bounds, err = f64s("bound", n-1); err != nil {
		return nil, 0, err
	}
	for i := 1; i < len(t.bounds); i++ {
		if t.bounds[i] < t.bounds[i-1] {
			return nil, 0, fmt.Errorf("codec: class bounds[%d]=%v is below bounds[%d]=%v; they must not decrease", i, t.bounds[i], i-1, t.bounds[i-1])
		}
	}
	t.mults, off = readF32s(b, off, n)
	for i, m := range t.mults {
		if !finite32(m) || !(m > 0) {
			return nil, 0, fmt.Errorf("codec: class multiplier[%d]=%v is not finite and positive", i, m)
		}
	}
	return t, off, nil
}

// fitTokenClasses fits the score to the log-sensitivities of the measured
// fit rows (sens[r] > 0) over the kept directions' coefficients ys
// (component-major, n rows), by ridge least squares in float64; splits the
// rows into fitClasses classes at the quantiles of their scores; and sets
// each class's multiplier from the mean log-sensitivity of its measured
// rows, rounded to 8 significant bits. It returns the classes and each fit
// row's class.
func fitTokenClasses(ys []float32, n int, kept []int, sens []float64) (*tokenClasses, []uint8, error) {
	lin, sq := min(len(kept), classLinear), min(len(kept), classSquares)
	p := lin + sq + 1
	feat := make([]float64, p)
	features := func(r int) {
		for i := 0; i < lin; i++ {
			feat[i] = float64(ys[kept[i]*n+r])
		}
		for i := 0; i < sq; i++ {
			v := float64(ys[kept[i]*n+r])
			feat[lin+i] = float64(v * v)
		}
		feat[p-1] = 1
	}
	// Normal equations, augmented with the right-hand side.
	a := make([]float64, p*(p+1))
	measured := 0
	var sumLog float64
	for r := 0; r < n; r++ {
		if !(sens[r] > 0) {
			continue
		}
		features(r)
		l := math.Log(sens[r])
		for i := 0; i < p; i++ {
			for j := 0; j <= i; j++ {
				a[i*(p+1)+j] += float64(feat[i] * feat[j])
			}
			a[i*(p+1)+p] += float64(feat[i] * l)
		}
		measured++
		sumLog += l
	}
	if measured < 4*p {
		return nil, nil, fmt.Errorf("codec: fit: token classes need the sensitivity of at least %d fit rows (4 per score weight), got %d", 4*p, measured)
	}
	for i := 0; i < p; i++ {
		for j := 0; j < i; j++ {
			a[j*(p+1)+i] = a[i*(p+1)+j]
		}
		a[i*(p+1)+i] += classRidge * a[i*(p+1)+i]
	}
	w, err := solve(a, p)
	if err != nil {
		return nil, nil, fmt.Errorf("codec: fit: token class score: %w", err)
	}
	t := &tokenClasses{lin: w[:lin], sq: w[lin : lin+sq], bias: w[p-1]}
	// The scores of every fit row; bounds at their quantiles.
	y := make([]float32, lin)
	scores := make([]float64, n)
	for r := 0; r < n; r++ {
		for i := range y {
			y[i] = ys[kept[i]*n+r]
		}
		scores[r] = t.score(y)
	}
	sorted := append([]float64(nil), scores...)
	sort.Float64s(sorted)
	t.bounds = make([]float64, fitClasses-1)
	for c := range t.bounds {
		t.bounds[c] = sorted[(c+1)*n/fitClasses]
	}
	classes := make([]uint8, n)
	logSum, count := make([]float64, fitClasses), make([]int, fitClasses)
	for r := 0; r < n; r++ {
		c := t.classOfScore(scores[r])
		classes[r] = uint8(c)
		if sens[r] > 0 {
			logSum[c] += math.Log(sens[r])
			count[c]++
		}
	}
	mean := sumLog / float64(measured)
	t.mults = make([]float32, fitClasses)
	for c := range t.mults {
		t.mults[c] = 1
		if count[c] > 0 {
			m := logSum[c] / float64(count[c])
			t.mults[c] = float32(roundSignificant(math.Exp(-classAlpha/2*(m-mean)), 8))
		}
	}
	return t, classes, nil
}

// solve solves the p x p system a (row-major, augmented with the right-hand
// side as column p) by Gaussian elimination with partial pivoting, in
// place: the same steps, so the same result, on every machine.
func solve(a []float64, p int) ([]float64, error) {
	at := func(i, j int) *float64 { return &a[i*(p+1)+j] }
	for col := 0; col < p; col++ {
		piv := col
		for r := col + 1; r < p; r++ {
			if math.Abs(*at(r, col)) > math.Abs(*at(piv, col)) {
				piv = r
			}
		}
		if !(math.Abs(*at(piv, col)) > 0) {
			return nil, fmt.Errorf("singular system at column %d", col)
		}
		if piv != col {
			for j := 0; j <= p; j++ {
				*at(col, j), *at(piv, j) = *at(piv, j), *at(col, j)
			}
		}
		for r := col + 1; r < p; r++ {
			f := *at(r, col) / *at(col, col)
			for j := col; j <= p; j++ {
				*at(r, j) -= float64(f * *at(col, j))
			}
		}
	}
	x := make([]float64, p)
	for i := p - 1; i >= 0; i-- {
		s := *at(i, p)
		for j := i + 1; j < p; j++ {
			s -= float64(*at(i, j) * x[j])
		}
		x[i] = s / *at(i, i)
		if !finite64(x[i]) {
			return nil, fmt.Errorf("weight %d is %v", i, x[i])
		}
	}
	return x, nil
}
