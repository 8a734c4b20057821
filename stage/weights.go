package stage

import "github.com/seamlm/seam/mapped"

// withWeights runs fn, which reads this stage's mapped weights, so that a
// fault on them (a segment file truncated under the mapping) comes back as
// an error instead of crashing the process. Every call into the model goes
// through it.
func (s *Server) withWeights(fn func() error) error { return mapped.Guard(fn) }
