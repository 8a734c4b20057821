package wire

import (
	"fmt"
	"math"

	"github.com/seamlm/seam/internal/half"
	"github.com/seamlm/seam/tensor"
)

// Built-in encodings.
var (
	F32 Encoding = f32Encoding{}
	F16 Encoding = f16Encoding{}
	Q8  Encoding = &symQuant{id: EncodingQ8, name: "q8", bits: 8}
	Q5  Encoding = &symQuant{id: EncodingQ5, name: "q5", bits: 5}
	Q4  Encoding = &symQuant{id: EncodingQ4, name: "q4", bits: 4}
)

func init() {
	for _, e := range []Encoding{Q8, Q5, Q4} {
		e.(*symQuant).init()
	}
}

// finite32 reports whether x is neither NaN nor an infinity.
func finite32(x float32) bool { return math.Float32bits(x)&0x7f800000 != 0x7f800000 }

// nonFinite names the first NaN or infinity in x, a tokens x width tensor
// whose first token is number first.
func nonFinite(name string, x []float32, width, first int) error {
	for i, v := range x {
		if !finite32(v) {
			return fmt.Errorf("%s: value %v at token %d, index %d: %w", name, v, first+i/width, i%width, ErrNonFinite)
		}
	}
	return nil
}

// f32Encoding copies the IEEE binary32 bits, little-endian.
type f32Encoding struct{}

func (f32Encoding) ID() EncodingID { return EncodingF32 }
func (f32Encoding) Name() string   { return "f32" }

func (f32Encoding) PayloadSize(tokens, width int) (int, error) {
	n, err := checkShape(tokens, width)
	if err != nil {
		return 0, fmt.Errorf("f32: %w", err)
	}
	return tensor.MulSize(n, 4)
}

func (e f32Encoding) Encode(dst []byte, src []float32, tokens, width int) error {
	if err := checkSizes(e, len(dst), len(src), tokens, width); err != nil {
		return err
	}
	if err := nonFinite("f32 encode", src, width, 0); err != nil {
		return err
	}
	copy(dst, tensor.BytesOfF32(src)) // little-endian host, checked by package tensor
	return nil
}

func (e f32Encoding) Decode(dst []float32, src []byte, tokens, width int) error {
	if err := checkSizes(e, len(src), len(dst), tokens, width); err != nil {
		return err
	}
	copy(tensor.BytesOfF32(dst), src)
	return nonFinite("f32 decode", dst, width, 0)
}

// f16Encoding rounds to IEEE binary16, nearest with ties to even, little-endian.
type f16Encoding struct{}

func (f16Encoding) ID() EncodingID { return EncodingF16 }
func (f16Encoding) Name() string   { return "f16" }

func (f16Encoding) PayloadSize(tokens, width int) (int, error) {
	n, err := checkShape(tokens, width)
	if err != nil {
		return 0, fmt.Errorf("f16: %w", err)
	}
	return tensor.MulSize(n, 2)
}

// f16Inf is the exponent field of binary16 infinities and NaNs.
const f16Inf = 0x7c00

func (e f16Encoding) Encode(dst []byte, src []float32, tokens, width int) error {
	if err := checkSizes(e, len(dst), len(src), tokens, width); err != nil {
		return err
	}
	dst = dst[:2*len(src)]
	for i, v := range src {
		h := half.FromF32(v)
		if h&f16Inf == f16Inf {
			if !finite32(v) {
				return fmt.Errorf("f16 encode: value %v at token %d, index %d: %w", v, i/width, i%width, ErrNonFinite)
			}
			return fmt.Errorf("f16 encode: value %v at token %d, index %d is beyond the f16 range (65504): %w", v, i/width, i%width, ErrNonFinite)
		}
		le.PutUint16(dst[2*i:], h)
	}
	return nil
}

func (e f16Encoding) Decode(dst []float32, src []byte, tokens, width int) error {
	if err := checkSizes(e, len(src), len(dst), tokens, width); err != nil {
		return err
	}
	src = src[:2*len(dst)]
	for i := range dst {
		h := le.Uint16(src[2*i:])
		if h&f16Inf == f16Inf {
			return fmt.Errorf("f16 decode: bits %#04x at token %d, index %d: %w", h, i/width, i%width, ErrNonFinite)
		}
		dst[i] = half.ToF32(h)
	}
	return nil
}
