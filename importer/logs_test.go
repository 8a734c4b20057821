package importer

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
)

// An import logs its start (what it reads, how many bytes it will write)
// and its end at Info, and a replaced container at Warn; every line names
// the import as its stage, with session 0, as a pipeline's lines do.
func TestImportLogs(t *testing.T) {
	src := testmodels.Path(t, testmodels.Stories260KGGUF)
	out := filepath.Join(t.TempDir(), "c")
	type line struct {
		Level, Msg, Stage, Src, Out, Format, Config string
		Session                                     *int
		Bytes, Files                                int64
	}
	run := func(force bool) []line {
		var logs bytes.Buffer
		if err := Import(src, out, Options{Force: force, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}); err != nil {
			t.Fatal(err)
		}
		var lines []line
		for _, s := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var l line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			if l.Stage != "import" || l.Session == nil || *l.Session != 0 {
				t.Errorf("a line without the import's stage and session 0: %s", s)
			}
			lines = append(lines, l)
		}
		return lines
	}
	lines := run(false)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want import started and import finished: %+v", len(lines), lines)
	}
	st, fin := lines[0], lines[1]
	if st.Level != "INFO" || st.Msg != "import started" || st.Src != src || st.Out != out || st.Format != "gguf" || st.Bytes <= 0 || st.Config == "" {
		t.Errorf("start: %+v", st)
	}
	if fin.Level != "INFO" || fin.Msg != "import finished" || fin.Src != src || fin.Out != out {
		t.Errorf("end: %+v", fin)
	}
	lines = run(true)
	if len(lines) != 3 || lines[0].Level != "WARN" || lines[0].Msg != "removing the container from "+out+" before importing" || lines[0].Files <= 0 {
		t.Errorf("--force over a container: %+v", lines)
	}
	t.Logf("--force: %s; then %s (%d bytes), %s", lines[0].Msg, lines[1].Msg, lines[1].Bytes, lines[2].Msg)
}
