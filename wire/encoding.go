package wire

import (
	"fmt"
	"slices"
	"sync"

	"github.com/seamlm/seam/tensor"
)

// EncodingID names an activation encoding on the wire.
type EncodingID uint8

// Built-in encoding ids. Zero means "no activations" (token ids, or a kind
// without a tensor). The ids never change meaning within a generation.
const (
	EncodingNone    EncodingID = 0
	EncodingF32     EncodingID = 1
	EncodingF16     EncodingID = 2
	EncodingQ8      EncodingID = 3
	EncodingQ5      EncodingID = 4
	EncodingQ4      EncodingID = 5
	EncodingLowRank EncodingID = 6 // learned codec; the frame's Codec field picks which
)

var builtinNames = map[EncodingID]string{
	EncodingNone: "none", EncodingF32: "f32", EncodingF16: "f16", EncodingQ8: "q8",
	EncodingQ5: "q5", EncodingQ4: "q4", EncodingLowRank: "lowrank",
}

func (id EncodingID) String() string {
	if n, ok := builtinNames[id]; ok {
		return n
	}
	if e, err := Default.Lookup(id, 0); err == nil {
		return e.Name()
	}
	return fmt.Sprintf("encoding(%d)", uint8(id))
}

// Encoding turns tokens x width float32 activations into bytes and back.
// Implementations must not allocate per call and must be safe for concurrent
// use. Slices must have exactly the sizes the shape implies: src/dst floats
// tokens*width, bytes PayloadSize(tokens, width).
type Encoding interface {
	ID() EncodingID
	Name() string
	// PayloadSize is the exact byte size of tokens x width values. It fails
	// on a shape the encoding cannot carry or whose size overflows.
	PayloadSize(tokens, width int) (int, error)
	// Encode fails, writing nothing useful, on a value it cannot represent
	// faithfully (NaN, infinity, or beyond the encoding's range).
	Encode(dst []byte, src []float32, tokens, width int) error
	// Decode fails on any byte pattern the encoder would not produce that
	// could mislead the receiver: non-finite values or scales, out-of-range
	// codes, nonzero padding.
	Decode(dst []float32, src []byte, tokens, width int) error
}

// VariableEncoding is an Encoding whose payload length depends on the
// values, such as an entropy-coded codec. PayloadSize is then the most bytes
// tokens x width can take, and a frame may declare any length from 1 to it;
// AppendEncode appends the payload to dst and returns it, and Decode gets
// exactly the frame's bytes and must refuse any it would not have written.
type VariableEncoding interface {
	Encoding
	AppendEncode(dst []byte, src []float32, tokens, width int) ([]byte, error)
}

// IsVariable reports whether e's payload length depends on the values.
func IsVariable(e Encoding) bool {
	_, ok := e.(VariableEncoding)
	return ok
}

// CodecEncoding is a learned codec carried by EncodingLowRank frames. Its
// short id travels in the header's Codec field; its identity digest travels
// in the handshake.
type CodecEncoding interface {
	Encoding
	CodecID() uint32
}

// codecOf is the header Codec field for frames written with e.
func codecOf(e Encoding) uint32 {
	if c, ok := e.(CodecEncoding); ok {
		return c.CodecID()
	}
	return 0
}

// Registry maps encoding ids (and learned codec short ids) to encodings.
// It is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	byID   map[EncodingID]Encoding
	codecs map[uint32]CodecEncoding
}

// Default holds the built-in encodings; other packages register theirs here.
var Default = NewRegistry()

// NewRegistry returns a registry holding the built-in encodings.
func NewRegistry() *Registry {
	return NewRegistryOf(F32, F16, Q8, Q5, Q4)
}

// NewRegistryOf returns a registry holding only the given encodings: a
// stage that should accept fewer encodings than the built-ins (or a test).
func NewRegistryOf(encs ...Encoding) *Registry {
	r := &Registry{byID: map[EncodingID]Encoding{}, codecs: map[uint32]CodecEncoding{}}
	for _, e := range encs {
		r.byID[e.ID()] = e
	}
	return r
}

// Register adds an encoding under its own id. EncodingNone and
// EncodingLowRank cannot be registered here (see RegisterCodec).
func (r *Registry) Register(e Encoding) error {
	id := e.ID()
	if id == EncodingNone || id == EncodingLowRank {
		return fmt.Errorf("register encoding %q: id %d is reserved", e.Name(), id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byID[id]; ok {
		return fmt.Errorf("register encoding %q: id %d already used by %q", e.Name(), id, old.Name())
	}
	r.byID[id] = e
	return nil
}

// RegisterCodec adds a learned codec: an encoding whose ID is
// EncodingLowRank, found by its nonzero short id.
func (r *Registry) RegisterCodec(c CodecEncoding) error {
	if c.ID() != EncodingLowRank {
		return fmt.Errorf("register codec %q: its encoding id is %d, want %d (lowrank)", c.Name(), c.ID(), EncodingLowRank)
	}
	if c.CodecID() == 0 {
		return fmt.Errorf("register codec %q: short id 0 is reserved", c.Name())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.codecs[c.CodecID()]; ok {
		return fmt.Errorf("register codec %q: short id %d already used by %q", c.Name(), c.CodecID(), old.Name())
	}
	r.codecs[c.CodecID()] = c
	return nil
}

// Lookup resolves a frame's (encoding, codec) pair. The codec must be zero
// for every encoding except lowrank, and nonzero for lowrank.
func (r *Registry) Lookup(id EncodingID, codec uint32) (Encoding, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if id == EncodingLowRank {
		if codec == 0 {
			return nil, fmt.Errorf("encoding lowrank with codec id 0: %w", ErrMalformed)
		}
		c, ok := r.codecs[codec]
		if !ok {
			return nil, fmt.Errorf("lowrank codec %d is not registered: %w", codec, ErrEncoding)
		}
		return c, nil
	}
	if codec != 0 {
		return nil, fmt.Errorf("codec id %d with encoding %d, want 0: %w", codec, id, ErrMalformed)
	}
	e, ok := r.byID[id]
	if !ok {
		return nil, fmt.Errorf("encoding id %d is not registered: %w", id, ErrEncoding)
	}
	return e, nil
}

// IDs lists the registered encoding ids in increasing order (lowrank once if
// any codec is registered), for a Hello's supported list.
func (r *Registry) IDs() []EncodingID {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]EncodingID, 0, len(r.byID)+1)
	for id := range r.byID {
		ids = append(ids, id)
	}
	if len(r.codecs) > 0 {
		ids = append(ids, EncodingLowRank)
	}
	slices.Sort(ids)
	return ids
}

// checkShape validates a shape and the element count it implies.
func checkShape(tokens, width int) (int, error) {
	if tokens <= 0 || width <= 0 {
		return 0, fmt.Errorf("shape %d tokens x %d width: both must be positive", tokens, width)
	}
	return tensor.MulSize(tokens, width)
}

// checkSizes validates slice lengths against the shape for Encode/Decode.
func checkSizes(e Encoding, nBytes, nFloats, tokens, width int) error {
	n, err := checkShape(tokens, width)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Name(), err)
	}
	size, err := e.PayloadSize(tokens, width)
	if err != nil {
		return err
	}
	if nFloats != n {
		return fmt.Errorf("%s: %d floats for %d tokens x %d width (%d)", e.Name(), nFloats, tokens, width, n)
	}
	if nBytes != size {
		return fmt.Errorf("%s: %d bytes for %d tokens x %d width, need %d: %w", e.Name(), nBytes, tokens, width, size, ErrMalformed)
	}
	return nil
}
