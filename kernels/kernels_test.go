package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/seamlm/seam/tensor"
)

var allTypes = []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K, tensor.Q8G}

// groupSizes lists the Q8G group sizes to try: one that straddles rows and
// two that the fused SIMD kernel accepts. Other types have no groups.
func groupSizes(typ tensor.DType) []int {
	if typ == tensor.Q8G {
		return []int{5, 32, 64}
	}
	return []int{0}
}

// shapeOK reports whether cols is a whole number of blocks of typ.
func shapeOK(typ tensor.DType, cols int) bool { return cols%typ.BlockElems() == 0 }

func dequant(w *tensor.Tensor, r int) []float32 {
	d := make([]float32, w.Cols)
	DequantRow(d, w, r)
	return d
}

// withSIMD runs f with the SIMD level lowered to level (tests are not parallel).
func withSIMD(level int, f func()) {
	saved := simdLevel
	simdLevel = level
	defer func() { simdLevel = saved }()
	f()
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// Hand-built blocks, with a few elements worked out by hand from the format.

func TestDequantQ8_0ByHand(t *testing.T) {
	blk := make([]byte, 34)
	binary.LittleEndian.PutUint16(blk, 0x3800) // d = 0.5
	blk[2] = 0x80                              // q0 = -128 -> -64
	blk[3] = 0x7f                              // q1 = 127 -> 63.5
	blk[33] = 0xfd                             // q31 = -3 -> -1.5
	w := &tensor.Tensor{Type: tensor.Q8_0, Rows: 1, Cols: 32, Data: blk}
	got := dequant(w, 0)
	for e, want := range map[int]float32{0: -64, 1: 63.5, 2: 0, 31: -1.5} {
		if got[e] != want {
			t.Errorf("element %d = %v, want %v", e, got[e], want)
		}
	}
	checkAgainstRef(t, w)
}

func TestDequantQ4_0ByHand(t *testing.T) {
	blk := make([]byte, 18)
	binary.LittleEndian.PutUint16(blk, 0x4000) // d = 2
	blk[2] = 0x1f                              // element 0: 15-8 = 7 -> 14; element 16: 1-8 -> -14
	blk[17] = 0x80                             // element 15: 0-8 -> -16; element 31: 8-8 -> 0
	w := &tensor.Tensor{Type: tensor.Q4_0, Rows: 1, Cols: 32, Data: blk}
	got := dequant(w, 0)
	for e, want := range map[int]float32{0: 14, 16: -14, 15: -16, 31: 0, 1: -16} {
		if got[e] != want {
			t.Errorf("element %d = %v, want %v", e, got[e], want)
		}
	}
	checkAgainstRef(t, w)
}

func TestDequantQ4_KByHand(t *testing.T) {
	blk := make([]byte, 144)
	binary.LittleEndian.PutUint16(blk[0:], 0x3c00) // d = 1
	binary.LittleEndian.PutUint16(blk[2:], 0x3800) // dmin = 0.5
	sc := blk[4:16]
	sc[0] = 0xc3 // scale 0 = 3; top bits 3 become bits 4-5 of scale 4
	sc[4] = 0x41 // min 0 = 1; top bits 1 become bits 4-5 of min 4
	sc[8] = 0x52 // scale 4 low bits 2 -> 2 | 3<<4 = 50; min 4 low bits 5 -> 5 | 1<<4 = 21
	sc[1] = 0x02 // scale 1 = 2, min 1 = 0
	qs := blk[16:]
	qs[0] = 0x9a // element 0: low nibble 10, sub-block 0: 1*3*10 - 0.5*1 = 29.5
	// element 32: high nibble 9, sub-block 1: 1*2*9 - 0 = 18
	qs[64] = 0x07 // element 128: low nibble 7, sub-block 4: 1*50*7 - 0.5*21 = 339.5
	w := &tensor.Tensor{Type: tensor.Q4_K, Rows: 1, Cols: 256, Data: blk}
	got := dequant(w, 0)
	for e, want := range map[int]float32{0: 29.5, 32: 18, 128: 339.5, 129: -10.5, 1: -0.5} {
		if got[e] != want {
			t.Errorf("element %d = %v, want %v", e, got[e], want)
		}
	}
	checkAgainstRef(t, w)
}

func TestDequantQ6_KByHand(t *testing.T) {
	blk := make([]byte, 210)
	binary.LittleEndian.PutUint16(blk[208:], 0x3400) // d = 0.25
	sc := blk[192:208]
	sc[0], sc[2], sc[4], sc[6] = 0xfd, 1, 2, 7 // -3, 1, 2, 7
	blk[0] = 0x5c                              // ql[0]: low 12 (element 0), high 5 (element 64)
	blk[32] = 0x30                             // ql[32]: low 0 (element 32), high 3 (element 96)
	blk[128] = 0x9e                            // qh[0] = 10 01 11 10: bits for elements 96, 64, 32, 0
	// element 0:  12 | 2<<4 = 44 -> 12, scale -3: 0.25*-3*12 = -9
	// element 32:  0 | 3<<4 = 48 -> 16, scale  1: 0.25*1*16 = 4
	// element 64:  5 | 1<<4 = 21 -> -11, scale 2: 0.25*2*-11 = -5.5
	// element 96:  3 | 2<<4 = 35 -> 3,  scale  7: 0.25*7*3 = 5.25
	// element 1: 0 -> -32, scale -3: 24
	w := &tensor.Tensor{Type: tensor.Q6_K, Rows: 1, Cols: 256, Data: blk}
	got := dequant(w, 0)
	for e, want := range map[int]float32{0: -9, 32: 4, 64: -5.5, 96: 5.25, 1: 24} {
		if got[e] != want {
			t.Errorf("element %d = %v, want %v", e, got[e], want)
		}
	}
	checkAgainstRef(t, w)
}

func TestDequantHalvesByHand(t *testing.T) {
	data := []byte{0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00} // 1, -2, 65504, 2^-24
	w := &tensor.Tensor{Type: tensor.F16, Rows: 1, Cols: 4, Data: data}
	want := []float32{1, -2, 65504, 5.9604645e-08}
	if got := dequant(w, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("f16 = %v, want %v", got, want)
	}
	bf := &tensor.Tensor{Type: tensor.BF16, Rows: 1, Cols: 2, Data: []byte{0x80, 0x3f, 0x40, 0xc0}} // 1, -3
	if got := dequant(bf, 0); got[0] != 1 || got[1] != -3 {
		t.Errorf("bf16 = %v, want [1 -3]", got)
	}
}

// TestQ8GStraddlingGroups: rows of 172 with groups of 8, so odd rows start in
// the middle of a group. Every value is 1 and group g has scale g+1, so
// element (r, j) is (r*172+j)/8 + 1.
func TestQ8GStraddlingGroups(t *testing.T) {
	const rows, cols, gs = 6, 172, 8
	w := &tensor.Tensor{Type: tensor.Q8G, Rows: rows, Cols: cols, GroupSize: gs,
		Data: make([]byte, rows*cols), Scales: make([]byte, rows*cols/gs*4)}
	for i := range w.Data {
		w.Data[i] = 1
	}
	for g := 0; g < rows*cols/gs; g++ {
		binary.LittleEndian.PutUint32(w.Scales[4*g:], math.Float32bits(float32(g+1)))
	}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	row1 := dequant(w, 1)
	// Row 1 starts at flat index 172 = 21*8 + 4: four values of group 21.
	for j, want := range map[int]float32{0: 22, 3: 22, 4: 23, 171: 43} {
		if row1[j] != want {
			t.Errorf("row 1 element %d = %v, want %v", j, row1[j], want)
		}
	}
	for r := 0; r < rows; r++ {
		got := dequant(w, r)
		for j := range got {
			if want := float32((r*cols+j)/gs + 1); got[j] != want {
				t.Fatalf("row %d element %d = %v, want %v", r, j, got[j], want)
			}
		}
	}
	// Groups of 3 and 43 straddle too; compare with the reference decoder.
	rng := rand.New(rand.NewPCG(7, 7))
	for _, g := range []int{3, 43, 8, 172 * 2} {
		checkAgainstRef(t, randTensor(rng, tensor.Q8G, rows, cols, g))
		checkMatVecAgainstRef(t, randTensor(rng, tensor.Q8G, rows, cols, g), rng)
	}
}

// checkAgainstRef asserts DequantRow == float32(reference) for every element.
// The reference is exact in float64 for these inputs, and production rounds
// each value once, so the two agree bit for bit.
func checkAgainstRef(t *testing.T, w *tensor.Tensor) {
	t.Helper()
	for r := 0; r < w.Rows; r++ {
		got := dequant(w, r)
		for e, v := range refRow(w, r) {
			if !sameBits(got[e], float32(v)) {
				t.Fatalf("%s row %d element %d = %v, reference %v", w.Type, r, e, got[e], v)
			}
		}
	}
}

func TestDequantMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	levelsCovered(t, func(int) {
		for _, typ := range allTypes {
			for _, cols := range []int{32, 256, 512, 172} {
				if !shapeOK(typ, cols) {
					continue
				}
				for _, gs := range groupSizes(typ) {
					checkAgainstRef(t, randTensor(rng, typ, 3, cols, gs))
				}
			}
		}
	})
}

func checkMatVecAgainstRef(t *testing.T, w *tensor.Tensor, rng *rand.Rand) {
	t.Helper()
	x := randVec(rng, w.Cols)
	out := make([]float32, w.Rows)
	MatVec(out, w, x)
	for r := range out {
		ref := refRow(w, r)
		want, tol := refDot(ref, x), dotBound(ref, x)
		if usesIntDot(w) {
			q, d, bs := refQuantize(x)
			tol = intBound(w, r, x, q, d, bs)
		}
		if d := math.Abs(float64(out[r]) - want); !(d <= tol) {
			t.Fatalf("%s %dx%d row %d: got %v, want %v (|diff| %g > bound %g)", w.Type, w.Rows, w.Cols, r, out[r], want, d, tol)
		}
	}
}

func TestMatVecMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	defer SetThreads(0)
	for _, th := range []int{1, 3} {
		SetThreads(th)
		for _, typ := range allTypes {
			for _, cols := range []int{64, 172, 256, 768, 2048} {
				if !shapeOK(typ, cols) {
					continue
				}
				for _, rows := range []int{1, 7, 101} {
					for _, gs := range groupSizes(typ) {
						checkMatVecAgainstRef(t, randTensor(rng, typ, rows, cols, gs), rng)
					}
				}
			}
		}
	}
}

// TestThreadsBitIdentical: the result must not depend on the thread count.
// It runs with the default scheduling and with the finest possible one
// (every matrix split, one row per piece or chunk), so rows are spread across
// goroutines in many different ways.
func TestThreadsBitIdentical(t *testing.T) {
	t.Run("default", func(t *testing.T) { checkThreadsBitIdentical(t) })
	t.Run("fine", func(t *testing.T) {
		saved := [4]int{serialElems, chunkElems, pieceElems, batchChunksPerThread}
		defer func() {
			serialElems, chunkElems, pieceElems, batchChunksPerThread = saved[0], saved[1], saved[2], saved[3]
		}()
		serialElems, chunkElems, pieceElems, batchChunksPerThread = 0, 1, 1, 1<<20
		checkThreadsBitIdentical(t)
	})
	// No polling: the caller parks at once when helpers hold chunks, and
	// idle workers park too, exercising both wake-ups.
	t.Run("parking", func(t *testing.T) {
		saved := [2]int64{waitSpin.Load(), workerSpin.Load()}
		defer func() { waitSpin.Store(saved[0]); workerSpin.Store(saved[1]) }()
		waitSpin.Store(0)
		workerSpin.Store(0)
		checkThreadsBitIdentical(t)
	})
}

func checkThreadsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	defer SetThreads(0)
	for _, typ := range allTypes {
		for _, shape := range [][3]int{{1001, 768, 16}, {1001, 768, 64}, {37, 2048, 32}, {250, 256, 5}} {
			w := randTensor(rng, typ, shape[0], shape[1], shape[2])
			x := randVec(rng, w.Cols)
			var first []float32
			for _, th := range []int{1, 2, 3, 7} {
				SetThreads(th)
				out := make([]float32, w.Rows)
				MatVec(out, w, x)
				if first == nil {
					first = out
					continue
				}
				for r := range out {
					if !sameBits(out[r], first[r]) {
						t.Fatalf("%s %v threads %d row %d: %v, with 1 thread %v", typ, shape, th, r, out[r], first[r])
					}
				}
			}
		}
	}
}

// TestMatVecIsDotOfDequantRow: for the float types (and Q8G whose groups
// straddle rows) every path computes Dot(DequantRow(row), x). The integer
// types follow their own order (TestIntDotOrder).
func TestMatVecIsDotOfDequantRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, typ := range allTypes {
		for _, cols := range []int{32, 64, 96, 172, 256, 768, 1280} {
			if !shapeOK(typ, cols) {
				continue
			}
			w := randTensor(rng, typ, 9, cols, 5)
			if usesIntDot(w) {
				continue
			}
			x := randVec(rng, cols)
			out := make([]float32, w.Rows)
			MatVec(out, w, x)
			for r := range out {
				if want := Dot(dequant(w, r), x); !sameBits(out[r], want) {
					t.Fatalf("%s cols %d row %d: MatVec %v, Dot(DequantRow) %v", typ, cols, r, out[r], want)
				}
			}
		}
	}
}

// TestSIMDMatchesGo: the SIMD kernels follow the canonical orders exactly, so
// they must agree with the pure-Go code bit for bit (not merely within
// rounding), including lengths that are not a multiple of the vector width.
func TestSIMDMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	levelsCovered(t, func(level int) {
		for n := 0; n <= 300; n++ {
			a, b := randVec(rng, n), randVec(rng, n)
			fast := Dot(a, b)
			var slow float32
			withSIMD(simdNone, func() { slow = Dot(a, b) })
			if !sameBits(fast, slow) {
				t.Fatalf("level %s Dot n=%d: simd %v, go %v", levelNames[level], n, fast, slow)
			}
		}
		for n := 0; n <= 70; n++ {
			x, y := randVec(rng, n), randVec(rng, n)
			a := float32(rng.NormFloat64())
			fast, slow := append([]float32(nil), y...), append([]float32(nil), y...)
			Axpy(fast, a, x)
			withSIMD(simdNone, func() { Axpy(slow, a, x) })
			for i := range fast {
				if !sameBits(fast[i], slow[i]) {
					t.Fatalf("level %s Axpy n=%d value %d: simd %v, go %v", levelNames[level], n, i, fast[i], slow[i])
				}
			}
		}
		for _, typ := range allTypes {
			for _, cols := range []int{8, 32, 40, 64, 172, 256, 512, 2048, 4096 + 7} {
				if !shapeOK(typ, cols) {
					continue
				}
				w := randTensor(rng, typ, 5, cols, 4+rng.IntN(2)*60)
				x := randVec(rng, cols)
				fast, slow := make([]float32, w.Rows), make([]float32, w.Rows)
				MatVec(fast, w, x)
				withSIMD(simdNone, func() { MatVec(slow, w, x) })
				for r := range fast {
					if !sameBits(fast[r], slow[r]) {
						t.Fatalf("level %s %s cols %d row %d: simd %v, go %v", levelNames[level], typ, cols, r, fast[r], slow[r])
					}
				}
			}
		}
	})
}

// canonicalDot is the documented summation order written as plainly as
// possible, independently of dot.go's loop structure.
func canonicalDot(a, b []float32) float32 {
	n := len(a)
	var lane [32]float32
	j := 0
	for ; j+32 <= n; j += 32 {
		for i := 0; i < 32; i++ {
			p := float32(a[j+i] * b[j+i]) // no FMA
			lane[i] = lane[i] + p
		}
	}
	var v [8]float32
	for i := 0; i < 8; i++ {
		v[i] = (lane[i] + lane[i+8]) + (lane[i+16] + lane[i+24])
	}
	for ; j+8 <= n; j += 8 {
		for i := 0; i < 8; i++ {
			p := float32(a[j+i] * b[j+i]) // no FMA
			v[i] = v[i] + p
		}
	}
	s := ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]))
	for ; j < n; j++ {
		p := float32(a[j] * b[j])
		s = s + p
	}
	return s
}

func TestDotCanonicalOrderAndAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for n := 0; n <= 520; n++ {
		a, b := randVec(rng, n), randVec(rng, n)
		got := Dot(a, b)
		if want := canonicalDot(a, b); !sameBits(got, want) {
			t.Fatalf("n=%d: Dot %v, canonical order %v", n, got, want)
		}
		a64 := make([]float64, n)
		for i, v := range a {
			a64[i] = float64(v)
		}
		if d := math.Abs(float64(got) - refDot(a64, b)); !(d <= dotBound(a64, b)) {
			t.Fatalf("n=%d: |Dot - exact| = %g > bound %g", n, d, dotBound(a64, b))
		}
	}
	// An order-sensitive case: element 0 = 1e8 and element 1 = 1 land in
	// lanes 0 and 1, element 32 = -1e8 in the 8-wide phase on lane 0 (n=40),
	// so 1e8 and -1e8 cancel before the 1 is added: the result is 1. Summing
	// left to right would give (1e8 + 1) - 1e8 = 0, as ulp(1e8) = 8.
	a := make([]float32, 40)
	b := make([]float32, 40)
	for i := range b {
		b[i] = 1
	}
	a[0], a[1], a[32] = 1e8, 1, -1e8
	if got := Dot(a, b); got != 1 {
		t.Fatalf("Dot = %v, want 1", got)
	}
}

// TestAlignmentIndependent: the same values at different addresses give the
// same bits (no peeling to an alignment boundary).
func TestAlignmentIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, typ := range allTypes {
		w := randTensor(rng, typ, 33, 2048, 64)
		x := randVec(rng, w.Cols+7)
		want := make([]float32, w.Rows)
		MatVec(want, w, x[:w.Cols])
		for shift := 1; shift < 8; shift++ {
			buf := make([]byte, len(w.Data)+shift)
			moved := *w
			moved.Data = buf[shift:]
			copy(moved.Data, w.Data)
			got := make([]float32, w.Rows)
			xs := x[shift : shift+w.Cols]
			copy(xs, x[:w.Cols])
			MatVec(got, &moved, xs)
			for r := range got {
				if !sameBits(got[r], want[r]) {
					t.Fatalf("%s shift %d row %d: %v, aligned %v", typ, shift, r, got[r], want[r])
				}
			}
			copy(x[:w.Cols], xs) // restore for the next shift
		}
	}
}

func TestMatVecConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	w := randTensor(rng, tensor.Q8_0, 300, 1024, 0)
	x := randVec(rng, w.Cols)
	want := make([]float32, w.Rows)
	MatVec(want, w, x)
	defer SetThreads(0)
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Go(func() {
			out := make([]float32, w.Rows)
			for i := 0; i < 20; i++ {
				SetThreads(1 + (g+i)%4)
				MatVec(out, w, x)
				for r := range out {
					if !sameBits(out[r], want[r]) {
						t.Errorf("goroutine %d row %d: %v, want %v", g, r, out[r], want[r])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestThreadsSetting(t *testing.T) {
	defer SetThreads(0)
	SetThreads(5)
	if Threads() != 5 {
		t.Fatalf("Threads() = %d after SetThreads(5)", Threads())
	}
	SetThreads(0)
	if Threads() < 1 {
		t.Fatalf("default Threads() = %d", Threads())
	}
}

func TestShapeMismatchPanics(t *testing.T) {
	w := &tensor.Tensor{Type: tensor.F32, Rows: 2, Cols: 3, Data: make([]byte, 24)}
	mustPanic(t, "MatVec short x", func() { MatVec(make([]float32, 2), w, make([]float32, 2)) })
	mustPanic(t, "MatVec long out", func() { MatVec(make([]float32, 3), w, make([]float32, 3)) })
	mustPanic(t, "DequantRow short dst", func() { DequantRow(make([]float32, 2), w, 0) })
	mustPanic(t, "DequantRow bad row", func() { DequantRow(make([]float32, 3), w, 2) })
	mustPanic(t, "Dot", func() { Dot(make([]float32, 2), make([]float32, 3)) })
	mustPanic(t, "Axpy", func() { Axpy(make([]float32, 2), 1, make([]float32, 3)) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}
