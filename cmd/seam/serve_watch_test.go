package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A layer file overwritten in place with the same length while a stage
// serves it (nothing faults: the mapping just shows other floats) is
// noticed within about a second: the next request fails with an error that
// names the file, and the stage stays up to say so.
func TestServeNoticesAnOverwriteWhileServing(t *testing.T) {
	ctr := importStories(t)
	stage, addr := serveProc(t, ctr, "0:5", "watched")
	defer stage.cmd.Process.Kill()
	gen := append([]string{"run", "--model", ctr, "--stages", addr, "-n", "12", "--temperature", "0"}, keyFlags(t)...)
	if _, _, err := seamAll(t, append(gen, "Once")...); err != nil {
		t.Fatalf("before the overwrite: %v", err)
	}
	seg := filepath.Join(ctr, "layer-001.seg")
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt([]byte{0x40, 0x40, 0x40, 0x40}, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t0 := time.Now()
	var last error
	for time.Since(t0) < 5*time.Second {
		_, _, last = seamAll(t, append(gen, "Once")...)
		if last != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last == nil || !strings.Contains(last.Error(), seg) || !strings.Contains(last.Error(), "was written to while mapped") {
		t.Fatalf("after overwriting %s in place: %v; want an error naming it", seg, last)
	}
	t.Logf("refused %v after the overwrite: %v", time.Since(t0).Round(time.Millisecond), last)
	select {
	case <-stage.done:
		t.Fatalf("the stage exited: %s", stage.stderr)
	default:
	}
}
