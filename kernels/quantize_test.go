package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seamlm/seam/tensor"
)

// QuantizeRow then DequantRow gives back Gaussian values with the error a
// plain min/max quantizer of that many bits has: the RMS error relative to
// the values' RMS is measured at 0.0057 (Q8_0), 0.089 (Q4_0), 0.076 (Q4_K)
// and 0.021 (Q6_K), the same on a stretch 1000 times quieter; the bounds
// are 1.5 times that.
func TestQuantizeRowRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 61))
	bounds := map[tensor.DType]float64{tensor.Q8_0: 0.0086, tensor.Q4_0: 0.134, tensor.Q4_K: 0.115, tensor.Q6_K: 0.031}
	for typ, bound := range bounds {
		const cols = 1024
		x := randVec(rng, cols)
		for i := range x[:256] {
			x[i] *= 1e-3 // a quiet stretch: small scales
		}
		rb, _ := typ.RowBytes(cols)
		w := &tensor.Tensor{Name: "q", Type: typ, Rows: 1, Cols: cols, Data: make([]byte, rb)}
		if err := QuantizeRow(w.Data, typ, x); err != nil {
			t.Fatal(err)
		}
		back := dequant(w, 0)
		var se, ss float64
		for i := 256; i < cols; i++ {
			d := float64(back[i] - x[i])
			se, ss = se+d*d, ss+float64(x[i])*float64(x[i])
		}
		rel := math.Sqrt(se / ss)
		var seq, ssq float64
		for i := range 256 {
			d := float64(back[i] - x[i])
			seq, ssq = seq+d*d, ssq+float64(x[i])*float64(x[i])
		}
		relQuiet := math.Sqrt(seq / ssq)
		t.Logf("%s: relative RMS error %.3g (quiet stretch %.3g)", typ, rel, relQuiet)
		if !(rel <= bound) || !(relQuiet <= bound) {
			t.Errorf("%s: relative RMS error %.3g, quiet stretch %.3g; bound %.3g", typ, rel, relQuiet, bound)
		}
	}
	if err := QuantizeRow(make([]byte, 34), tensor.Q8_0, append(make([]float32, 31), float32(math.NaN()))); err == nil {
		t.Error("a NaN was quantized")
	}
	if err := QuantizeRow(make([]byte, 33), tensor.Q8_0, make([]float32, 32)); err == nil {
		t.Error("a short destination was accepted")
	}
	if err := QuantizeRow(make([]byte, 128), tensor.F32, make([]float32, 32)); err == nil {
		t.Error("f32 was accepted")
	}
}
