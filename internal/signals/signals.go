// Package signals turns SIGINT and SIGTERM into a cancelled context, so that
// every long-running command stops the same way: it stops taking work,
// finishes or aborts what is in flight, cleans up, and says why it stopped.
// A second signal, for a user who does not want to wait, exits at once.
package signals

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Interrupted is the cause of a context cancelled by a signal.
type Interrupted struct{ Signal os.Signal }

func (e *Interrupted) Error() string { return "interrupted by " + Name(e.Signal) }

// ExitCode is the shell convention for a process ended by the signal:
// 128 + its number (130 for SIGINT, 143 for SIGTERM).
func (e *Interrupted) ExitCode() int {
	if s, ok := e.Signal.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// Name is the conventional name of a signal: SIGINT, SIGTERM.
func Name(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// Cause returns the signal that cancelled ctx, or nil when ctx is live or was
// cancelled for another reason.
func Cause(ctx context.Context) *Interrupted {
	var in *Interrupted
	if errors.As(context.Cause(ctx), &in) {
		return in
	}
	return nil
}

// As finds an *Interrupted in err's chain, or returns nil.
func As(err error) *Interrupted {
	var in *Interrupted
	if errors.As(err, &in) {
		return in
	}
	return nil
}

// Context returns a context cancelled, with an *Interrupted cause, by the
// first SIGINT or SIGTERM. A second signal prints a line to stderr and exits
// at once with 128 + its number, skipping clean-up. stop releases the signal
// handlers.
func Context(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(&Interrupted{Signal: s})
		case <-done:
			return
		}
		select {
		case s := <-ch:
			in := &Interrupted{Signal: s}
			fmt.Fprintf(os.Stderr, "seam: second signal (%s): exiting without clean-up\n", Name(s))
			os.Exit(in.ExitCode())
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(context.Canceled)
	}
}

// Err is ctx's error with its signal named: the *Interrupted cause when a
// signal cancelled ctx, else ctx.Err().
func Err(ctx context.Context) error {
	if in := Cause(ctx); in != nil {
		return in
	}
	return ctx.Err()
}
