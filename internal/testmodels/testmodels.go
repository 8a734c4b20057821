// Package testmodels locates the shared test models (../shared/models from the
// repository root) for tests, skipping with a clear message when they are absent.
// CI's .ci/run fails when the folder is missing, so a skip there cannot hide.
package testmodels

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// File names in the shared folder.
const (
	Stories260K     = "stories260K.bin"
	Stories260KQ8   = "stories260K-q8.bin"
	Stories260KGGUF = "stories260K-v1.gguf"
	Tok512          = "tok512.bin"
	GreedyOnceUpon  = "greedy-once-upon-a-time.txt"
)

// Root returns the repository root (the directory holding go.mod).
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Dir returns the shared models folder, or skips the test when it is absent.
// SEAM_MODELS overrides the location.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SEAM_MODELS")
	if dir == "" {
		dir = filepath.Join(Root(), "..", "shared", "models")
	}
	if _, err := os.Stat(filepath.Join(dir, Stories260K)); err != nil {
		skipOrFail(t, "shared test models not found at %s (set SEAM_MODELS or provide ../shared/models): %v", dir, err)
	}
	return dir
}

// Path returns the path of one shared model file, skipping when absent.
func Path(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Dir(t), name)
}
