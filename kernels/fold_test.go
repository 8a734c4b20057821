package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The assembly folds the 32 canonical lanes to one sum with a few macros.
// TestAsmFoldsMatchCanonical reads those macros from the assembly sources
// and runs them through a small interpreter of the instructions they use, on
// any machine: a wrong fold in the AVX-512 (or AVX2) source fails here even
// where the CPU cannot run it. (TestSIMDMatchesGo, TestIntDotOrder and
// TestGEMMIsMatVec run the real kernels, where the CPU has them.)

// vreg is a vector register: 16 float32 lanes (Z), of which Y is the low 8
// and X the low 4.
type vreg [16]float32

type vm struct{ z [32]vreg }

// reg parses "X3", "Y12" or "Z0" into its number and width in lanes.
func parseReg(s string) (n, width int, err error) {
	if len(s) < 2 {
		return 0, 0, fmt.Errorf("not a register: %q", s)
	}
	switch s[0] {
	case 'X':
		width = 4
	case 'Y':
		width = 8
	case 'Z':
		width = 16
	default:
		return 0, 0, fmt.Errorf("not a vector register: %q", s)
	}
	n, err = strconv.Atoi(s[1:])
	if err != nil || n < 0 || n > 31 {
		return 0, 0, fmt.Errorf("not a register: %q", s)
	}
	return n, width, nil
}

// write sets register n to v's first width lanes and zeroes the rest, as a
// VEX or EVEX instruction of that width does.
func (m *vm) write(n, width int, v vreg) {
	var out vreg
	copy(out[:width], v[:width])
	m.z[n] = out
}

// exec runs one instruction in Go assembler syntax (sources first, then the
// destination). It knows exactly the instructions the fold macros use and
// fails on any other, so that a changed macro cannot go unchecked.
func (m *vm) exec(ins string) error {
	f := strings.Fields(strings.ReplaceAll(ins, ",", " "))
	if len(f) == 0 {
		return nil
	}
	op, args := f[0], f[1:]
	regs := func(want int) ([]int, []int, error) {
		if len(args) != want {
			return nil, nil, fmt.Errorf("%s: want %d operands, got %q", op, want, ins)
		}
		var ns, ws []int
		for _, a := range args {
			if strings.HasPrefix(a, "$") {
				v, err := strconv.Atoi(a[1:])
				if err != nil {
					return nil, nil, fmt.Errorf("%s: bad immediate %q", op, a)
				}
				ns, ws = append(ns, v), append(ws, 0)
				continue
			}
			n, w, err := parseReg(a)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", op, err)
			}
			ns, ws = append(ns, n), append(ws, w)
		}
		return ns, ws, nil
	}
	switch op {
	case "VADDPS": // VADDPS a, b, d: d = b + a, lane by lane
		n, w, err := regs(3)
		if err != nil {
			return err
		}
		var v vreg
		for i := 0; i < w[2]; i++ {
			v[i] = m.z[n[1]][i] + m.z[n[0]][i]
		}
		m.write(n[2], w[2], v)
	case "VADDSS": // d[0] = b[0] + a[0]; d[1:4] = b[1:4]
		n, _, err := regs(3)
		if err != nil {
			return err
		}
		v := m.z[n[1]]
		v[0] = m.z[n[1]][0] + m.z[n[0]][0]
		m.write(n[2], 4, v)
	case "VEXTRACTF64X4", "VEXTRACTF128": // $k, src, dst: dst = the k-th half of src
		n, w, err := regs(3)
		if err != nil {
			return err
		}
		half := w[2]
		if n[0] < 0 || (n[0]+1)*half > w[1] || 2*half != w[1] {
			return fmt.Errorf("%s: bad operands %q", op, ins)
		}
		var v vreg
		copy(v[:half], m.z[n[1]][n[0]*half:(n[0]+1)*half])
		m.write(n[2], half, v)
	case "VMOVHLPS": // VMOVHLPS a, b, d: d = [a2, a3, b2, b3]
		n, _, err := regs(3)
		if err != nil {
			return err
		}
		a, b := m.z[n[0]], m.z[n[1]]
		m.write(n[2], 4, vreg{a[2], a[3], b[2], b[3]})
	case "VMOVSHDUP": // d = [s1, s1, s3, s3]
		n, _, err := regs(2)
		if err != nil {
			return err
		}
		s := m.z[n[0]]
		m.write(n[1], 4, vreg{s[1], s[1], s[3], s[3]})
	default:
		return fmt.Errorf("the fold interpreter does not know %q", ins)
	}
	return nil
}

// asmMacro returns the instructions of #define name in file (without its
// parameters: the fold macros have none).
func asmMacro(t *testing.T, file, name string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "#define "+name+" \\" {
			continue
		}
		var body []string
		for _, l := range lines[i+1:] {
			more := strings.HasSuffix(strings.TrimSpace(l), "\\")
			for _, ins := range strings.Split(strings.TrimSuffix(strings.TrimSpace(l), "\\"), ";") {
				if ins = strings.TrimSpace(ins); ins != "" {
					body = append(body, ins)
				}
			}
			if !more {
				return body
			}
		}
	}
	t.Fatalf("%s: no macro %s", file, name)
	return nil
}

// foldCases are lane values for which the order of the additions shows:
// magnitudes from 1e-8 to 1e8, mixed signs, exact cancellations.
func foldCases(rng *rand.Rand, n int) [][32]float32 {
	var cases [][32]float32
	for range n {
		var l [32]float32
		for i := range l {
			l[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(17)-8)))
		}
		cases = append(cases, l)
	}
	// Lanes 0, 8 and 16: the canonical (1e8 + 1) + -1e8 is 0 (ulp(1e8) = 8),
	// pairing lanes 0 and 16 first gives 1.
	var c [32]float32
	c[0], c[8], c[16] = 1e8, 1, -1e8
	return append([][32]float32{c}, cases...)
}

func TestAsmFoldsMatchCanonical(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 41))
	type fold struct {
		file       string
		fold, hsum string
		zmm        bool // lanes 0-15 in Z0, 16-31 in Z1; else lanes 8i.. in Y(i)
	}
	folds := []fold{
		{"simd_avx512_amd64.s", "FOLD_TO8", "HSUM8_512", true},
		{"simd_avx2_amd64.s", "FOLD32TO8", "HSUM8", false},
		{"intdot_amd64.h", "FOLD512", "HSUM8", true},
		{"intdot_amd64.h", "FOLD32TO8", "HSUM8", false},
	}
	for _, f := range folds {
		prog := append(asmMacro(t, f.file, f.fold), asmMacro(t, f.file, f.hsum)...)
		for _, lanes := range foldCases(rng, 2000) {
			var m vm
			for i, v := range lanes {
				if f.zmm {
					m.z[i/16][i%16] = v
				} else {
					m.z[i/8][i%8] = v
				}
			}
			for _, ins := range prog {
				if err := m.exec(ins); err != nil {
					t.Fatalf("%s %s/%s: %v", f.file, f.fold, f.hsum, err)
				}
			}
			acc := lanes
			if got, want := m.z[0][0], foldLanes32(&acc); !sameBits(got, want) {
				t.Fatalf("%s: %s then %s gives %v for lanes %v; the canonical fold gives %v", f.file, f.fold, f.hsum, got, lanes, want)
			}
		}
	}
}

// The integer-dot order's fold of its 4 lanes (HSUM4), interpreted the same
// way.
func TestAsmIntFoldMatchesOrder(t *testing.T) {
	prog := asmMacro(t, "intdot_amd64.h", "HSUM4")
	rng := rand.New(rand.NewPCG(43, 43))
	for _, c := range foldCases(rng, 2000) {
		var m vm
		copy(m.z[0][:4], c[:4])
		for _, ins := range prog {
			if err := m.exec(ins); err != nil {
				t.Fatalf("HSUM4: %v", err)
			}
		}
		l := [4]float32{c[0], c[1], c[2], c[3]}
		if got, want := m.z[0][0], fold4(&l); !sameBits(got, want) {
			t.Fatalf("HSUM4 gives %v for lanes %v; the order's fold gives %v", got, l, want)
		}
	}
	// The order-sensitive case: (1e8 + -1e8) + (1 + 0) = 1; pairing lanes
	// 0 and 1 first would give (1e8 + 1) + (-1e8) = 0.
	var m vm
	copy(m.z[0][:4], []float32{1e8, 1, -1e8, 0})
	for _, ins := range prog {
		m.exec(ins)
	}
	if m.z[0][0] != 1 {
		t.Fatalf("HSUM4 of [1e8 1 -1e8 0] = %v, want 1", m.z[0][0])
	}
}

// The interpreter itself: a fold with its halves paired wrongly must fail.
func TestFoldInterpreterCatchesAWrongFold(t *testing.T) {
	wrong := []string{
		"VEXTRACTF64X4 $1, Z0, Y2", "VADDPS Y1, Y0, Y0", // lanes 0-7 + 16-23 first: wrong
		"VEXTRACTF64X4 $1, Z1, Y3", "VADDPS Y3, Y2, Y2", "VADDPS Y2, Y0, Y0",
		"VEXTRACTF128 $1, Y0, X1", "VADDPS X1, X0, X0", "VMOVHLPS X0, X0, X1",
		"VADDPS X1, X0, X0", "VMOVSHDUP X0, X1", "VADDSS X1, X0, X0",
	}
	c := foldCases(rand.New(rand.NewPCG(42, 42)), 0)[0]
	var m vm
	for i, v := range c {
		m.z[i/16][i%16] = v
	}
	for _, ins := range wrong {
		if err := m.exec(ins); err != nil {
			t.Fatal(err)
		}
	}
	if acc := c; sameBits(m.z[0][0], foldLanes32(&acc)) {
		t.Fatalf("a wrongly paired fold gives the canonical %v", m.z[0][0])
	}
	var v vm
	if err := v.exec("VFMADD231PS Y1, Y2, Y0"); err == nil {
		t.Fatal("an unknown instruction was accepted")
	}
}
