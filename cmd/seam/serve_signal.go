package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seamlm/seam/internal/signals"
	"github.com/spf13/cobra"
)

// serveUntilSignal serves until SIGINT or SIGTERM, then shuts the stage down
// gracefully: connected heads are told why, in-flight frames finish or are
// abandoned, and only then does it return (and the caller unmap).
func serveUntilSignal(cmd *cobra.Command, srv server, ln net.Listener, name string) error {
	ctx := cmd.Context()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err // the listener failed on its own
	case <-ctx.Done():
	}
	reason := "stopped"
	if in := signals.Cause(ctx); in != nil {
		reason = "received " + signals.Name(in.Signal)
	}
	start := time.Now()
	srv.Shutdown(reason)
	if err := <-served; err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "seam serve: stage %q shut down (%s) in %v\n", name, reason, time.Since(start).Round(time.Millisecond))
	return nil
}

// server is a stage or a pool member.
type server interface {
	Serve(net.Listener) error
	Shutdown(reason string) error
}

// defaultStageName is host[A:B], or the host alone for a pool member
// (b == 0), which learns its range from the head.
func defaultStageName(a, b int) string {
	host, _ := os.Hostname()
	if b == 0 {
		return host
	}
	return fmt.Sprintf("%s[%d:%d]", host, a, b)
}

// parseRange reads "A:B".
func parseRange(s string) (int, int, error) {
	as, bs, ok := strings.Cut(s, ":")
	a, errA := strconv.Atoi(as)
	b, errB := strconv.Atoi(bs)
	if !ok || errA != nil || errB != nil || a < 0 || b <= a {
		return 0, 0, fmt.Errorf("--layers %q: want A:B with 0 <= A < B", s)
	}
	return a, b, nil
}
