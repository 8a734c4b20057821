package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/seamlm/seam/scheduler"
)

// streamWriteTimeout bounds each write to a streaming client, so that one
// that stops reading cannot hold a generation slot forever.
const streamWriteTimeout = 30 * time.Second

// sse writes server-sent events. The status line and headers go out with the
// first event, so that a request that fails before producing anything (a
// stage down at prefill, say) still gets a real HTTP error status.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       *job
	started bool
}

func (s *sse) start() error {
	if s.started {
		return nil
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	if s.j.chat {
		return s.write(s.j.first())
	}
	return nil
}

// send writes one data event holding v as JSON, then flushes it.
func (s *sse) send(v any) error {
	if err := s.start(); err != nil {
		return err
	}
	return s.write(v)
}

func (s *sse) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw(b)
}

func (s *sse) raw(data []byte) error {
	s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	buf := make([]byte, 0, len(data)+8)
	buf = append(append(append(buf, "data: "...), data...), "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

// runStream generates with every chunk sent as it comes, then the finish
// reason, the usage when asked, and [DONE]. A failure after the first event
// ends the stream with an error event and no [DONE], which OpenAI's clients
// raise as an error: a cut-off answer never looks complete.
func (s *Server) runStream(w http.ResponseWriter, ctx context.Context, j *job) int {
	st := &sse{w: w, rc: http.NewResponseController(w), j: j}
	offset := 0
	res, err := s.sched.Run(ctx, j.req, func(c scheduler.Chunk) error {
		if err := st.send(j.chunk(c, offset)); err != nil {
			return err
		}
		for _, t := range c.Tokens {
			offset += len(t.Text)
		}
		return nil
	})
	s.metrics.completed(res.CompletionTokens)
	if err == nil {
		err = st.send(j.last(res.FinishReason))
		if err == nil && j.includeUsage {
			err = st.write(j.usageChunk(res))
		}
		if err == nil {
			err = st.raw([]byte("[DONE]"))
		}
		if err == nil {
			return http.StatusOK
		}
	}
	e := s.runError(ctx, j, err)
	if !st.started {
		return fail(w, e)
	}
	if e.Status != 499 {
		st.raw(e.body())
	}
	return e.Status
}
