package signals

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

type otherSignal struct{}

func (otherSignal) String() string { return "other" }
func (otherSignal) Signal()        {}

func TestExitCodeAndName(t *testing.T) {
	for _, c := range []struct {
		sig  os.Signal
		name string
		code int
	}{
		{os.Interrupt, "SIGINT", 130},
		{syscall.SIGINT, "SIGINT", 130},
		{syscall.SIGTERM, "SIGTERM", 143},
		{syscall.SIGHUP, "hangup", 129},
		{otherSignal{}, "other", 1},
	} {
		in := &Interrupted{Signal: c.sig}
		if Name(c.sig) != c.name || in.ExitCode() != c.code || in.Error() != "interrupted by "+c.name {
			t.Errorf("%v: name %q, exit %d, %q; want %q, %d", c.sig, Name(c.sig), in.ExitCode(), in.Error(), c.name, c.code)
		}
	}
}

// A signal cancels the context with an *Interrupted cause, which Cause, Err
// and As find; stop ends the context without one.
func TestContext(t *testing.T) {
	ctx, stop := Context(context.Background())
	if Cause(ctx) != nil || Err(ctx) != nil {
		t.Fatalf("live context: cause %v, err %v", Cause(ctx), Err(ctx))
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	in := Cause(ctx)
	if in == nil || in.Signal != syscall.SIGTERM || in.ExitCode() != 143 {
		t.Fatalf("cause %v", in)
	}
	wrapped := fmt.Errorf("import stopped (%w)", Err(ctx))
	if got := As(wrapped); got != in || !errors.Is(wrapped, in) {
		t.Errorf("As(%v) = %v", wrapped, got)
	}
	if As(errors.New("other")) != nil || As(context.Canceled) != nil {
		t.Error("As found a signal in an error without one")
	}
	stop()

	ctx, stop = Context(context.Background())
	stop()
	<-ctx.Done()
	if Cause(ctx) != nil || !errors.Is(Err(ctx), context.Canceled) {
		t.Errorf("stopped context: cause %v, err %v", Cause(ctx), Err(ctx))
	}
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop = Context(parent)
	defer stop()
	cancel()
	<-ctx.Done()
	if Cause(ctx) != nil || !errors.Is(Err(ctx), context.Canceled) {
		t.Errorf("parent cancelled: cause %v, err %v", Cause(ctx), Err(ctx))
	}
}

// A second signal exits at once, with 128 + its number and a line saying
// so, while the first one's clean-up is still running.
func TestSecondSignalExits(t *testing.T) {
	if os.Getenv("SIGNALS_TEST_CHILD") == "1" {
		ctx, _ := Context(context.Background())
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("first:", Cause(ctx))
		time.Sleep(20 * time.Second) // a clean-up that takes long
		os.Exit(0)
	}
	for _, c := range []struct {
		first, second syscall.Signal
		code          int
		name          string
	}{
		{syscall.SIGINT, syscall.SIGTERM, 143, "SIGTERM"},
		{syscall.SIGTERM, syscall.SIGINT, 130, "SIGINT"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSecondSignalExits$")
		cmd.Env = append(os.Environ(), "SIGNALS_TEST_CHILD=1")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewReader(stdout)
		if l, err := lines.ReadString('\n'); l != "ready\n" {
			t.Fatalf("child: %q, %v", l, err)
		}
		cmd.Process.Signal(c.first)
		if l, err := lines.ReadString('\n'); l != "first: interrupted by "+Name(c.first)+"\n" {
			t.Fatalf("child after %v: %q, %v", c.first, l, err)
		}
		start := time.Now()
		cmd.Process.Signal(c.second)
		cmd.Wait()
		took := time.Since(start)
		msg := "seam: second signal (" + c.name + "): exiting without clean-up"
		if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(stderr.String(), msg) || took > 10*time.Second {
			t.Errorf("%v then %v: exit %d after %v, stderr %q; want %d, %q", c.first, c.second, code, took, stderr.String(), c.code, msg)
		}
	}
}
