package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/seamlm/seam/tensor"
	"github.com/zeebo/blake3"
)

// File layout constants; docs/codec.md is the specification.
const (
	fileMagic     = "SEAMCODC"
	fileVersion   = 1
	headerSize    = 28
	provSize      = 112
	digestSize    = 32
	flagGain      = 1 << 0
	knownFlags    = flagGain
	statHasMSE    = 1 << 0
	statHasKL     = 1 << 1
	knownStatBits = statHasMSE | statHasKL
)

// fileSize returns the total size of a file with width d and k components,
// and the offset of the mean. d and k must already be bounded.
func fileSize(d, k int) (total, meanOff int, err error) {
	meanOff = headerSize + k + (4-k%4)%4
	kd, err := tensor.MulSize(k, d)
	if err != nil {
		return 0, 0, err
	}
	floats := kd + d + k
	if floats < kd {
		return 0, 0, fmt.Errorf("size of %d floats overflows", kd)
	}
	fb, err := tensor.MulSize(floats, 4)
	if err != nil {
		return 0, 0, err
	}
	total = meanOff + fb + provSize + digestSize
	if total < fb {
		return 0, 0, fmt.Errorf("file size overflows")
	}
	return total, meanOff, nil
}

// body serializes everything before the digest.
func (c *Codec) body() []byte {
	if c.version >= 2 {
		return c.body2()
	}
	// New, Fit and Unmarshal have checked that fileSize succeeds.
	total, meanOff, _ := fileSize(c.d, c.k)
	b := make([]byte, 0, total)
	b = append(b, fileMagic...)
	b = binary.LittleEndian.AppendUint32(b, fileVersion)
	var flags uint32
	if c.gain {
		flags |= flagGain
	}
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(c.d))
	b = binary.LittleEndian.AppendUint32(b, uint32(c.k))
	b = binary.LittleEndian.AppendUint32(b, uint32(c.payloadBytes))
	b = append(b, c.bits...)
	b = append(b, make([]byte, meanOff-len(b))...)
	b = appendF32s(b, c.mean)
	b = appendF32s(b, c.comps)
	b = appendF32s(b, c.clips)
	return c.appendProvenance(b)
}

// appendProvenance appends the provenance and stats block (112 bytes).
func (c *Codec) appendProvenance(b []byte) []byte {
	b = append(b, c.prov.Model[:]...)
	b = binary.LittleEndian.AppendUint32(b, c.prov.Boundary)
	b = append(b, c.prov.CalibData[:]...)
	s := &c.stats
	b = binary.LittleEndian.AppendUint64(b, s.FitSamples)
	b = binary.LittleEndian.AppendUint64(b, s.HoldoutSamples)
	var sf uint32
	if s.HasMSE {
		sf |= statHasMSE
	}
	if s.HasKL {
		sf |= statHasKL
	}
	b = binary.LittleEndian.AppendUint32(b, sf)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.HeldoutMSE))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.HeldoutVar))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(s.HeldoutKL))
	return b
}

func appendF32s(b []byte, v []float32) []byte {
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// seal recomputes the digest after any change to the file's content.
func (c *Codec) seal() { c.digest = blake3.Sum256(c.body()) }

// Marshal returns the codec file.
func (c *Codec) Marshal() []byte {
	b := c.body()
	return append(b, c.digest[:]...)
}

// WriteFile writes the codec file to path.
func (c *Codec) WriteFile(path string) error {
	if err := os.WriteFile(path, c.Marshal(), 0o644); err != nil {
		return fmt.Errorf("codec: write %s: %w", path, err)
	}
	return nil
}

// ReadFile reads and validates a codec file. It reads the header first and
// checks the file's size against it before reading the rest.
func ReadFile(path string) (*Codec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("codec: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("codec: %s: %w", path, err)
	}
	hdr := make([]byte, headerSize)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, fmt.Errorf("codec: %s: reading the %d-byte header: %w", path, headerSize, err)
	}
	d, k, err := parseHeader(hdr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	total, err := allowedSize(hdr, d, k, st.Size())
	if err != nil {
		return nil, fmt.Errorf("codec: %s: %w", path, err)
	}
	b := make([]byte, total)
	copy(b, hdr)
	if _, err := io.ReadFull(f, b[headerSize:]); err != nil {
		return nil, fmt.Errorf("codec: %s: %w", path, err)
	}
	c, err := Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// allowedSize checks a file's size against what its header allows, before
// anything is read or allocated, and returns it.
func allowedSize(hdr []byte, d, k int, size int64) (int, error) {
	if binary.LittleEndian.Uint32(hdr[8:]) == fileVersion2 {
		flags := binary.LittleEndian.Uint32(hdr[12:])
		l, err := newLayout2(d, k, flags)
		if err != nil {
			return 0, fmt.Errorf("d=%d k=%d: %w", d, k, err)
		}
		limit, err := maxSize2(d, k, flags)
		if err != nil {
			return 0, fmt.Errorf("d=%d k=%d: %w", d, k, err)
		}
		if size < int64(l.fixed) || size > int64(limit) {
			return 0, fmt.Errorf("file is %d bytes, header (version 2, flags %#x, d=%d, k=%d) allows %d to %d", size, flags, d, k, l.fixed, limit)
		}
		return int(size), nil
	}
	total, _, err := fileSize(d, k)
	if err != nil {
		return 0, fmt.Errorf("d=%d k=%d: %w", d, k, err)
	}
	if size != int64(total) {
		return 0, fmt.Errorf("file is %d bytes, header (d=%d, k=%d) implies %d", size, d, k, total)
	}
	return total, nil
}

// parseHeader checks magic, version and flags and bounds d and k.
func parseHeader(b []byte) (d, k int, err error) {
	if len(b) < headerSize {
		return 0, 0, fmt.Errorf("codec: file is %d bytes, shorter than the %d-byte header", len(b), headerSize)
	}
	if string(b[:8]) != fileMagic {
		return 0, 0, fmt.Errorf("codec: magic is %q, want %q", b[:8], fileMagic)
	}
	v := binary.LittleEndian.Uint32(b[8:])
	if v != fileVersion && v != fileVersion2 {
		return 0, 0, fmt.Errorf("codec: format version %d, this reader knows %d and %d", v, fileVersion, fileVersion2)
	}
	if f := binary.LittleEndian.Uint32(b[12:]); v == fileVersion && f&^knownFlags != 0 {
		return 0, 0, fmt.Errorf("codec: flags %#x has unknown bits %#x", f, f&^knownFlags)
	}
	d32 := binary.LittleEndian.Uint32(b[16:])
	k32 := binary.LittleEndian.Uint32(b[20:])
	if d32 < 1 || d32 > MaxWidth {
		return 0, 0, fmt.Errorf("codec: width d=%d outside [1, %d]", d32, MaxWidth)
	}
	if k32 > d32 {
		return 0, 0, fmt.Errorf("codec: kept components k=%d exceed width d=%d", k32, d32)
	}
	return int(d32), int(k32), nil
}

// Unmarshal parses and validates a codec file: every dimension is bounded
// and the size checked before anything is allocated, the BLAKE3 digest must
// match, and every value must be in range. Errors name the field.
func Unmarshal(b []byte) (*Codec, error) {
	d, k, err := parseHeader(b)
	if err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint32(b[8:]) == fileVersion2 {
		return unmarshal2(b)
	}
	total, meanOff, err := fileSize(d, k)
	if err != nil {
		return nil, fmt.Errorf("codec: d=%d k=%d: %w", d, k, err)
	}
	if len(b) != total {
		return nil, fmt.Errorf("codec: file is %d bytes, header (d=%d, k=%d) implies %d", len(b), d, k, total)
	}
	body := b[:total-digestSize]
	if sum := blake3.Sum256(body); string(sum[:]) != string(b[total-digestSize:]) {
		return nil, fmt.Errorf("codec: content digest mismatch: stored %x, content hashes to %x (file corrupt or edited)", b[total-digestSize:total-digestSize+8], sum[:8])
	}
	c := &Codec{d: d, k: k, version: 1, gain: binary.LittleEndian.Uint32(b[12:])&flagGain != 0}
	c.bits = append([]uint8(nil), b[headerSize:headerSize+k]...)
	for i, p := range b[headerSize+k : meanOff] {
		if p != 0 {
			return nil, fmt.Errorf("codec: padding byte %d after the bit allocation is %#x, want 0", i, p)
		}
	}
	off := meanOff
	c.mean, off = readF32s(b, off, d)
	c.comps, off = readF32s(b, off, k*d)
	c.clips, off = readF32s(b, off, k)
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.derive()
	if stored := binary.LittleEndian.Uint32(b[24:]); stored != uint32(c.payloadBytes) {
		return nil, fmt.Errorf("codec: header payload size %d bytes disagrees with the bit allocation (%d bits, gain %v), which needs %d", stored, sumBits(c.bits), c.gain, c.payloadBytes)
	}
	if err := c.readProvenance(b[off : off+provSize]); err != nil {
		return nil, err
	}
	copy(c.digest[:], b[total-digestSize:])
	return c, nil
}

func sumBits(bits []uint8) int {
	s := 0
	for _, b := range bits {
		s += int(b)
	}
	return s
}

func readF32s(b []byte, off, n int) ([]float32, int) {
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off+4*i:]))
	}
	return v, off + 4*n
}

// readProvenance parses and checks the provenance and stats block.
func (c *Codec) readProvenance(b []byte) error {
	copy(c.prov.Model[:], b[0:32])
	c.prov.Boundary = binary.LittleEndian.Uint32(b[32:])
	copy(c.prov.CalibData[:], b[36:68])
	s := &c.stats
	s.FitSamples = binary.LittleEndian.Uint64(b[68:])
	s.HoldoutSamples = binary.LittleEndian.Uint64(b[76:])
	sf := binary.LittleEndian.Uint32(b[84:])
	if sf&^knownStatBits != 0 {
		return fmt.Errorf("codec: stat flags %#x has unknown bits %#x", sf, sf&^knownStatBits)
	}
	s.HasMSE, s.HasKL = sf&statHasMSE != 0, sf&statHasKL != 0
	s.HeldoutMSE = math.Float64frombits(binary.LittleEndian.Uint64(b[88:]))
	s.HeldoutVar = math.Float64frombits(binary.LittleEndian.Uint64(b[96:]))
	s.HeldoutKL = math.Float64frombits(binary.LittleEndian.Uint64(b[104:]))
	if s.HasMSE != (s.HoldoutSamples > 0) {
		return fmt.Errorf("codec: held-out MSE flag %v disagrees with %d held-out samples", s.HasMSE, s.HoldoutSamples)
	}
	if err := checkStat("held-out MSE", s.HeldoutMSE, s.HasMSE); err != nil {
		return err
	}
	if err := checkStat("held-out variance", s.HeldoutVar, s.HasMSE); err != nil {
		return err
	}
	return checkStat("held-out KL", s.HeldoutKL, s.HasKL)
}

var errStat = errors.New("must be finite and non-negative when measured, and +0 when not")

// checkStat requires a measured value to be finite and non-negative and an
// unmeasured one to be exactly +0, so that every codec has one encoding.
func checkStat(name string, v float64, measured bool) error {
	if measured && finite64(v) && v >= 0 {
		return nil
	}
	if !measured && math.Float64bits(v) == 0 {
		return nil
	}
	return fmt.Errorf("codec: %s %v (measured %v): %w", name, v, measured, errStat)
}
