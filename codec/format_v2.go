package codec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/seamlm/seam/codec/entropy"
	"github.com/seamlm/seam/tensor"
	"github.com/zeebo/blake3"
)

// Version 2 file layout (docs/codec.md §11.1).
const (
	fileVersion2   = 2
	flagEntropy    = 1 << 1
	flagWeights    = 1 << 2
	flagTrellis    = 1 << 3 // with flagEntropy: trellis-coded, two tables per component
	flagClasses    = 1 << 4 // with flagTrellis: token classes, a class block and tables per class
	knownFlags2    = flagEntropy | flagWeights | flagTrellis | flagClasses
	provSize2      = provSize + 8 // plus the mean stream size
	maxTableBytes2 = 16 + 2*entropy.MaxSymbols
)

// layout2 is the fixed part of a version-2 file: offsets of the sections
// whose sizes d, k and the flags decide. Tables (entropy scheme) follow the
// last float section and have their own sizes.
type layout2 struct {
	meanOff, floatsEnd int // floats: mean, components, clips or steps, weights
	fixed              int // every byte but the tables
}

func newLayout2(d, k int, flags uint32) (layout2, error) {
	var l layout2
	l.meanOff = headerSize
	if flags&flagEntropy == 0 {
		l.meanOff += k + (4-k%4)%4
	}
	kd, err := tensor.MulSize(k, d)
	if err != nil {
		return l, err
	}
	floats := kd + d + k
	if flags&flagWeights != 0 {
		floats += k
	}
	fb, err := tensor.MulSize(floats, 4)
	if err != nil {
		return l, err
	}
	l.floatsEnd = l.meanOff + fb
	l.fixed = l.floatsEnd + provSize2 + digestSize
	if l.fixed < fb {
		return l, fmt.Errorf("file size overflows")
	}
	return l, nil
}

// maxSize2 is the largest a version-2 file with this header can be.
func maxSize2(d, k int, flags uint32) (int, error) {
	l, err := newLayout2(d, k, flags)
	if err != nil {
		return 0, err
	}
	if flags&flagEntropy == 0 {
		return l.fixed, nil
	}
	tables, extra := k, 0
	if flags&flagTrellis != 0 {
		tables = 2 * k
	}
	if flags&flagClasses != 0 {
		tables *= maxClasses
		extra = maxClassesSize(k) + maxTableBytes2 // the class block and the class table
	}
	t, err := tensor.MulSize(tables, maxTableBytes2)
	if err != nil {
		return 0, err
	}
	if l.fixed+t+extra < t {
		return 0, fmt.Errorf("file size overflows")
	}
	return l.fixed + t + extra, nil
}

func (c *Codec) flags2() uint32 {
	var f uint32
	switch c.scheme {
	case schemeEntropy:
		f |= flagEntropy
	case schemeTrellis:
		f |= flagEntropy | flagTrellis
	}
	if c.weights != nil {
		f |= flagWeights
	}
	if c.cls != nil {
		f |= flagClasses
	}
	return f
}

// body2 serializes a version-2 codec, everything before the digest.
func (c *Codec) body2() []byte {
	flags := c.flags2()
	l, _ := newLayout2(c.d, c.k, flags) // checked when the codec was made
	b := make([]byte, 0, l.fixed)
	b = append(b, fileMagic...)
	b = binary.LittleEndian.AppendUint32(b, fileVersion2)
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(c.d))
	b = binary.LittleEndian.AppendUint32(b, uint32(c.k))
	b = binary.LittleEndian.AppendUint32(b, uint32(c.payloadBytes))
	if c.scheme == schemeFixed {
		b = append(b, c.bits...)
		b = append(b, make([]byte, l.meanOff-len(b))...)
	}
	b = appendF32s(b, c.mean)
	b = appendF32s(b, c.comps)
	if c.scheme == schemeFixed {
		b = appendF32s(b, c.clips)
	} else {
		b = appendF32s(b, c.Steps())
	}
	b = appendF32s(b, c.weights)
	if c.cls != nil {
		b = c.cls.appendBinary(b)
		b = c.cls.table.AppendBinary(b)
	}
	for _, t := range c.tables {
		b = t.AppendBinary(b)
	}
	b = append(b, make([]byte, (4-len(b)%4)%4)...)
	b = c.appendProvenance(b)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(c.stats.MeanBytes))
}

// unmarshal2 parses and validates a version-2 file (the header's magic and
// version already checked).
func unmarshal2(b []byte) (*Codec, error) {
	flags := binary.LittleEndian.Uint32(b[12:])
	if flags&^knownFlags2 != 0 {
		return nil, fmt.Errorf("codec: version 2 flags %#x has unknown bits %#x (the gain, bit 0, is a version-1 feature)", flags, flags&^knownFlags2)
	}
	if flags&flagTrellis != 0 && flags&flagEntropy == 0 {
		return nil, fmt.Errorf("codec: version 2 flags %#x: trellis-coded (bit 3) without entropy coding (bit 1)", flags)
	}
	if flags&flagClasses != 0 && flags&flagTrellis == 0 {
		return nil, fmt.Errorf("codec: version 2 flags %#x: token classes (bit 4) without trellis coding (bit 3)", flags)
	}
	d, k := int(binary.LittleEndian.Uint32(b[16:])), int(binary.LittleEndian.Uint32(b[20:]))
	l, err := newLayout2(d, k, flags)
	if err != nil {
		return nil, fmt.Errorf("codec: d=%d k=%d: %w", d, k, err)
	}
	maxSize, err := maxSize2(d, k, flags)
	if err != nil {
		return nil, fmt.Errorf("codec: d=%d k=%d: %w", d, k, err)
	}
	if len(b) < l.fixed || len(b) > maxSize || (flags&flagEntropy == 0 && len(b) != l.fixed) {
		return nil, fmt.Errorf("codec: file is %d bytes, header (version 2, flags %#x, d=%d, k=%d) allows %d to %d", len(b), flags, d, k, l.fixed, maxSize)
	}
	body := b[:len(b)-digestSize]
	if sum := blake3.Sum256(body); string(sum[:]) != string(b[len(body):]) {
		return nil, fmt.Errorf("codec: content digest mismatch: stored %x, content hashes to %x (file corrupt or edited)", b[len(body):len(body)+8], sum[:8])
	}
	c := &Codec{d: d, k: k, version: 2}
	if flags&flagTrellis != 0 {
		c.scheme = schemeTrellis
	} else if flags&flagEntropy != 0 {
		c.scheme = schemeEntropy
	} else {
		c.bits = append([]uint8(nil), b[headerSize:headerSize+k]...)
		for i, p := range b[headerSize+k : l.meanOff] {
			if p != 0 {
				return nil, fmt.Errorf("codec: padding byte %d after the bit allocation is %#x, want 0", i, p)
			}
		}
	}
	off := l.meanOff
	c.mean, off = readF32s(b, off, d)
	c.comps, off = readF32s(b, off, k*d)
	var perComp []float32
	perComp, off = readF32s(b, off, k)
	if flags&flagWeights != 0 {
		c.weights, off = readF32s(b, off, k)
	}
	end := len(b) - provSize2 - digestSize
	if flags&flagClasses != 0 {
		if c.cls, off, err = readClasses(b[:end], off, k); err != nil {
			return nil, err
		}
	}
	if c.scheme != schemeFixed {
		read := c.readTables
		if c.scheme == schemeTrellis {
			read = c.readTrellisTables
		}
		if off, err = read(b[:end], off, perComp); err != nil {
			return nil, err
		}
		for i, p := range b[off:end] {
			if p != 0 {
				return nil, fmt.Errorf("codec: padding byte %d after the tables is %#x, want 0", i, p)
			}
		}
		if end-off >= 4 {
			return nil, fmt.Errorf("codec: %d bytes after the tables; padding is at most 3", end-off)
		}
	} else {
		c.clips = perComp
	}
	if err := c.validate2(); err != nil {
		return nil, err
	}
	c.derive()
	if stored := binary.LittleEndian.Uint32(b[24:]); stored != uint32(c.payloadBytes) {
		return nil, fmt.Errorf("codec: header payload size %d bytes disagrees with the codec, which needs %d", stored, c.payloadBytes)
	}
	if err := c.readProvenance(b[end : end+provSize]); err != nil {
		return nil, err
	}
	c.stats.MeanBytes = math.Float64frombits(binary.LittleEndian.Uint64(b[end+provSize:]))
	if c.scheme != schemeFixed {
		if !finite64(c.stats.MeanBytes) || !(c.stats.MeanBytes > 0) || c.stats.MeanBytes > float64(c.payloadBytes) {
			return nil, fmt.Errorf("codec: mean stream size %v bytes is not in (0, %d]", c.stats.MeanBytes, c.payloadBytes)
		}
	} else if math.Float64bits(c.stats.MeanBytes) != 0 {
		return nil, fmt.Errorf("codec: mean stream size %v bytes in a codec with fixed bits, want +0", c.stats.MeanBytes)
	}
	copy(c.digest[:], b[len(body):])
	return c, nil
}

// readTables parses the k entropy tables from b[off:] with the steps.
func (c *Codec) readTables(b []byte, off int, steps []float32) (int, error) {
	for i := 0; i < c.k; i++ {
		t, n, err := entropy.ParseTable(b[off:])
		if err != nil {
			return 0, fmt.Errorf("codec: table of component %d: %w", i, err)
		}
		off += n
		if t.Precision() != EntropyPrecision {
			return 0, fmt.Errorf("codec: table of component %d has precision %d, want %d", i, t.Precision(), EntropyPrecision)
		}
		cells := t.Symbols()
		if cells%2 != 1 || cells < 3 {
			return 0, fmt.Errorf("codec: table of component %d has %d cells, want an odd number of at least 3 (indices -q..q)", i, cells)
		}
		if !finite32(steps[i]) || !(steps[i] > 0) {
			return 0, fmt.Errorf("codec: steps[%d]=%v is not finite and positive", i, steps[i])
		}
		q := newECQuant(steps[i], cells/2)
		if top := q.value(q.qmax); !finite32(top) {
			return 0, fmt.Errorf("codec: steps[%d]=%v puts the outermost level of %d cells at %v", i, steps[i], cells, top)
		}
		c.ec = append(c.ec, q)
		c.tables = append(c.tables, t)
	}
	return off, nil
}

// readTrellisTables parses a trellis-coded codec's 2k tables from b[off:]
// with the steps: component i's union-0 table (2q+1 cells, q >= 1) and then
// its union-1 table (exactly 2q+2 cells).
func (c *Codec) readTrellisTables(b []byte, off int, steps []float32) (int, error) {
	classes := 1
	c.steps = steps
	if c.cls != nil {
		t, n, err := entropy.ParseTable(b[off:])
		if err != nil {
			return 0, fmt.Errorf("codec: class table: %w", err)
		}
		off += n
		if t.Precision() != EntropyPrecision || t.Symbols() != c.cls.n() {
			return 0, fmt.Errorf("codec: class table has %d cells at precision %d, want %d at %d", t.Symbols(), t.Precision(), c.cls.n(), EntropyPrecision)
		}
		c.cls.table, classes = t, c.cls.n()
	}
	for cl := 0; cl < classes; cl++ {
		var err error
		if off, err = c.readClassTables(b, off, steps, cl); err != nil {
			return 0, err
		}
	}
	return off, nil
}

// readClassTables parses the 2k tables of class cl (the only class without
// token classes), whose steps are the base steps times the class's
// multiplier.
func (c *Codec) readClassTables(b []byte, off int, steps []float32, cl int) (int, error) {
	where := ""
	mult := float32(1)
	if c.cls != nil {
		where, mult = fmt.Sprintf(" of class %d", cl), c.cls.mults[cl]
	}
	for i := 0; i < c.k; i++ {
		var pair [2]*entropy.Table
		for a := range pair {
			t, n, err := entropy.ParseTable(b[off:])
			if err != nil {
				return 0, fmt.Errorf("codec: union-%d table of component %d%s: %w", a, i, where, err)
			}
			off += n
			if t.Precision() != EntropyPrecision {
				return 0, fmt.Errorf("codec: union-%d table of component %d%s has precision %d, want %d", a, i, where, t.Precision(), EntropyPrecision)
			}
			pair[a] = t
		}
		cells0, cells1 := pair[0].Symbols(), pair[1].Symbols()
		if cells0%2 != 1 || cells0 < 3 {
			return 0, fmt.Errorf("codec: union-0 table of component %d%s has %d cells, want an odd number of at least 3 (indices -q..q)", i, where, cells0)
		}
		if cells1 != cells0+1 {
			return 0, fmt.Errorf("codec: union-1 table of component %d%s has %d cells, want %d (indices -q-1..q with q=%d)", i, where, cells1, cells0+1, cells0/2)
		}
		if !finite32(steps[i]) || !(steps[i] > 0) {
			return 0, fmt.Errorf("codec: steps[%d]=%v is not finite and positive", i, steps[i])
		}
		step := classStep(steps[i], mult)
		if !finite32(step) || !(step > 0) {
			return 0, fmt.Errorf("codec: steps[%d]=%v times class %d's multiplier %v is %v", i, steps[i], cl, mult, step)
		}
		q := newTCQuant(step, cells0/2)
		if top := q.value(1, q.q); !finite32(top) {
			return 0, fmt.Errorf("codec: steps[%d]=%v%s puts the outermost level of %d cells at %v", i, step, where, cells1, top)
		}
		c.tc = append(c.tc, q)
		c.tables = append(c.tables, pair[0], pair[1])
	}
	return off, nil
}

// validate2 checks a version-2 codec's values; the entropy scheme's steps
// and tables were checked as they were read.
func (c *Codec) validate2() error {
	if c.gain {
		return fmt.Errorf("codec: version 2 has no gain")
	}
	for i, w := range c.weights {
		if !finite32(w) || !(w > 0) {
			return fmt.Errorf("codec: weights[%d]=%v is not finite and positive", i, w)
		}
	}
	if c.scheme != schemeFixed {
		c.bits, c.clips = nil, nil
		return c.validateComponents()
	}
	return c.validate()
}
