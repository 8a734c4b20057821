package codec

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// randSym returns a random symmetric n x n matrix B B^T / n + diag shift.
func randSym(rng *rand.Rand, n int) []float64 {
	b := make([]float64, n*n)
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	a := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for t := 0; t < n; t++ {
				s += b[i*n+t] * b[j*n+t]
			}
			a[i*n+j] = s / float64(n)
		}
	}
	return a
}

// checkEigen verifies A z_i = lambda_i z_i and Z^T Z = I for the solver's
// output on a copy of a. Tolerances: a backward-stable solver has residuals
// of order n * 2^-52 * ||A||; 1e-10 * ||A|| leaves a wide margin for n <= 200
// while still catching any real error (which would be of order ||A||).
func checkEigen(t *testing.T, a []float64, n int) []float64 {
	t.Helper()
	work := append([]float64(nil), a...)
	vals, z, err := symEigen(work, n)
	if err != nil {
		t.Fatal(err)
	}
	var norm float64
	for _, v := range a {
		norm = math.Max(norm, math.Abs(v))
	}
	norm = math.Max(norm*float64(n), 1e-300)
	for i := 0; i < n; i++ {
		for r := 0; r < n; r++ {
			var s float64
			for c := 0; c < n; c++ {
				s += a[r*n+c] * z[c*n+i]
			}
			if res := math.Abs(s - vals[i]*z[r*n+i]); res > 1e-10*norm {
				t.Fatalf("n=%d: residual %g of eigenpair %d at row %d", n, res, i, r)
			}
		}
		for j := 0; j <= i; j++ {
			var s float64
			for r := 0; r < n; r++ {
				s += z[r*n+i] * z[r*n+j]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(s-want) > 1e-12*float64(n) {
				t.Fatalf("n=%d: z_%d . z_%d = %v, want %v", n, i, j, s, want)
			}
		}
	}
	return vals
}

func TestEigenHandComputed(t *testing.T) {
	// [[2,1],[1,2]] has eigenvalues 1 and 3.
	vals := checkEigen(t, []float64{2, 1, 1, 2}, 2)
	sort.Float64s(vals)
	if math.Abs(vals[0]-1) > 1e-15 || math.Abs(vals[1]-3) > 1e-15 {
		t.Fatalf("eigenvalues %v, want [1 3]", vals)
	}
	// A diagonal matrix is its own eigendecomposition.
	vals = checkEigen(t, []float64{5, 0, 0, 0, -1, 0, 0, 0, 2}, 3)
	sort.Float64s(vals)
	if vals[0] != -1 || vals[1] != 2 || vals[2] != 5 {
		t.Fatalf("eigenvalues %v, want [-1 2 5]", vals)
	}
	// 1x1, zero and identity (fully degenerate) matrices.
	if vals := checkEigen(t, []float64{7}, 1); vals[0] != 7 {
		t.Fatalf("1x1: %v", vals)
	}
	for _, v := range checkEigen(t, make([]float64, 16), 4) {
		if v != 0 {
			t.Fatalf("zero matrix eigenvalue %v", v)
		}
	}
	id := make([]float64, 25)
	for i := 0; i < 5; i++ {
		id[i*5+i] = 1
	}
	for _, v := range checkEigen(t, id, 5) {
		if v != 1 {
			t.Fatalf("identity eigenvalue %v", v)
		}
	}
}

// TestEigenAgainstGonum compares eigenvalues with gonum's LAPACK-style
// solver, an independent implementation.
func TestEigenAgainstGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 3, 7, 16, 65, 130} {
		a := randSym(rng, n)
		vals := checkEigen(t, a, n)
		var es mat.EigenSym
		if !es.Factorize(mat.NewSymDense(n, append([]float64(nil), a...)), false) {
			t.Fatal("gonum factorization failed")
		}
		ref := es.Values(nil)
		sort.Float64s(ref)
		sort.Float64s(vals)
		for i := range ref {
			// Both solvers are backward stable: eigenvalues agree to a few
			// n * 2^-52 * ||A||, with ||A|| of order 4 here.
			if math.Abs(vals[i]-ref[i]) > 1e-11 {
				t.Fatalf("n=%d eigenvalue %d: %v, gonum %v", n, i, vals[i], ref[i])
			}
		}
	}
	// A rank-deficient matrix with clustered eigenvalues, like a covariance
	// of few samples.
	n := 40
	b := make([]float64, n*5)
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	a := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			for s := 0; s < 5; s++ {
				a[i*n+j] += b[i*5+s] * b[j*5+s]
			}
		}
	}
	checkEigen(t, a, n)

	// A steep spectrum 0.7^i in a random orthogonal basis: eigenvalues from
	// 1 down to 1e-31, far below rounding, the case of a wide model's
	// covariance with fewer samples or less rank than width.
	n = 120
	q := randSym(rng, n)
	vals, z, err := symEigen(q, n) // a random orthogonal basis
	if err != nil || len(vals) != n {
		t.Fatal(err)
	}
	a = make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			for s := 0; s < n; s++ {
				a[i*n+j] += z[i*n+s] * math.Pow(0.7, float64(s)) * z[j*n+s]
			}
		}
	}
	checkEigen(t, a, n)
}
