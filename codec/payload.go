package codec

import (
	"fmt"
	"math"

	"github.com/seamlm/seam/internal/half"
)

// Encoder holds the scratch one goroutine needs to encode tokens without
// allocating. An Encoder is not safe for concurrent use; make one per
// goroutine with NewEncoder (the Codec itself stays shared).
type Encoder struct {
	c  *Codec
	xc []float32 // x - mean
	y  []float32 // coefficients, then normalized coefficients with gain
}

// NewEncoder returns an encoder with preallocated scratch for c.
func (c *Codec) NewEncoder() *Encoder {
	return &Encoder{c: c, xc: make([]float32, c.d), y: make([]float32, c.k)}
}

// Encode writes the payload of one token x (d values) into dst, which must
// be exactly PayloadBytes long. It is safe for concurrent use; it borrows an
// Encoder from a pool, so a goroutine encoding many tokens should hold its
// own Encoder instead.
func (c *Codec) Encode(dst []byte, x []float32) error {
	e, _ := c.pool.Get().(*Encoder)
	if e == nil { // a Codec not built by Fit, New or Unmarshal
		e = c.NewEncoder()
	}
	err := e.Encode(dst, x)
	c.pool.Put(e)
	return err
}

// Encode writes the payload of one token x (d values) into dst, which must
// be exactly PayloadBytes long. Non-finite inputs do not fail: NaN maps to the
// lowest cell and infinities to the end cells (see docs/codec.md).
func (e *Encoder) Encode(dst []byte, x []float32) error {
	c := e.c
	if len(x) != c.d {
		return fmt.Errorf("codec: encode: token has %d values, codec width is %d", len(x), c.d)
	}
	if len(dst) != c.payloadBytes {
		return fmt.Errorf("codec: encode: destination has %d bytes, payload is %d", len(dst), c.payloadBytes)
	}
	if c.version >= 2 {
		return c.encodeFixed2(dst, x)
	}
	e.encode(dst, x)
	return nil
}

// encodeFixed2 encodes tokens of a version-2 codec into dst, whose size
// the caller checked; an entropy-coded codec has no fixed size.
func (c *Codec) encodeFixed2(dst []byte, xs []float32) error {
	if c.Variable() {
		return fmt.Errorf("codec %08x: entropy-coded, its payload size depends on the values: use AppendTokens", c.ShortID())
	}
	_, err := c.AppendTokens(dst[:0], xs)
	return err
}

// EncodeBatch encodes len(xs)/d tokens, stored back to back, into dst, which
// must hold exactly that many payloads back to back.
func (e *Encoder) EncodeBatch(dst []byte, xs []float32) error {
	c := e.c
	if len(xs)%c.d != 0 {
		return fmt.Errorf("codec: encode: %d values are not a whole number of width-%d tokens", len(xs), c.d)
	}
	n := len(xs) / c.d
	if len(dst) != n*c.payloadBytes {
		return fmt.Errorf("codec: encode: destination has %d bytes, %d tokens of %d bytes need %d", len(dst), n, c.payloadBytes, n*c.payloadBytes)
	}
	if c.version >= 2 {
		return c.encodeFixed2(dst, xs)
	}
	p := c.payloadBytes
	for t := 0; t < n; t++ {
		e.encode(dst[t*p:(t+1)*p], xs[t*c.d:(t+1)*c.d])
	}
	return nil
}

// encode assumes validated lengths.
func (e *Encoder) encode(dst []byte, x []float32) {
	c := e.c
	gainCode := e.coefficients(x)
	if c.gain {
		c.pack(dst, e.y, uint64(gainCode), GainBits)
		return
	}
	c.pack(dst, e.y, 0, 0)
}

// pack writes the cells of the coefficients y after nb pending bits acc
// (the gain, or none), LSB first (docs/codec.md §4.1).
func (c *Codec) pack(dst []byte, y []float32, acc uint64, nb uint) {
	o := 0
	for i, v := range y {
		acc |= uint64(c.q[i].index(v)) << nb
		nb += uint(c.bits[i])
		for nb >= 8 {
			dst[o] = byte(acc)
			o++
			acc >>= 8
			nb -= 8
		}
	}
	if nb > 0 {
		dst[o] = byte(acc)
	}
}

// coefficients fills e.y with the coefficients of x on the kept components,
// divided by the token's gain when the codec has one, and returns the
// binary16 code of that gain.
func (e *Encoder) coefficients(x []float32) uint16 {
	c := e.c
	center(e.xc, x, c.mean)
	project(e.y, c.comps, e.xc)
	if !c.gain {
		return 0
	}
	code, g := gainOf(e.y)
	var inv float32
	if g > 0 {
		inv = 1 / g
	}
	for i, v := range e.y {
		e.y[i] = float32(v * inv)
	}
	return code
}

// maxF16 is the largest finite binary16 value.
const maxF16 = 65504

// gainOf returns a token's gain, the root mean square of its coefficients,
// as a binary16 code and as the float32 that code decodes to. Gains beyond
// the binary16 range saturate at its largest finite value.
func gainOf(y []float32) (uint16, float32) {
	if len(y) == 0 {
		return 0, 0
	}
	var ss float64
	for _, v := range y {
		ss += float64(float64(v) * float64(v))
	}
	g := float32(math.Sqrt(ss / float64(len(y))))
	if !(g <= maxF16) { // also NaN from non-finite inputs
		g = maxF16
	}
	code := half.FromF32(g)
	return code, half.ToF32(code)
}

// center writes x - mean.
func center(dst, x, mean []float32) {
	mean = mean[:len(dst)]
	x = x[:len(dst)]
	for j := range dst {
		dst[j] = x[j] - mean[j]
	}
}

// project writes y[i] = comps[i] . xc, each dot product summed in index
// order in float32. Four rows at a time share the loads of xc.
func project(y, comps, xc []float32) {
	d := len(xc)
	k := len(y)
	i := 0
	for ; i+4 <= k; i += 4 {
		u0 := comps[i*d : (i+1)*d]
		u1 := comps[(i+1)*d : (i+2)*d]
		u2 := comps[(i+2)*d : (i+3)*d]
		u3 := comps[(i+3)*d : (i+4)*d]
		var s0, s1, s2, s3 float32
		for j, v := range xc {
			s0 += float32(u0[j] * v)
			s1 += float32(u1[j] * v)
			s2 += float32(u2[j] * v)
			s3 += float32(u3[j] * v)
		}
		y[i], y[i+1], y[i+2], y[i+3] = s0, s1, s2, s3
	}
	for ; i < k; i++ {
		u := comps[i*d : (i+1)*d]
		var s float32
		for j, v := range xc {
			s += float32(u[j] * v)
		}
		y[i] = s
	}
}

// Decode reconstructs one token from its payload into dst (d values). It
// rejects a payload of the wrong length, nonzero padding bits and a gain
// that is negative or not finite. It allocates nothing and is safe for
// concurrent use.
func (c *Codec) Decode(dst []float32, src []byte) error {
	if len(dst) != c.d {
		return fmt.Errorf("codec: decode: destination has %d values, codec width is %d", len(dst), c.d)
	}
	if c.version >= 2 {
		return c.DecodeTokens(dst, src)
	}
	if len(src) != c.payloadBytes {
		return fmt.Errorf("codec: decode: payload has %d bytes, codec %08x expects %d", len(src), c.ShortID(), c.payloadBytes)
	}
	return c.decode(dst, src)
}

// DecodeBatch decodes len(dst)/d tokens from src, which must hold exactly
// that many payloads back to back.
func (c *Codec) DecodeBatch(dst []float32, src []byte) error {
	if len(dst)%c.d != 0 {
		return fmt.Errorf("codec: decode: %d values are not a whole number of width-%d tokens", len(dst), c.d)
	}
	if c.version >= 2 {
		return c.DecodeTokens(dst, src)
	}
	return c.decodeBatch1(dst, src)
}

// decodeBatch1 is DecodeBatch for version 1.
func (c *Codec) decodeBatch1(dst []float32, src []byte) error {
	n := len(dst) / c.d
	p := c.payloadBytes
	if len(src) != n*p {
		return fmt.Errorf("codec: decode: payload has %d bytes, %d tokens of %d bytes need %d", len(src), n, p, n*p)
	}
	for t := 0; t < n; t++ {
		if err := c.decode(dst[t*c.d:(t+1)*c.d], src[t*p:(t+1)*p]); err != nil {
			return fmt.Errorf("token %d: %w", t, err)
		}
	}
	return nil
}

// bitReader unpacks LSB-first fields from a payload.
type bitReader struct {
	src []byte
	o   int
	acc uint64
	nb  uint
}

func (r *bitReader) read(b uint) uint64 {
	for r.nb < b {
		r.acc |= uint64(r.src[r.o]) << r.nb
		r.o++
		r.nb += 8
	}
	v := r.acc & (1<<b - 1)
	r.acc >>= b
	r.nb -= b
	return v
}

// decode assumes validated lengths. The reconstruction is
// dst[j] = mean[j] + v0*u0[j] + v1*u1[j] + ..., summed left to right in
// float32, four components per pass over dst.
func (c *Codec) decode(dst []float32, src []byte) error {
	r := bitReader{src: src}
	var g float32 = 1
	if c.gain {
		code := uint16(r.read(GainBits))
		if code&0x8000 != 0 || code&0x7c00 == 0x7c00 {
			return fmt.Errorf("codec: decode: gain field %#04x is negative or not finite", code)
		}
		g = half.ToF32(code)
	}
	copy(dst, c.mean)
	d := c.d
	var v [4]float32
	i := 0
	for ; i+4 <= c.k; i += 4 {
		for t := range v {
			q := &c.q[i+t]
			v[t] = q.value(int(r.read(uint(c.bits[i+t]))))
			if c.gain {
				v[t] = float32(v[t] * g)
			}
		}
		axpy4(dst, v, c.comps[i*d:(i+4)*d])
	}
	for ; i < c.k; i++ {
		q := &c.q[i]
		a := q.value(int(r.read(uint(c.bits[i]))))
		if c.gain {
			a = float32(a * g)
		}
		u := c.comps[i*d : (i+1)*d]
		u = u[:len(dst)]
		for j := range dst {
			dst[j] += float32(a * u[j])
		}
	}
	if r.acc != 0 {
		return fmt.Errorf("codec: decode: padding bits of the last payload byte are %#x, want 0", r.acc)
	}
	return nil
}

// axpy4 adds v[t]*rows[t] for four consecutive rows of width len(dst).
func axpy4(dst []float32, v [4]float32, rows []float32) {
	d := len(dst)
	u0 := rows[0:d]
	u1 := rows[d : 2*d]
	u2 := rows[2*d : 3*d]
	u3 := rows[3*d : 4*d]
	a0, a1, a2, a3 := v[0], v[1], v[2], v[3]
	for j := range dst {
		dst[j] = dst[j] + float32(a0*u0[j]) + float32(a1*u1[j]) + float32(a2*u2[j]) + float32(a3*u3[j])
	}
}
