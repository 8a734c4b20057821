package wire

import (
	"fmt"
	"math"

	"github.com/seamlm/seam/tensor"
)

// symQuant is symmetric per-token quantization to signed b-bit codes:
// each token is a little-endian f32 scale s = fl(max|x| / qmax), qmax =
// 2^(b-1)-1, followed by its codes q = clamp(roundHalfEven(fl(x / s)), ±qmax)
// (q = 0 when s = 0), packed as described in docs/wire.md:
//   - b = 8: one int8 per value;
//   - b = 4: two's-complement nibbles, value i in byte i/2, low nibble first;
//   - b = 5: two's-complement 5-bit fields, value i at bits [5i, 5i+5) of the
//     token's code bytes read as a little-endian bit stream (bit k is bit k%8
//     of byte k/8).
//
// Padding bits at the end of a token are zero. The code -2^(b-1) is never
// produced, so the decoder rejects it, as it rejects padding that is not zero.
type symQuant struct {
	id   EncodingID
	name string
	bits int
	qmax float32
	// maxScale is the largest scale s for which qmax*s is finite in float32:
	// a larger one would decode to infinities, so it is rejected both ways.
	maxScale float32
}

func (q *symQuant) init() {
	q.qmax = float32(int(1)<<(q.bits-1) - 1)
	s := float32(math.MaxFloat32 / float64(q.qmax))
	for !finite32(q.qmax * s) {
		s = math.Nextafter32(s, 0)
	}
	q.maxScale = s
}

func (q *symQuant) ID() EncodingID { return q.id }
func (q *symQuant) Name() string   { return q.name }

// codeBytes is the byte size of one token's packed codes.
func (q *symQuant) codeBytes(width int) (int, error) {
	bitCount, err := tensor.MulSize(width, q.bits)
	if err != nil {
		return 0, err
	}
	return bitCount/8 + min(bitCount%8, 1), nil
}

func (q *symQuant) PayloadSize(tokens, width int) (int, error) {
	if _, err := checkShape(tokens, width); err != nil {
		return 0, fmt.Errorf("%s: %w", q.name, err)
	}
	cb, err := q.codeBytes(width)
	if err != nil {
		return 0, fmt.Errorf("%s: width %d: %w", q.name, width, err)
	}
	if cb > math.MaxInt-4 {
		return 0, fmt.Errorf("%s: width %d overflows", q.name, width)
	}
	n, err := tensor.MulSize(tokens, 4+cb)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", q.name, err)
	}
	return n, nil
}

func (q *symQuant) Encode(dst []byte, src []float32, tokens, width int) error {
	if err := checkSizes(q, len(dst), len(src), tokens, width); err != nil {
		return err
	}
	cb, _ := q.codeBytes(width)
	for t := range tokens {
		x := src[t*width : (t+1)*width]
		row := dst[t*(4+cb) : (t+1)*(4+cb)]
		s, err := q.scaleOf(x, t)
		if err != nil {
			return err
		}
		le.PutUint32(row, math.Float32bits(s))
		q.pack(row[4:], x, s)
	}
	return nil
}

// scaleOf computes a token's scale, rejecting non-finite values.
func (q *symQuant) scaleOf(x []float32, token int) (float32, error) {
	// For non-negative floats the bit patterns order like the values, so the
	// largest |x| is an integer max over the bits with the sign cleared; any
	// NaN or infinity makes that max >= the exponent-all-ones pattern.
	var mbits uint32
	for _, v := range x {
		mbits = max(mbits, math.Float32bits(v)&^(1<<31))
	}
	if mbits >= 0x7f800000 {
		return 0, nonFinite(q.name+" encode", x, len(x), token)
	}
	m := math.Float32frombits(mbits)
	s := m / q.qmax
	if s > q.maxScale {
		return 0, fmt.Errorf("%s encode: token %d has max |x| = %v; its scale %v would overflow on decode (limit %v): %w", q.name, token, m, s, q.maxScale, ErrNonFinite)
	}
	return s, nil
}

// roundMagic is 1.5 * 2^23: adding it to a float32 of magnitude below 2^22
// leaves a sum whose ulp is 1, so the addition itself rounds to an integer,
// half to even (IEEE default rounding), and subtracting it back is exact.
const roundMagic float32 = 1.5 * (1 << 23)

// code quantizes v with the nonzero scale s to a signed code in
// [-qmax, qmax]. |v/s| <= qmax(1+2^-23), far below 2^22.
func (q *symQuant) code(v, s float32) int32 {
	// The explicit conversions force float32 rounding at each step (Go may
	// otherwise fuse or widen); the sum's rounding is the round to integer.
	r := float32(float32(v/s)+roundMagic) - roundMagic
	return int32(min(max(r, -q.qmax), q.qmax))
}

// pack writes the codes of x into dst (exactly codeBytes long).
func (q *symQuant) pack(dst []byte, x []float32, s float32) {
	if s == 0 { // all values are zero, or so small that max/qmax underflowed
		clear(dst)
		return
	}
	switch q.bits {
	case 8:
		for i, v := range x {
			dst[i] = byte(int8(q.code(v, s)))
		}
	case 4:
		clear(dst)
		for i, v := range x {
			dst[i>>1] |= byte(q.code(v, s)&0xf) << (4 * (i & 1))
		}
	case 5:
		q.pack5(dst, x, s)
	}
}

// pack5 packs groups of 8 values into 5 bytes, then the remainder bit by bit.
func (q *symQuant) pack5(dst []byte, x []float32, s float32) {
	full := len(x) / 8
	for g := range full {
		var u uint64
		for j, v := range x[8*g : 8*g+8] {
			u |= uint64(q.code(v, s)&0x1f) << (5 * j)
		}
		b := dst[5*g : 5*g+5]
		b[0], b[1], b[2], b[3], b[4] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24), byte(u>>32)
	}
	tail := dst[5*full:]
	clear(tail)
	for j, v := range x[8*full:] {
		c := uint16(q.code(v, s)&0x1f) << ((5 * j) % 8)
		k := 5 * j / 8
		tail[k] |= byte(c)
		if c>>8 != 0 {
			tail[k+1] |= byte(c >> 8)
		}
	}
}

func (q *symQuant) Decode(dst []float32, src []byte, tokens, width int) error {
	if err := checkSizes(q, len(src), len(dst), tokens, width); err != nil {
		return err
	}
	cb, _ := q.codeBytes(width)
	for t := range tokens {
		row := src[t*(4+cb) : (t+1)*(4+cb)]
		s, err := q.checkScale(math.Float32frombits(le.Uint32(row)), t)
		if err != nil {
			return err
		}
		if err := q.unpack(dst[t*width:(t+1)*width], row[4:], s); err != nil {
			return fmt.Errorf("%s decode: token %d: %w", q.name, t, err)
		}
	}
	return nil
}

// checkScale accepts exactly the scales an encoder can produce: finite,
// not negative (nor -0), and small enough that qmax*s is finite.
func (q *symQuant) checkScale(s float32, token int) (float32, error) {
	switch {
	case !finite32(s):
		return 0, fmt.Errorf("%s decode: token %d scale %v: %w", q.name, token, s, ErrNonFinite)
	case math.Signbit(float64(s)):
		return 0, fmt.Errorf("%s decode: token %d scale %v is negative: %w", q.name, token, s, ErrMalformed)
	case s > q.maxScale:
		return 0, fmt.Errorf("%s decode: token %d scale %v exceeds %v (values would overflow): %w", q.name, token, s, q.maxScale, ErrNonFinite)
	}
	return s, nil
}

// unpack decodes one token's codes; every code is checked before use.
func (q *symQuant) unpack(dst []float32, src []byte, s float32) error {
	if s == 0 {
		// The encoder writes scale 0 only with all codes (and padding) zero.
		for i, b := range src {
			if b != 0 {
				return fmt.Errorf("scale 0 with nonzero code byte %#x at offset %d: %w", b, i, ErrMalformed)
			}
		}
		clear(dst)
		return nil
	}
	var err error
	switch q.bits {
	case 8:
		err = unpack8(dst, src, s)
	case 4:
		err = unpack4(dst, src, s)
	case 5:
		err = unpack5(dst, src, s)
	}
	return err
}

func unpack8(dst []float32, src []byte, s float32) error {
	src = src[:len(dst)]
	for i, b := range src {
		if b == 0x80 {
			return fmt.Errorf("index %d has code -128, which the encoder never produces: %w", i, ErrMalformed)
		}
		dst[i] = float32(int8(b)) * s
	}
	return nil
}

func unpack4(dst []float32, src []byte, s float32) error {
	// The rejected code -8 (0b1000) is flagged as it goes, then located.
	bad := false
	for i := range dst {
		c := src[i>>1] >> (4 * (i & 1)) & 0xf
		bad = bad || c == 0x8
		dst[i] = float32(int8(c<<4)>>4) * s
	}
	if bad {
		for i := range dst {
			if src[i>>1]>>(4*(i&1))&0xf == 0x8 {
				return fmt.Errorf("index %d has code -8, which the encoder never produces: %w", i, ErrMalformed)
			}
		}
	}
	if len(dst)%2 == 1 && src[len(src)-1]>>4 != 0 {
		return fmt.Errorf("padding nibble %#x is not zero: %w", src[len(src)-1]>>4, ErrMalformed)
	}
	return nil
}

// code5 extracts the 5-bit field of value i from a token's code bytes.
func code5(src []byte, i int) byte {
	k, sh := 5*i/8, (5*i)%8
	c := uint16(src[k]) >> sh
	if sh > 3 {
		c |= uint16(src[k+1]) << (8 - sh)
	}
	return byte(c) & 0x1f
}

func unpack5(dst []float32, src []byte, s float32) error {
	// The rejected code -16 (0b10000) is flagged as it goes, then located.
	bad := false
	full := len(dst) / 8
	for g := range full {
		b := src[5*g : 5*g+5]
		u := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32
		out := dst[8*g : 8*g+8]
		for j := range out {
			c := byte(u>>(5*j)) & 0x1f
			bad = bad || c == 0x10
			out[j] = float32(int8(c<<3)>>3) * s
		}
	}
	for i := 8 * full; i < len(dst); i++ {
		c := code5(src, i)
		bad = bad || c == 0x10
		dst[i] = float32(int8(c<<3)>>3) * s
	}
	if bad {
		for i := range dst {
			if code5(src, i) == 0x10 {
				return fmt.Errorf("index %d has code -16, which the encoder never produces: %w", i, ErrMalformed)
			}
		}
	}
	if used := 5 * len(dst) % 8; used != 0 && src[len(src)-1]>>used != 0 {
		return fmt.Errorf("padding bits %#x are not zero: %w", src[len(src)-1]>>used, ErrMalformed)
	}
	return nil
}
