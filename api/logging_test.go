package api

import (
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Every line the API logs names the stage (the head) and a session, as
// every other line of Seam does, so that one filter follows a request.
func TestLogLinesNameStageAndSession(t *testing.T) {
	var buf lockedBuffer
	_, hs := fakeServer(t, Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	post(t, hs.URL, "/v1/completions", `{"model":"fake","prompt":"hi","max_tokens":3}`)
	post(t, hs.URL, "/v1/completions", `{"model":"fake","prompt":"hi","n":2}`)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("%d log lines for two requests:\n%s", len(lines), buf.String())
	}
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["stage"] != "head" || rec["session"] == nil {
			t.Errorf("log line without stage=head and a session: %s", line)
		}
	}
}
