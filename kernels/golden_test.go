package kernels

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seamlm/seam/tensor"
)

// goldenTensor fills a tensor from a PCG stream with integer operations
// only: the same bytes on every machine. Block scales are set to finite
// halves in [1/32, 4).
func goldenTensor(typ tensor.DType, rows, cols int, seed uint64) *tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 77))
	rb, _ := typ.RowBytes(cols)
	w := &tensor.Tensor{Name: "golden", Type: typ, Rows: rows, Cols: cols, Data: make([]byte, rb*rows)}
	for i := range w.Data {
		w.Data[i] = byte(rng.Uint32())
	}
	half := func(off int) {
		binary.LittleEndian.PutUint16(w.Data[off:], uint16(10+rng.IntN(7))<<10|uint16(rng.IntN(1024)))
	}
	switch typ {
	case tensor.F32:
		for i := 0; i < len(w.Data); i += 4 {
			v := float32(int32(rng.Uint32()%4001)-2000) / 1024
			binary.LittleEndian.PutUint32(w.Data[i:], math.Float32bits(v))
		}
	case tensor.F16:
		for i := 0; i < len(w.Data); i += 2 {
			half(i)
		}
	case tensor.BF16:
		for i := 0; i < len(w.Data); i += 2 {
			w.Data[i+1] = 0x3c | w.Data[i+1]&0x80
		}
	case tensor.Q8_0, tensor.Q4_0:
		for i := 0; i < len(w.Data); i += typ.BlockBytes() {
			half(i)
		}
	case tensor.Q4_K:
		for i := 0; i < len(w.Data); i += 144 {
			half(i)
			half(i + 2)
		}
	case tensor.Q6_K:
		for i := 0; i < len(w.Data); i += 210 {
			half(i + 208)
		}
	case tensor.Q8G:
		w.GroupSize = 64
		w.Scales = make([]byte, rows*cols/64*4)
		for i := 0; i < len(w.Scales); i += 4 {
			binary.LittleEndian.PutUint32(w.Scales[i:], math.Float32bits(float32(1+rng.IntN(1000))/65536))
		}
	}
	return w
}

func goldenVec(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 78))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(int32(rng.Uint32()%2001)-1000) / 256
	}
	return x
}

func digestF32(v []float32) string {
	h := sha256.New()
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// TestGoldenOutputs pins the bits of a few products: one matrix per weight
// type against one vector and against a batch of 11 (the GEMM tile and a
// remainder), at every SIMD level this machine has. The results are promised
// to be the same on every machine, so the digests are constants: a change to
// any summation order, rounding or quantization rule fails here, whatever
// CPU runs the test.
func TestGoldenOutputs(t *testing.T) {
	const rows, cols, n = 37, 512, 11
	want := map[tensor.DType]string{
		tensor.F32:  "cdbe8cb6cc2c373b",
		tensor.F16:  "c669533b37ba4600",
		tensor.BF16: "8cd70767022fa761",
		tensor.Q8_0: "ab77ab7938631bfd",
		tensor.Q4_0: "78bd65d43516faab",
		tensor.Q4_K: "70d8caa09ba91406",
		tensor.Q6_K: "883881ce01bb4d5b",
		tensor.Q8G:  "687244de314ce76b",
	}
	levelsCovered(t, func(level int) {
		for i, typ := range allTypes {
			w := goldenTensor(typ, rows, cols, uint64(i))
			x := goldenVec(n*cols, uint64(i))
			out := make([]float32, rows+n*rows)
			MatVec(out[:rows], w, x[:cols])
			MatMul(out[rows:], w, x, n)
			if got := digestF32(out); got != want[typ] {
				t.Errorf("level %s %s: outputs digest %s, pinned %s", levelNames[level], typ, got, want[typ])
			}
		}
	})
}

// TestGoldenVectorOps pins RMSNorm, Softmax, SwiGLU, Exp and Axpy on fixed
// inputs, for the same reason.
func TestGoldenVectorOps(t *testing.T) {
	x, wt := goldenVec(300, 1), goldenVec(300, 2)
	levelsCovered(t, func(level int) {
		var out []float32
		norm := make([]float32, len(x))
		RMSNorm(norm, x, wt, 1e-5)
		out = append(out, norm...)
		sm := append([]float32(nil), x...)
		Softmax(sm)
		out = append(out, sm...)
		g := append([]float32(nil), x...)
		SwiGLU(g, wt)
		out = append(out, g...)
		for _, v := range x {
			out = append(out, Exp(v/16))
		}
		y := append([]float32(nil), wt...)
		Axpy(y, 0.37, x)
		out = append(out, y...)
		if got, want := digestF32(out), "685f54454dbf5551"; got != want {
			t.Errorf("level %s: vector ops digest %s, pinned %s", levelNames[level], got, want)
		}
	})
}
