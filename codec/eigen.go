package codec

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// symEigen computes all eigenvalues and eigenvectors of the symmetric n x n
// matrix a (row-major, both triangles filled; destroyed). It returns the
// eigenvalues in no particular order and z, row-major, whose column i is the
// unit eigenvector of eigenvalue i.
//
// The method is Householder reduction to tridiagonal form followed by the
// implicit QL algorithm with Wilkinson-type shifts. It is written here rather
// than taken from a BLAS-backed library so that the result is bit-identical
// on every machine: every sum runs in a fixed order, no multiply-add can be
// fused (explicit float64 conversions), and the only library function used is
// math.Sqrt, which IEEE 754 requires to be correctly rounded. Goroutines only
// split independent rows or columns, never a sum.
func symEigen(a []float64, n int) (vals []float64, z []float64, err error) {
	if len(a) != n*n {
		return nil, nil, fmt.Errorf("eigen: matrix has %d values, %d x %d needs %d", len(a), n, n, n*n)
	}
	diag, off, taus := tridiagonalize(a, n)
	z = make([]float64, n*n)
	accumulate(z, a, taus, n)
	if err := tridiagonalQL(diag, off, z, n); err != nil {
		return nil, nil, err
	}
	return diag, z, nil
}

// tridiagonalize reduces a to tridiagonal form T = Q^T A Q by Householder
// reflections H_k = I - tau_k v_k v_k^T, k = 0..n-3, where v_k is zero in
// positions 0..k and is stored in row k of a, positions k+1..n-1. It returns
// T's diagonal, its off-diagonal (off[i] couples i and i+1; off[n-1] = 0)
// and the taus.
func tridiagonalize(a []float64, n int) (diag, off, taus []float64) {
	diag = make([]float64, n)
	off = make([]float64, n)
	taus = make([]float64, n)
	p := make([]float64, n)
	for k := 0; k+2 < n; k++ {
		x := a[k*n+k+1 : k*n+n] // row k right of the diagonal = column k below it
		var norm2 float64
		for _, v := range x {
			norm2 += float64(v * v)
		}
		if norm2 == 0 {
			continue // already reduced; H_k = I (tau 0)
		}
		norm := math.Sqrt(norm2)
		alpha := -math.Copysign(norm, x[0])
		tau := 1 / (norm2 - float64(alpha*x[0]))
		x[0] -= alpha // x is now v_k
		off[k] = alpha
		taus[k] = tau
		reflectTrailing(a, n, k+1, x, tau, p[k+1:])
	}
	for i := 0; i < n; i++ {
		diag[i] = a[i*n+i]
	}
	if n >= 2 {
		off[n-2] = a[(n-1)*n+n-2]
	}
	return diag, off, taus
}

// reflectTrailing applies A22 <- H A22 H on the trailing block starting at
// row and column s, with H = I - tau v v^T:
// p = tau A22 v, w = p - (tau/2)(p.v) v, A22 -= v w^T + w v^T.
// Both triangles are updated (rows are contiguous that way); the update is
// exactly symmetric because a*b + c*d and d*c + b*a round alike.
func reflectTrailing(a []float64, n, s int, v []float64, tau float64, p []float64) {
	m := n - s
	parallelRows(m, m*m, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := a[(s+i)*n+s : (s+i)*n+n]
			var sum float64
			for j, vj := range v {
				sum += float64(row[j] * vj)
			}
			p[i] = float64(tau * sum)
		}
	})
	var pv float64
	for i, vi := range v {
		pv += float64(p[i] * vi)
	}
	kk := float64(0.5*tau) * pv
	for i, vi := range v {
		p[i] -= float64(kk * vi) // p becomes w
	}
	parallelRows(m, m*m, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := a[(s+i)*n+s : (s+i)*n+n]
			vi, wi := v[i], p[i]
			w := p[:len(row)]
			vv := v[:len(row)]
			for j := range row {
				row[j] -= float64(vi*w[j]) + float64(wi*vv[j])
			}
		}
	})
}

// accumulate forms Q = H_0 H_1 ... H_{n-3} in z by applying the reflections
// in reverse order to the identity. H_k only touches rows and columns
// k+1..n-1, where Q is still the identity outside the block already formed.
func accumulate(z, a, taus []float64, n int) {
	for i := 0; i < n; i++ {
		z[i*n+i] = 1
	}
	r := make([]float64, n)
	for k := n - 3; k >= 0; k-- {
		tau := taus[k]
		if tau == 0 {
			continue
		}
		s := k + 1
		v := a[k*n+s : k*n+n]
		m := n - s
		// Columns are independent: r_j = sum_i v_i Q[i][j] in row order i,
		// then Q[i][j] -= tau v_i r_j.
		parallelRows(m, m*m, func(lo, hi int) {
			rr := r[lo:hi]
			for j := range rr {
				rr[j] = 0
			}
			for i, vi := range v {
				row := z[(s+i)*n+s+lo : (s+i)*n+s+hi]
				for j := range rr {
					rr[j] += float64(vi * row[j])
				}
			}
			for i, vi := range v {
				tv := float64(tau * vi)
				row := z[(s+i)*n+s+lo : (s+i)*n+s+hi]
				for j := range rr {
					row[j] -= float64(tv * rr[j])
				}
			}
		})
	}
}

// qlIterationsPerValue bounds the total number of QL iterations at this
// many per eigenvalue (as LAPACK does); the method converges cubically and
// typically needs one or two per eigenvalue.
const qlIterationsPerValue = 30

// tridiagonalQL diagonalizes the symmetric tridiagonal matrix (diag, off) by
// implicit QL iterations, leaving the eigenvalues in diag and applying every
// plane rotation to the columns of z.
func tridiagonalQL(diag, off, z []float64, n int) error {
	cs := make([]float64, n)
	sn := make([]float64, n)
	// An off-diagonal entry is negligible when it is below rounding either
	// relative to its neighbours on the diagonal or relative to the matrix
	// norm. The second test is what a backward-stable method can promise
	// anyway, and spares many iterations on clusters of eigenvalues near
	// zero (a covariance of rank below d).
	var norm float64
	for i := range diag {
		norm = math.Max(norm, math.Abs(diag[i])+math.Abs(off[i]))
	}
	tiny := float64(0x1p-52 * norm)
	budget := qlIterationsPerValue * n
	for l := 0; l < n; l++ {
		for {
			m := l
			for ; m < n-1; m++ {
				dd := math.Abs(diag[m]) + math.Abs(diag[m+1])
				if e := math.Abs(off[m]); e+dd == dd || e <= tiny {
					break
				}
			}
			if m == l {
				break
			}
			if budget == 0 {
				return fmt.Errorf("eigen: QL did not converge within %d iterations (at eigenvalue %d of %d)", qlIterationsPerValue*n, l, n)
			}
			budget--
			first := qlSweep(diag, off, cs, sn, l, m)
			applyRotations(z, n, cs, sn, first, m)
		}
	}
	return nil
}

// qlSweep performs one implicit shifted QL step on the unreduced block l..m,
// recording the rotation of columns (i, i+1) as cs[i], sn[i] for
// i = m-1 down to the returned index.
func qlSweep(diag, off, cs, sn []float64, l, m int) int {
	// Wilkinson-type shift from the leading 2x2 block.
	g := (diag[l+1] - diag[l]) / float64(2*off[l])
	r := hypot(g, 1)
	g = diag[m] - diag[l] + off[l]/(g+math.Copysign(r, g))
	s, c, p := 1.0, 1.0, 0.0
	for i := m - 1; i >= l; i-- {
		f := float64(s * off[i])
		b := float64(c * off[i])
		r = hypot(f, g)
		off[i+1] = r
		if r == 0 {
			// Underflow: the block splits at i+1; undo the partial shift.
			diag[i+1] -= p
			off[m] = 0
			return i + 1
		}
		s = f / r
		c = g / r
		g = diag[i+1] - p
		r = float64((diag[i]-g)*s) + float64(2*float64(c*b))
		p = float64(s * r)
		diag[i+1] = g + p
		g = float64(c*r) - b
		cs[i], sn[i] = c, s
	}
	diag[l] -= p
	off[l] = g
	off[m] = 0
	return l
}

// applyRotations applies the rotations of one QL step to every row of z:
// for i = m-1 down to first, (z[.][i], z[.][i+1]) <- (c z_i - s z_i+1,
// s z_i + c z_i+1). Rows are independent.
func applyRotations(z []float64, n int, cs, sn []float64, first, m int) {
	if first >= m {
		return
	}
	parallelRows(n, n*(m-first), func(lo, hi int) {
		k := lo
		// Each row's rotations form a dependency chain; four rows at a time
		// overlap their latencies.
		for ; k+4 <= hi; k += 4 {
			rotateRows4(z[k*n:(k+4)*n], n, cs, sn, first, m)
		}
		for ; k < hi; k++ {
			row := z[k*n : (k+1)*n]
			for i := m - 1; i >= first; i-- {
				c, s := cs[i], sn[i]
				f := row[i+1]
				row[i+1] = float64(s*row[i]) + float64(c*f)
				row[i] = float64(c*row[i]) - float64(s*f)
			}
		}
	})
}

// rotateRows4 is applyRotations' inner loop on four consecutive rows, with
// the same operations in the same order per row.
func rotateRows4(rows []float64, n int, cs, sn []float64, first, m int) {
	r0, r1, r2, r3 := rows[:n], rows[n:2*n], rows[2*n:3*n], rows[3*n:4*n]
	f0, f1, f2, f3 := r0[m], r1[m], r2[m], r3[m]
	for i := m - 1; i >= first; i-- {
		c, s := cs[i], sn[i]
		a0, a1, a2, a3 := r0[i], r1[i], r2[i], r3[i]
		r0[i+1] = float64(s*a0) + float64(c*f0)
		r1[i+1] = float64(s*a1) + float64(c*f1)
		r2[i+1] = float64(s*a2) + float64(c*f2)
		r3[i+1] = float64(s*a3) + float64(c*f3)
		f0 = float64(c*a0) - float64(s*f0)
		f1 = float64(c*a1) - float64(s*f1)
		f2 = float64(c*a2) - float64(s*f2)
		f3 = float64(c*a3) - float64(s*f3)
	}
	r0[first], r1[first], r2[first], r3[first] = f0, f1, f2, f3
}

// hypot is sqrt(a^2 + b^2) without overflow, from IEEE-exact operations only
// (math.Hypot may be an assembly routine whose rounding differs by platform).
func hypot(a, b float64) float64 {
	a, b = math.Abs(a), math.Abs(b)
	if a < b {
		a, b = b, a
	}
	if a == 0 {
		return 0
	}
	t := b / a
	return a * math.Sqrt(1+float64(t*t))
}

// parallelMinWork is the work (inner-loop iterations) below which a loop
// runs on the calling goroutine: spawning costs more than it saves.
const parallelMinWork = 1 << 16

// parallelRows runs fn over [0, n) split into contiguous ranges, one per
// CPU, when the total work is large enough. fn must write disjoint data per
// index.
func parallelRows(n, work int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	if workers <= 1 || work < parallelMinWork {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
