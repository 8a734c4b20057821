package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seamlm/seam/internal/signals"
	"github.com/seamlm/seam/internal/testmodels"
)

// startAPI runs `seam api --listen 127.0.0.1:0 args...` in this process and
// returns its base URL. It is stopped (as by a signal) at the end of the test,
// and must then exit cleanly.
func startAPI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := newRootCmd()
	pr, pw := io.Pipe()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append([]string{"api", "--listen", "127.0.0.1:0", "--poll", "100ms"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	url, err := servingURL(pr)
	if err != nil {
		cancel()
		t.Fatalf("seam api %v: %v (%v)", args, err, <-done)
	}
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("seam api %v exited with %v", args, err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("seam api %v did not stop within 15 s", args)
		}
	})
	return url
}

// servingURL reads the "serving ... on http://ADDR ..." line.
func servingURL(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut(line, " on ")
	if !ok {
		return "", fmt.Errorf("unexpected first line %q", line)
	}
	return strings.Fields(rest)[0], nil
}

// SIGTERM and SIGINT on seam api: it stops accepting, ends the stream in
// flight with an error event (never [DONE]) and exits 0, saying so.
func TestAPISignal(t *testing.T) {
	dir := testmodels.Dir(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		child := exec.Command(os.Args[0], "-test.run=^TestAPIChild$")
		child.Env = append(os.Environ(), "SEAM_TEST_API_CHILD="+strings.Join([]string{"api", "--listen", "127.0.0.1:0", "--split", "3",
			"--model", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", filepath.Join(dir, testmodels.Tok512), "--link-latency-ms", "2"}, "\x1f"))
		stdout, _ := child.StdoutPipe()
		var stderr strings.Builder
		child.Stderr = &stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		url, err := servingURL(stdout)
		if err != nil {
			child.Process.Kill()
			t.Fatalf("%v: %v\n%s", sig, err, stderr.String())
		}
		go io.Copy(io.Discard, stdout)
		resp, err := http.Post(url+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"stories260K","prompt":"Once upon a time","max_tokens":480,"stream":true}`))
		if err != nil {
			child.Process.Kill()
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for i := 0; i < 3 && sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "data: ") {
				i++
			}
		}
		child.Process.Signal(sig)
		var last string
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				last = sc.Text()
			}
		}
		resp.Body.Close()
		exited := make(chan error, 1)
		go func() { exited <- child.Wait() }()
		select {
		case err := <-exited:
			if err != nil || !strings.Contains(stderr.String(), "stopped cleanly") {
				t.Errorf("%v: exit %v, stderr:\n%s", sig, err, stderr.String())
			}
		case <-time.After(15 * time.Second):
			child.Process.Kill()
			t.Fatalf("%v: seam api still running 15 s later", sig)
		}
		if !strings.Contains(last, `"error"`) || !strings.Contains(last, "shutting down") {
			t.Errorf("%v: the stream's last event is %q, want an error saying the server is shutting down", sig, last)
		}
	}
}

// TestAPIChild is not a test: TestAPISignal runs the test binary with
// SEAM_TEST_API_CHILD set to make it a `seam` process it can signal.
func TestAPIChild(t *testing.T) {
	args := os.Getenv("SEAM_TEST_API_CHILD")
	if args == "" {
		t.Skip("a helper process for TestAPISignal")
	}
	cmd := newRootCmd()
	cmd.SetArgs(strings.Split(args, "\x1f"))
	ctx, _ := signals.Context(context.Background()) // as main does
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "seam:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
