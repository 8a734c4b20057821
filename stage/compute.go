package stage

import (
	"fmt"
	"time"

	"github.com/seamlm/seam/wire"
)

// A frame's positions go through the layers in chunks, and between two
// chunks the stage checks that the frame is still wanted, so that a long
// prefill whose head has left (or closed or reset the session) stops
// within about one chunk instead of running to its end. Chunks are sized
// to take about chunkTarget each, from the time the previous one took, so
// the check is as frequent on a wide model as on a small one. The result
// is bit for bit the same however the positions are split: LayersBatch
// computes each position exactly as one call with all of them would
// (model.TestBatchIsBitIdentical); and chunks of a few hundred positions
// are no slower than one batch (measured on synth.WideConfig with 1024
// positions on 2 cores: 2.4 s in chunks of 256, 2.8 s in chunks of 16,
// 4.1 s in one batch).
const (
	chunkTarget = 100 * time.Millisecond
	chunkFirst  = 8 // positions in the first chunk, before any is timed
	chunkMin    = 1
	chunkMax    = 256
)

// nextChunk sizes the chunk after one of k positions that took took.
func nextChunk(k int, took time.Duration) int {
	if took <= 0 {
		return chunkMax
	}
	return min(max(int(int64(k)*int64(chunkTarget)/int64(took)), chunkMin), chunkMax)
}

// runLayers runs the frame's n positions, in sess.x, through this stage's
// layers, chunk by chunk, and abandons it between chunks once it is no
// longer wanted. The caller holds sess.mu.
func (s *Server) runLayers(j *job, sess *session, n int) error {
	dim := s.cfg.Model.Config().Dim
	pos := int(j.f.Start)
	for done, k := 0, chunkFirst; done < n; {
		if err := j.stopped(); err != nil {
			return s.abandon(&j.f, done, err)
		}
		k = min(k, n-done)
		t := time.Now()
		if err := s.cfg.Model.LayersBatch(sess.state, sess.x[done*dim:(done+k)*dim], pos+done, k); err != nil {
			return fmt.Errorf("layers [%d, %d) at positions [%d, %d): %w", sess.state.First, sess.state.Last, pos+done, pos+done+k, err)
		}
		done += k
		k = nextChunk(k, time.Since(t))
	}
	return nil
}

// abandon counts a frame given up after done of its positions because of
// cause, and returns the error that says so.
func (s *Server) abandon(f *wire.Frame, done int, cause error) error {
	s.refusals.cancelled.Add(1)
	return &abandonedError{stage: s.cfg.Name, session: f.Session, done: done, n: int(f.Tokens), cause: cause}
}

// abandonedError is a frame the stage stopped computing, or never began,
// because nobody wanted it any more. Its code is session.
type abandonedError struct {
	stage   string
	session uint64
	done, n int
	cause   error
}

func (e *abandonedError) Error() string {
	return fmt.Sprintf("stage %q abandoned this frame of session %d after %d of its %d positions: %v", e.stage, e.session, e.done, e.n, e.cause)
}

func (e *abandonedError) Unwrap() []error { return []error{e.cause, errSession} }
