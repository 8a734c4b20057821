// Package cluster plans where a model runs in a pool of machines.
//
// A pool member describes itself (free memory, the compute speed a short
// probe of the model's own matmul shapes measured, the encodings and codecs
// it decodes); the head measures the links between members (round-trip time
// and bandwidth); the planner then chooses which members hold layers, in
// which order, how many layers each, and the wire encoding of each
// boundary, to maximise predicted throughput within every member's memory
// and a per-boundary quality budget. Every choice comes with a one-line
// reason, and a plan that cannot fit is refused with the shortfall named.
//
// The package is pure logic over these descriptions: it opens no
// connection. Package pipeline dials the chain a Plan describes.
//
// The throughput model is that of today's head: one session at a time, a
// prompt sent as one Prefill frame, then one Decode frame per token, each
// crossing every stage in order and returning to the head. A step's time is
// the sum of each stage's compute and each hop's one-way latency plus
// transfer time; nothing overlaps. Decode tok/s is 1 / step time; prefill
// tok/s is prompt tokens / prefill time.
package cluster
