// Package wire is Seam's stage-to-stage protocol: self-delimiting,
// checksummed frames that carry hidden states (tokens x width float32
// activations) between pipeline stages, token ids into the first stage, and
// logits or sampled ids back to the head. docs/wire.md specifies every byte.
//
// The protocol fails loudly. A receiver never sizes anything from its own
// configuration: the header declares the payload length and the shape, and
// the Framer checks both against hard limits and against each other before
// it allocates or reads a payload byte. Any malformed, oversized,
// unsupported, corrupted or non-finite input is an error naming the field
// and the values that disagree; the request is aborted and the connection,
// now out of step, is not reused. Nothing is clamped, skipped or repaired.
//
// A Framer reads and writes frames on one connection, reusing its buffers.
// Activation encodings (f32, f16, q8, q5, q4, and learned codecs under the
// lowrank id) implement Encoding and are found in a Registry that other
// packages can extend.
package wire
