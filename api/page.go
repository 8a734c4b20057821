package api

import (
	"embed"
	"io/fs"
	"net/http"
	"time"
)

// The page at / is three small files embedded in the binary: no CDN, no
// build step, and it works offline.
//
//go:embed web
var webFiles embed.FS

func pageHandler() http.Handler {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// statusJSON is what the page polls at /status.
type statusJSON struct {
	Model         string         `json:"model"`
	Info          string         `json:"info"`
	ContextLen    int            `json:"context_length"`
	UptimeSeconds float64        `json:"uptime_seconds"`
	Ready         bool           `json:"ready"`
	Error         string         `json:"error,omitempty"`
	Active        int            `json:"active_requests"`
	Queued        int            `json:"queued_requests"`
	MaxConcurrent int            `json:"max_concurrent"`
	Queue         int            `json:"queue"`
	SampledTokens uint64         `json:"tokens_sampled_total"`
	Stages        []stageJSON    `json:"stages"`
	Boundaries    []boundaryJSON `json:"boundaries"`
}

type stageJSON struct {
	Stage         int     `json:"stage"`
	Addr          string  `json:"addr"`
	Name          string  `json:"name"`
	First         int     `json:"first_layer"`
	Last          int     `json:"last_layer"`
	Up            bool    `json:"up"`
	Error         string  `json:"error,omitempty"`
	RTTMs         float64 `json:"rtt_ms"`
	ComputeMsTok  float64 `json:"compute_ms_per_token"`
	Positions     uint64  `json:"positions"`
	Sessions      int     `json:"sessions"`
	KVBytes       uint64  `json:"kv_bytes"`
	ComputeSecond float64 `json:"compute_seconds"`
}

type boundaryJSON struct {
	From           string  `json:"from"`
	To             string  `json:"to"`
	Encoding       string  `json:"encoding"`
	Bytes          uint64  `json:"bytes"`
	BytesPerToken  float64 `json:"bytes_per_token"`
	BytesPerSecond float64 `json:"bytes_per_second"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// status reports the model, the admission state, the stages and the wire,
// as the engine last saw them (it does not ping: /health does).
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	t := s.cfg.Engine.Topology()
	st := statusJSON{Model: s.cfg.ModelName, Info: s.cfg.ModelInfo, ContextLen: s.cfg.ContextLen, UptimeSeconds: time.Since(s.started).Seconds(),
		Ready: t.Err == "", Error: t.Err, MaxConcurrent: cap(s.admit.slots), Queue: s.admit.queue,
		SampledTokens: s.metrics.sampled.Load(), Stages: []stageJSON{}, Boundaries: []boundaryJSON{}}
	st.Active = len(s.admit.slots)
	s.admit.mu.Lock()
	st.Queued = s.admit.waiting
	s.admit.mu.Unlock()
	for _, x := range t.Stages {
		st.Ready = st.Ready && x.Up
		st.Stages = append(st.Stages, stageJSON{Stage: x.Index + 1, Addr: x.Addr, Name: x.Name, First: x.First, Last: x.Last, Up: x.Up, Error: x.Err,
			RTTMs: ms(x.RTT), ComputeMsTok: ms(x.ComputePerToken), Positions: x.Positions, Sessions: x.Sessions, KVBytes: x.KVBytes, ComputeSecond: x.ComputeSeconds})
	}
	for _, b := range t.Boundaries {
		st.Boundaries = append(st.Boundaries, boundaryJSON{From: b.From, To: b.To, Encoding: b.Encoding, Bytes: b.Bytes, BytesPerToken: b.BytesPerToken, BytesPerSecond: b.BytesPerSecond})
	}
	writeJSON(w, http.StatusOK, st)
}
