package stage

import (
	"context"
	"errors"
	"fmt"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
)

// A frame's positions go through the layers in the stage's batcher
// (package batch): at each step every session with a frame computing
// contributes its next chunk of positions (Config.Chunk, 64 by default), and
// the step runs them as one batch, so that each weight matrix is streamed
// once per step however many sessions are active. Between steps the
// batcher drops a frame whose context has ended, so that a long prefill
// whose head has left (or closed or reset the session) stops within about
// one step instead of running to its end. The result is bit for bit the
// same however the positions are grouped, within a session or across
// sessions (model.TestBatchIsBitIdentical, TestMultiSessionBatchIsBitIdentical).

// runLayers runs the frame's n positions, in sess.x, through this stage's
// layers in the shared steps, and, when logits is not nil (the last
// stage), the classifier for the frame's last len(logits)/vocab positions.
// The caller holds sess.mu.
func (s *Server) runLayers(j *job, sess *session, n int, logits []float32) error {
	dim := s.cfg.Model.Config().Dim
	pos := int(j.f.Start)
	ctx, stop := j.context()
	defer stop()
	err := s.batcher.Run(ctx, sess.state, sess.x[:n*dim], pos, n, logits)
	switch {
	case err == nil:
		return nil
	case j.stopped() != nil:
		return s.abandon(&j.f, max(0, sess.state.Next()-pos), j.stopped())
	case errors.Is(err, model.ErrKVBudget):
		s.refusals.kv.Add(1)
		return fmt.Errorf("stage %q cannot hold positions [%d, %d) of session %d: %w (--kv-budget): %w", s.cfg.Name, pos, pos+n, j.f.Session, err, wire.ErrLimit)
	}
	return fmt.Errorf("layers [%d, %d) at positions [%d, %d): %w", sess.state.First, sess.state.Last, pos, pos+n, err)
}

// context is a context that ends when the job is no longer wanted: its
// connection ended, or its session's epoch did.
func (j *job) context() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(j.in.ctx)
	if j.ep == nil {
		return ctx, func() { cancel(nil) }
	}
	stop := context.AfterFunc(j.ep.ctx, func() { cancel(context.Cause(j.ep.ctx)) })
	return ctx, func() { stop(); cancel(nil) }
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
