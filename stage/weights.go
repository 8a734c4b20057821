package stage

import (
	"errors"
	"fmt"
	"time"

	"github.com/seamlm/seam/mapped"
)

// withWeights runs fn, which reads this stage's mapped weights, so that a
// fault on them (a segment file truncated under the mapping) comes back as
// an error instead of crashing the process. Every frame the stage computes
// goes through it (processGuarded); the kernels' helper goroutines hand
// their faults back to it (package kernels, catchFault).
func (s *Server) withWeights(fn func() error) error { return mapped.Guard(fn) }

// processGuarded is process under withWeights. A fault marks the stage's
// weights as damaged: the request that met it fails with an error naming
// the file, and every request and session after it is refused with the
// same message, while the process stays up to say so. Restarting the stage
// reopens (and, for a container, re-verifies) its files.
func (s *Server) processGuarded(j *job, head *headConn, up *peer) error {
	err := s.withWeights(func() error { return s.process(j, head, up) })
	if errors.Is(err, mapped.ErrFault) {
		s.markDamaged(err)
		return s.damage()
	}
	return err
}

// markDamaged records the first fault on the weights.
func (s *Server) markDamaged(fault error) {
	s.mu.Lock()
	first := s.damaged == nil
	if first {
		s.damaged = fault
	}
	s.mu.Unlock()
	if first {
		s.log.Error("weights damaged: refusing all work until restarted", "session", 0, "err", fault)
	}
}

// damage is the error every request gets once the weights are damaged, nil
// before.
func (s *Server) damage() error {
	s.mu.Lock()
	d := s.damaged
	s.mu.Unlock()
	if d == nil {
		return nil
	}
	return fmt.Errorf("stage %q cannot compute: its weights changed under it (%v); restart it once the files are whole", s.cfg.Name, d)
}

// watch asks Config.Watch every WatchEvery whether the weights' files
// changed, and marks the weights damaged at the first change.
func (s *Server) watch() {
	every := s.cfg.WatchEvery
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.unwatch:
			return
		case <-t.C:
		}
		if err := s.cfg.Watch(); err != nil {
			s.markDamaged(err)
			return
		}
	}
}
