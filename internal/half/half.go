// Package half converts between float32 and the 16-bit float formats found in
// model files and on the stage wire: IEEE binary16 (f16) and bfloat16.
package half

import "math"

// ToF32 widens an IEEE binary16 value exactly.
func ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: value = mant * 2^-24, exact in float32.
	f := float32(mant) * (1.0 / (1 << 24))
	if sign != 0 {
		return -f
	}
	return f
}

// FromF32 narrows f to binary16, rounding to nearest with ties to even.
// Values beyond the f16 range become infinities; NaN stays NaN.
func FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 // quiet NaN
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // rebiased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Result is subnormal (or zero): shift the full significand into place.
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e) // 13 for the mantissa width change, plus 1-e
		return sign | uint16(roundShift(m, shift))
	}
	// Normal: round the 23-bit mantissa to 10 bits; a carry into the exponent
	// is correct (it may produce infinity, which is also correct).
	v := uint32(e)<<10 | mant>>13
	rest := mant & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && v&1 == 1) {
		v++
	}
	return sign | uint16(v)
}

// roundShift returns m >> shift rounded to nearest, ties to even.
func roundShift(m, shift uint32) uint32 {
	v := m >> shift
	rest := m & (1<<shift - 1)
	halfway := uint32(1) << (shift - 1)
	if rest > halfway || (rest == halfway && v&1 == 1) {
		v++
	}
	return v
}

// BF16ToF32 widens a bfloat16 value exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
