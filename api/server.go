// Package api serves a model over HTTP in OpenAI's shapes: /v1/models,
// /v1/chat/completions and /v1/completions (streamed with server-sent events
// or not), /health, Prometheus /metrics, and a status and chat page at /.
// It knows HTTP and OpenAI's JSON; it renders chat templates and tokenizes,
// admits requests (--max-concurrent, --queue), and hands token ids to the
// scheduler. It knows nothing of stages or frames.
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/seamlm/seam/chat"
	"github.com/seamlm/seam/scheduler"
	"github.com/seamlm/seam/tokenizer"
)

// Tokenizer is the model's vocabulary.
type Tokenizer = tokenizer.Tokenizer

// Template renders a conversation into a prompt (chat's Jinja templates).
type Template interface {
	Render(msgs []chat.Message, opt chat.Options) (chat.Rendered, error)
}

// Config describes what a Server serves.
type Config struct {
	Engine     scheduler.Engine
	Tokenizer  Tokenizer
	Template   Template // nil: chat.Fallback, the documented plain format
	ContextLen int
	ModelName  string // the id clients use
	// ModelInfo describes the model for the page (shape, file).
	ModelInfo string
	// MaxConcurrent requests generate at once; Queue more wait for a slot;
	// beyond that a request is refused with 429.
	MaxConcurrent int
	Queue         int
	MaxBody       int64 // bytes; larger bodies get 413
	Logger        *slog.Logger
}

// Defaults for Config's limits.
const (
	DefaultMaxConcurrent = 8
	DefaultQueue         = 32
	DefaultMaxBody       = 4 << 20
)

// Server is the HTTP API. Create it with New, serve it with Serve, stop it
// with Shutdown.
type Server struct {
	cfg     Config
	sched   *scheduler.Scheduler
	log     *slog.Logger
	admit   *admission
	metrics *metrics
	mux     *http.ServeMux
	started time.Time
	// maxPiece is the longest text of any token, in bytes: a prompt longer
	// than maxPiece x context cannot fit, and is refused before tokenizing
	// (tokenizing megabytes costs seconds of CPU).
	maxPiece int

	// closing is cancelled by Shutdown: every request's context derives
	// from it, so in-flight streams end (with an error event) at once.
	closing context.Context
	close   context.CancelFunc
	mu      sync.Mutex
	servers []*http.Server
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil || cfg.Tokenizer == nil || cfg.ModelName == "" {
		return nil, errors.New("api: an engine, a tokenizer and a model name are required")
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.Queue < 0 {
		return nil, fmt.Errorf("api: queue %d: want 0 or more", cfg.Queue)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The API is the head's front: its lines are the head's (stage "head"),
	// and belong to no one session (an HTTP request may use none, or one
	// the scheduler opens, which the scheduler's own lines name).
	s := &Server{cfg: cfg, log: cfg.Logger.With("stage", "head", "session", 0), started: time.Now(), maxPiece: 1}
	for id := range cfg.Tokenizer.VocabSize() {
		s.maxPiece = max(s.maxPiece, len(cfg.Tokenizer.Piece(id)))
	}
	s.metrics = newMetrics(cfg.Engine)
	s.admit = newAdmission(cfg.MaxConcurrent, cfg.Queue, s.metrics)
	sched, err := scheduler.New(scheduler.Config{Engine: cfg.Engine, Tokenizer: cfg.Tokenizer, ContextLen: cfg.ContextLen, Observer: s.metrics})
	if err != nil {
		return nil, err
	}
	s.sched = sched
	s.closing, s.close = context.WithCancel(context.Background())
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /v1/models", s.listModels)
	m.HandleFunc("GET /v1/models/{id}", s.getModel)
	m.HandleFunc("POST /v1/chat/completions", s.counted("chat", s.chatCompletions))
	m.HandleFunc("POST /v1/completions", s.counted("completions", s.completions))
	m.HandleFunc("GET /health", s.health)
	m.HandleFunc("GET /status", s.status)
	m.Handle("GET /metrics", s.metrics.handler())
	m.Handle("GET /", pageHandler())
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: typeNotFound, Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	})
	s.mux = m
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return s.closing },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	s.servers = append(s.servers, hs)
	s.mu.Unlock()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting connections, aborts in-flight requests (streams
// end with an error event; their sessions are closed on every stage), and
// waits for the handlers to return or ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	servers := s.servers
	s.mu.Unlock()
	s.close()
	var first error
	for _, hs := range servers {
		if err := hs.Shutdown(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// counted wraps a completion handler with the request metrics and a log line.
func (s *Server) counted(endpoint string, h func(http.ResponseWriter, *http.Request, string) int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := newID()
		t0 := time.Now()
		status := h(w, r, id)
		s.metrics.request(endpoint, status)
		s.log.Info("request", "id", id, "endpoint", endpoint, "status", status, "duration", time.Since(t0).Round(time.Millisecond), "remote", r.RemoteAddr)
	}
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Server) modelObject() map[string]any {
	return map[string]any{"id": s.cfg.ModelName, "object": "model", "created": s.started.Unix(), "owned_by": "seam"}
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.modelObject()}})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != s.cfg.ModelName {
		writeError(w, modelNotFound(id, s.cfg.ModelName))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// health answers 200 only when every stage answers a ping now.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.cfg.Engine.Ready(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}
