package synth

import "encoding/binary"

// q40ValueStd is the standard deviation of a Q4_0 code minus 8 when the
// nibbles are uniform on 0..15: sqrt((16^2 - 1) / 12).
const q40ValueStd = 4.6098

// fillQ40 writes Q4_0 blocks: the f16 scale d, then 16 bytes of random
// nibbles (values d*(nibble - 8)).
func (g *generator) fillQ40(b []byte, d uint16) {
	const block = 18
	for i := 0; i+block <= len(b); i += block {
		binary.LittleEndian.PutUint16(b[i:], d)
		binary.LittleEndian.PutUint64(b[i+2:], g.rng.Uint64())
		binary.LittleEndian.PutUint64(b[i+10:], g.rng.Uint64())
	}
}
