package llama2c

import (
	"bytes"
	"math"
	"testing"

	"github.com/seamlm/seam/synth"
	"github.com/seamlm/seam/tensor"
)

// A version 2 file written by WriteQ8 parses back with the header's shape
// and group size, and every value is within half a step of the f32 weight.
func TestWriteQ8RoundTrip(t *testing.T) {
	w, err := synth.Weights(synth.DemoConfig(), 5)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteQ8(&buf, w, 32); err != nil {
		t.Fatal(err)
	}
	c, err := Parse(buf.Bytes(), "q8")
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != 2 || c.GroupSize != 32 || c.Weights.Config != w.Config {
		t.Fatalf("version %d, group %d, config %+v; want 2, 32, %+v", c.Version, c.GroupSize, c.Weights.Config, w.Config)
	}
	for l := range w.Layers {
		for i, orig := range w.Layers[l].Tensors() {
			got := c.Weights.Layers[l].Tensors()[i]
			if orig.Type == tensor.F32 && got.Type == tensor.F32 {
				if !bytes.Equal(orig.Data, got.Data) {
					t.Fatalf("layer %d tensor %d: f32 norm changed", l, i)
				}
				continue
			}
			vals := tensor.AsF32(orig.Data)
			for e, v := range vals {
				g := e / 32
				s := math.Float32frombits(uint32(got.Scales[4*g]) | uint32(got.Scales[4*g+1])<<8 | uint32(got.Scales[4*g+2])<<16 | uint32(got.Scales[4*g+3])<<24)
				q := float64(int8(got.Data[e])) * float64(s)
				// Half a step, plus the rounding of v/s in float32 (127 ulps at most).
				if d := math.Abs(q - float64(v)); d > float64(s)*(0.5+127.0/(1<<23)) {
					t.Fatalf("layer %d tensor %s value %d: %v quantized to %v (step %v)", l, got.Name, e, v, q, s)
				}
			}
		}
	}
	if err := WriteQ8(&buf, w, 48); err == nil {
		t.Error("a group size that does not divide dim was accepted")
	}
}
