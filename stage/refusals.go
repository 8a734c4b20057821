package stage

import (
	"sync/atomic"

	"github.com/seamlm/seam/wire"
)

// refusalCounters count each refusal by the limit that made it, for
// Refusals and for the Ping statistics (wire.Refusals).
type refusalCounters struct {
	conns, preHandshake, handshakes, trickled      atomic.Uint64
	sessions, sessionsPerConn, sessionsPerIdentity atomic.Uint64
	prefill, inFlight, queueFull                   atomic.Uint64
	idle, routes, cancelled, kv                    atomic.Uint64
	// failedHellos counts connections that ended before their handshake
	// for any reason, refused or not: it paces the log, not a metric.
	failedHellos atomic.Uint64
}

// Refusals returns how many times each limit refused, cut off or abandoned
// something since the stage started. Heads that agree protocol generation
// wire.RefusalsGeneration or later read the same counters in the stage's
// Ping answers.
func (s *Server) Refusals() wire.Refusals {
	r := &s.refusals
	return wire.Refusals{
		Conns: r.conns.Load(), PreHandshake: r.preHandshake.Load(), Handshakes: r.handshakes.Load(), Trickled: r.trickled.Load(),
		Sessions: r.sessions.Load(), SessionsPerConn: r.sessionsPerConn.Load(), SessionsPerIdentity: r.sessionsPerIdentity.Load(),
		Prefill: r.prefill.Load(), InFlight: r.inFlight.Load(), QueueFull: r.queueFull.Load(),
		Idle: r.idle.Load(), Routes: r.routes.Load(), Cancelled: r.cancelled.Load(), KV: r.kv.Load(),
	}
}
