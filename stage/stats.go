package stage

import (
	"github.com/seamlm/seam/batch"
	"github.com/seamlm/seam/model"
	"sync/atomic"
	"time"

	"github.com/seamlm/seam/wire"
)

// counters are what a stage tells a head that pings it: cumulative work and
// traffic, so that the head can show time and bytes per token (the compute
// time is the batcher's).
type counters struct {
	positions   atomic.Uint64
	downBytes   atomic.Uint64
	resultBytes atomic.Uint64
}

// computed records n positions computed.
func (c *counters) computed(n int) {
	c.positions.Add(uint64(n))
}

// frameBytes is the size on the wire of a frame of tokens x width values in
// enc (token ids when enc is nil).
func frameBytes(enc wire.Encoding, tokens, width int) uint64 {
	if enc == nil {
		return uint64(wire.HeaderSize + 4*tokens)
	}
	n, err := enc.PayloadSize(tokens, width)
	if err != nil {
		return 0
	}
	return uint64(wire.HeaderSize + n)
}

// Stats returns the stage's counters and what it holds now.
func (s *Server) Stats() wire.StageStats {
	s.mu.Lock()
	n := len(s.sessions)
	s.mu.Unlock()
	// Compute time is the batcher's: frames of several sessions share
	// its steps, so their own durations overlap.
	return wire.StageStats{
		ComputeNanos: uint64(s.batcher.Stats().Busy), Positions: s.stats.positions.Load(),
		DownBytes: s.stats.downBytes.Load(), ResultBytes: s.stats.resultBytes.Load(),
		KVBytes: uint64(s.kv.Used()), Sessions: uint32(n), MaxSessions: uint32(s.cfg.MaxSessions),
		MaxPrefill: uint32(s.cfg.MaxPrefill), Refusals: s.Refusals(),
	}
}

// pong answers a head's Ping with the stage's stats, in the layout of the
// generation agreed with it (the refusal counters from
// wire.RefusalsGeneration on).
func (s *Server) pong(hc *headConn, req uint64) error {
	st := s.Stats()
	return hc.write(func(fr *wire.Framer) error { return fr.WritePing(req, &st) })
}

// heartbeat sends the head hc a Ping with request id 0, carrying the
// stage's stats, every Config.Heartbeat until the returned stop is called:
// the frame being computed may take longer than the head waits for a
// silent stage, and the heartbeat tells it that this stage is alive.
// Generation 1 heads know no Ping and get none.
func (s *Server) heartbeat(hc *headConn) (stop func()) {
	every := s.cfg.Heartbeat
	if every <= 0 || hc.gen < wire.PingGeneration {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				st := s.Stats()
				if err := hc.write(func(fr *wire.Framer) error { return fr.WritePing(0, &st) }); err != nil {
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// BatchStats are the stage's batcher's counters: steps run, positions
// computed in them, and the time spent computing.
func (s *Server) BatchStats() batch.Stats { return s.batcher.Stats() }

// KVPool is the pool of the sessions' KV cache blocks.
func (s *Server) KVPool() *model.KVPool { return s.kv }
