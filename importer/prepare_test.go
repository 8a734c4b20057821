package importer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/internal/testmodels"
)

// A second import into a container's folder is refused unless forced; what
// an interrupted import left is removed with a message; other files are
// never removed.
func TestImportOutputFolder(t *testing.T) {
	src := testmodels.Path(t, testmodels.Stories260KGGUF)
	out := filepath.Join(t.TempDir(), "c")
	if err := Import(src, out, Options{}); err != nil {
		t.Fatal(err)
	}
	var ee *ExistsError
	if err := Import(src, out, Options{}); !errors.As(err, &ee) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("import over a container: %v", err)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	if err := Import(src, out, Options{Force: true, Logger: logger}); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if !strings.Contains(logs.String(), "removing the container") {
		t.Errorf("--force said %q", logs.String())
	}
	if _, err := container.Verify(out); err != nil {
		t.Fatal(err)
	}

	// A killed import's leftovers: the next import clears them, saying so.
	left := filepath.Join(t.TempDir(), "c")
	err := Import(src, left, Options{keepPartial: true, containerOpts: []container.Option{container.WithInterruptAfter(300000)}})
	if !errors.Is(err, container.ErrInterrupted) {
		t.Fatal(err)
	}
	logs.Reset()
	if err := Import(src, left, Options{Logger: logger}); err != nil {
		t.Fatalf("import after an interrupted one: %v", err)
	}
	if !strings.Contains(logs.String(), "removing an interrupted import's files") {
		t.Errorf("leftovers removed without a message: %q", logs.String())
	}

	// A folder with someone else's file is refused, force or not.
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(foreign, "embed.seg"), []byte("x"), 0o644)
	for _, force := range []bool{false, true} {
		if err := Import(src, foreign, Options{Force: force}); err == nil || !strings.Contains(err.Error(), "notes.txt") {
			t.Fatalf("force %v: foreign folder: %v", force, err)
		}
	}
	if _, err := os.Stat(filepath.Join(foreign, "notes.txt")); err != nil {
		t.Fatal("the foreign file was removed")
	}
}

// A cancelled context (a signal) stops the import and removes everything
// it wrote, the folder included.
func TestImportCancelled(t *testing.T) {
	src := testmodels.Path(t, testmodels.Stories260K)
	tok := testmodels.Path(t, testmodels.Tok512)
	for _, at := range []int64{1, 100000, 500000, 1000000} {
		out := filepath.Join(t.TempDir(), "c")
		ctx, cancel := context.WithCancelCause(context.Background())
		stopped := errors.New("interrupted by SIGINT")
		err := Import(src, out, Options{TokenizerPath: tok, Context: ctx, Progress: func(done, total int64) {
			if done >= at {
				cancel(stopped)
			}
		}})
		if !errors.Is(err, stopped) || !strings.Contains(err.Error(), "removed") {
			t.Fatalf("cancelled at %d: %v", at, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cancelled at %d: %s is still there (%v)", at, out, err)
		}
	}
}
