// Package entropy is a static arithmetic coder (a byte-oriented range coder)
// for short streams of symbols, each coded with its own frequency Table.
//
// The coder keeps an interval [low, low+rng) of a 56-bit window onto the
// binary fraction being written. Coding a symbol of frequency f and
// cumulative frequency c under a table of precision p sets r = rng>>p,
// low += r*c and rng = r*f; the last symbol of the alphabet takes the
// rounding remainder instead (rng -= r*c), so that the slots partition the
// interval exactly. A carry out of the window is propagated into the bytes
// already written. While rng < 1<<48 the top byte of the window is written
// and the window moves on by 8 bits. Everything is integer arithmetic on
// uint64, identical on every platform.
//
// At the end the encoder writes the number in the final interval with the
// fewest significant bytes, the decoder reading implicit zero bytes past the
// end of its input. The stream is therefore canonical: for each sequence
// of symbols (and tables) there is exactly one byte string the decoder
// accepts when it decodes that many symbols with those tables, and
// Decoder.Finish reports an error for every other byte string: re-encoding
// the symbols of an accepted stream gives the same bytes. The stream does
// not carry its symbol count; the caller fixes it. docs/entropy.md
// describes the format byte by byte.
package entropy

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Coder state: a window of winBits bits, renormalized to keep rng >= 1<<botBits.
const (
	winBits = 56
	botBits = winBits - 8
	winMask = 1<<winBits - 1
	winTop  = 1 << winBits
	winBot  = 1 << botBits
)

// Errors of the coder. Each returned error wraps one of them.
var (
	ErrSymbol = errors.New("entropy: symbol out of range")    // Encoder: a symbol outside its table, or a nil table
	ErrTable  = errors.New("entropy: nil table")              // Decoder: Decode(nil) or a zero Table
	ErrStream = errors.New("entropy: not a canonical stream") // Decoder.Finish: the bytes are not what the encoder writes
)

// Encoder writes one stream. The zero Encoder is ready to use; Reset (or
// Finish) makes it ready for the next stream, keeping its buffer, so a
// reused Encoder does not allocate once its buffer has grown to the stream
// size.
type Encoder struct {
	low uint64 // < winTop between calls
	rng uint64 // in [winBot, winTop]; 0 means not started
	buf []byte
	err error
}

// Reset starts a new stream.
func (e *Encoder) Reset() {
	e.low, e.rng, e.buf, e.err = 0, winTop, e.buf[:0], nil
}

// Encode appends sym coded with table t. A nil table or a symbol outside
// 0..t.Symbols()-1 is not coded: the stream is marked failed and Finish
// reports the first such error.
func (e *Encoder) Encode(t *Table, sym int) {
	if e.rng == 0 {
		e.Reset()
	}
	if t == nil || uint(sym) >= uint(len(t.syms)) {
		if e.err == nil {
			n := 0
			if t != nil {
				n = len(t.syms)
			}
			e.err = fmt.Errorf("%w: symbol %d of a table of %d symbols", ErrSymbol, sym, n)
		}
		return
	}
	s := t.syms[sym]
	r := e.rng >> t.prec
	c := r * uint64(s.cum)
	e.low += c
	nr := r * uint64(s.freq)
	if sym == len(t.syms)-1 {
		nr = e.rng - c
	}
	e.rng = nr
	if e.low >= winTop {
		e.carry()
		e.low -= winTop
	}
	for e.rng < winBot {
		e.buf = append(e.buf, byte(e.low>>botBits))
		e.low = e.low << 8 & winMask
		e.rng <<= 8
	}
}

// carry adds one to the bytes written so far. The coded number stays below
// 1, so the carry always stops inside the stream.
func (e *Encoder) carry() {
	for i := len(e.buf) - 1; i >= 0; i-- {
		e.buf[i]++
		if e.buf[i] != 0 {
			return
		}
	}
	if e.err == nil {
		e.err = errors.New("entropy: internal error: carry out of the stream")
	}
}

// flushPoint returns the value in [low, low+rng) with the most trailing
// zero bytes within the window, the smallest such. rng >= 1<<48, so it is a
// multiple of 1<<48 at least.
func flushPoint(low, rng uint64) uint64 {
	for t := winBits; t > 0; t -= 8 {
		u := uint64(1)<<t - 1
		if m := (low + u) &^ u; m-low < rng {
			return m
		}
	}
	return low
}

// Finish ends the stream, appends it to dst and resets the encoder. It
// returns dst unchanged and the error when an Encode call failed.
func (e *Encoder) Finish(dst []byte) ([]byte, error) {
	if e.rng == 0 {
		e.Reset()
	}
	if e.err != nil {
		err := e.err
		e.Reset()
		return dst, err
	}
	v := flushPoint(e.low, e.rng)
	if v >= winTop {
		e.carry()
		v -= winTop
	}
	for s := botBits; s >= 0; s -= 8 {
		e.buf = append(e.buf, byte(v>>s))
	}
	n := len(e.buf)
	for n > 0 && e.buf[n-1] == 0 {
		n--
	}
	dst = append(dst, e.buf[:n]...)
	err := e.err
	e.Reset()
	return dst, err
}

// Decoder reads one stream. The zero Decoder reads the empty stream.
type Decoder struct {
	src  []byte
	pos  int    // bytes read into the window, implicit zeros included
	code uint64 // the coded number minus low, in the window; < rng
	rng  uint64 // as the encoder's; 0 means not started
	err  error
}

// Reset starts decoding src. The decoder keeps src (it does not copy it)
// until the next Reset.
func (d *Decoder) Reset(src []byte) {
	d.src, d.pos, d.code, d.rng, d.err = src, 0, 0, winTop, nil
	for range winBits / 8 {
		d.code = d.code<<8 | uint64(d.next())
	}
}

func (d *Decoder) next() byte {
	var b byte
	if d.pos < len(d.src) {
		b = d.src[d.pos]
	}
	d.pos++
	return b
}

// Decode returns the next symbol, coded with table t. It always returns a
// symbol in 0..t.Symbols()-1, whatever the input (0 when t is nil or not
// made by this package). Errors are sticky: after a nil table, Decode
// returns 0 and Finish reports ErrTable. Every input decodes to some
// symbols; Finish tells whether it is the stream of those symbols.
func (d *Decoder) Decode(t *Table) int {
	if d.rng == 0 || t == nil || len(t.look) == 0 || d.err != nil {
		return d.decodeCold(t)
	}
	rng, code := d.rng, d.code
	r := rng >> (t.prec & 63)
	// The rounding remainder at the top belongs to the last symbol.
	q := min(code/r, t.lastCum)
	// The symbol holding q: t.slot, inlined by hand.
	e := t.look[q>>(t.shift&63)]
	var sym int
	var cum, freq uint64
	if e>>lookSlow == 0 {
		c0 := e >> lookCum0 & lookMask
		c1 := e >> lookCum1 & lookMask
		c2 := e >> lookCum2 & lookMask
		up := -((c1 - q - 1) >> 63) // all ones when q >= cum[lo+1], branch-free
		cum = c0 + (c1-c0)&up
		freq = c1 + (c2-c1)&up - cum
		sym = int(e&lookSymMk) + int(up&1)
	} else {
		sym, cum, freq = t.search(int(e&lookSymMk), q)
	}
	c := r * cum
	code -= c
	nr, lr := r*freq, rng-c
	if q >= t.lastCum {
		nr = lr
	}
	rng = nr
	for rng < winBot {
		code = code<<8 | uint64(d.next())
		rng <<= 8
	}
	d.rng, d.code = rng, code
	return sym
}

// decodeCold is Decode on a decoder not started, a nil or zero table, or a
// failed stream.
func (d *Decoder) decodeCold(t *Table) int {
	if d.rng == 0 {
		d.Reset(d.src)
	}
	if t == nil || len(t.look) == 0 {
		if d.err == nil {
			d.err = fmt.Errorf("%w: Decode with a nil or zero Table", ErrTable)
		}
		return 0
	}
	if d.err != nil {
		return 0
	}
	return d.Decode(t)
}

// Finish checks, after the last symbol, that the input is exactly the
// stream the encoder writes for the symbols decoded: no byte beyond those
// the decoder read, no trailing zero byte (the decoder implies them), and
// the final bytes the encoder's flush would choose. It returns an error
// wrapping ErrStream otherwise (or ErrTable after Decode(nil)).
func (d *Decoder) Finish() error {
	if d.rng == 0 {
		d.Reset(d.src)
	}
	if d.err != nil {
		return d.err
	}
	if len(d.src) > d.pos {
		return fmt.Errorf("%w: %d bytes after the end of the stream", ErrStream, len(d.src)-d.pos)
	}
	if n := len(d.src); n > 0 && d.src[n-1] == 0 {
		return fmt.Errorf("%w: trailing zero byte", ErrStream)
	}
	// The window of the coded number: the last bytes read.
	var win uint64
	for i := d.pos - winBits/8; i < d.pos; i++ {
		var b byte
		if i < len(d.src) {
			b = d.src[i]
		}
		win = win<<8 | uint64(b)
	}
	low := (win - d.code) & winMask
	if flushPoint(low, d.rng)-low != d.code {
		return fmt.Errorf("%w: the final bytes are not the shortest for the symbols", ErrStream)
	}
	return nil
}

// MaxBytes returns an upper bound on the size of a stream of the given
// number of symbols, coded with any tables of precision at most precision:
//
//	floor((symbols*precision + ceil(symbols / 2^(47-precision))) / 8) + 1
//
// (0 for no symbols). Proof sketch: before each symbol rng >= 2^48, so the
// new rng is at least (rng/2^p - 1)*f >= rng * f/2^p * (1 - 2^(p-48)); a
// symbol narrows the interval by at most p + 2^(p-47) bits (f >= 1). After
// S window moves (S bytes written before the flush) the final rng is at
// most 2^56, so 8S is at most the total narrowing. The flush writes 7 bytes
// of which the last 6 are zero (rng >= 2^48 holds a multiple of 2^48) and
// dropped: S+1 bytes at most. It fails for a negative count, a precision
// out of range, or a bound that overflows int.
func MaxBytes(symbols int, precision uint) (int, error) {
	if symbols < 0 {
		return 0, fmt.Errorf("entropy: MaxBytes: negative symbol count %d", symbols)
	}
	if precision < MinPrecision || precision > MaxPrecision {
		return 0, fmt.Errorf("%w: precision %d, want %d..%d", ErrPrecision, precision, MinPrecision, MaxPrecision)
	}
	if symbols == 0 {
		return 0, nil
	}
	n := uint64(symbols)
	hi, b := bits.Mul64(n, uint64(precision))
	slack := (n + 1<<(47-precision) - 1) >> (47 - precision)
	b, c := bits.Add64(b, slack, 0)
	if hi != 0 || c != 0 || b/8+1 > math.MaxInt {
		return 0, fmt.Errorf("entropy: MaxBytes: bound for %d symbols overflows int", symbols)
	}
	return int(b/8 + 1), nil
}
