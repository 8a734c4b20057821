package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// failoverChain is three positions of stage processes over a container,
// the middle one with a spare replica: A, B1|B2, C.
type failoverChain struct {
	ctr          string
	a, b2, c     *proc
	addrA, addrC string
	addrB2       string
	stageFlags   []string
}

func startFailoverChain(t *testing.T, ctr string, stageFlags ...string) *failoverChain {
	f := &failoverChain{ctr: ctr, stageFlags: stageFlags}
	f.a, f.addrA = serveProc(t, ctr, "0:2", "A", stageFlags...)
	f.b2, f.addrB2 = serveProc(t, ctr, "2:4", "B2", stageFlags...)
	f.c, f.addrC = serveProc(t, ctr, "4:6", "C", stageFlags...)
	t.Cleanup(func() {
		for _, p := range []*proc{f.a, f.b2, f.c} {
			p.cmd.Process.Kill()
		}
	})
	return f
}

// fault kills or stops p (SIGKILL, SIGSTOP); a stopped process is killed
// by cleanup.
func fault(p *proc, kind string) {
	if kind == "SIGSTOP" {
		p.cmd.Process.Signal(syscall.SIGSTOP)
		return
	}
	p.cmd.Process.Kill()
}

var failoverPrompt = []string{"Once", "upon", "a", "time"}

// Acceptance (issue 12): 20 greedy generations through A, B1|B2, C with B1
// SIGKILLed at a random point of the output, and 20 with it SIGSTOPped:
// every one completes, exits 0, and prints exactly the text of the whole
// model, the head having moved to B2 and replayed the session. Then,
// without a replica and at the default --hang, each fault fails the
// generation within 5 s with an error naming the stage.
func TestFailoverAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 100 processes")
	}
	ctr := q8Container(t)
	const n = "96"
	gen := append([]string{"run", "--model", ctr, "-n", n, "--temperature", "0"}, failoverPrompt...)
	want := mustSeam(t, gen...)
	f := startFailoverChain(t, ctr, "--heartbeat", "100ms")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 12))
	tally := map[string]int{}
	for trial := range 40 {
		kind := "SIGKILL"
		if trial >= 20 {
			kind = "SIGSTOP"
		}
		for attempt := 0; ; attempt++ {
			b1, addrB1 := serveProc(t, ctr, "2:4", "B1", f.stageFlags...)
			stages := f.addrA + "," + addrB1 + "|" + f.addrB2 + "," + f.addrC
			args := append([]string{"run", "--model", ctr, "--stages", stages, "-n", n, "--temperature", "0", "--hang", "500ms",
				"--link-latency-ms", "2"}, keyFlags(t)...)
			head := startProc(t, append(args, failoverPrompt...)...)
			// A random point of the generated text, past the echoed prompt.
			at := len("Once upon a time") + 1 + rng.IntN(len(want)-len("Once upon a time")-8)
			head.until(func() bool { return head.stdout.Len() >= at })
			fault(b1, kind)
			code := head.wait(t, "head", 30*time.Second)
			b1.cmd.Process.Kill()
			<-b1.done
			noFault(t, "head", head.stderr.String())
			if code != 0 {
				t.Fatalf("trial %d: %s of B1 at byte %d: head exited %d:\n%s", trial, kind, at, code, head.stderr)
			}
			if !strings.Contains(head.stderr.String(), "failover") {
				if attempt < 3 {
					tally["finished before the fault"]++
					continue // the generation ended first: nothing was tested
				}
				t.Fatalf("trial %d: no failover logged in 4 attempts:\n%s", trial, head.stderr)
			}
			if got := head.stdout.String(); got != want {
				t.Fatalf("trial %d: %s of B1 at byte %d: text differs from the whole model's\n got: %q\nwant: %q\nstderr:\n%s", trial, kind, at, got, want, head.stderr)
			}
			tally[kind]++
			if trial == 0 || trial == 20 {
				t.Logf("trial %d (%s at byte %d of %d): %s", trial, kind, at, len(want), failoverLine(head.stderr.String()))
			}
			break
		}
	}
	t.Logf("completed with the whole model's text after a failover: %d after SIGKILL, %d after SIGSTOP; %d attempts rerun because the text was complete before the fault",
		tally["SIGKILL"], tally["SIGSTOP"], tally["finished before the fault"])
	if tally["SIGKILL"] != 20 || tally["SIGSTOP"] != 20 {
		t.Errorf("%v, want 20 of each", tally)
	}

	// Without a replica, at the default --hang.
	for _, kind := range []string{"SIGKILL", "SIGSTOP", "SIGKILL", "SIGSTOP"} {
		b1, addrB1 := serveProc(t, ctr, "2:4", "B1", f.stageFlags...)
		args := append([]string{"run", "--model", ctr, "--stages", f.addrA + "," + addrB1 + "," + f.addrC, "-n", "400", "--temperature", "0",
			"--link-latency-ms", "5"}, keyFlags(t)...)
		head := startProc(t, append(args, failoverPrompt...)...)
		head.until(func() bool { return head.stdout.Len() > len("Once upon a time")+8 })
		t0 := time.Now()
		fault(b1, kind)
		code := head.wait(t, "head", 30*time.Second)
		took := time.Since(t0)
		b1.cmd.Process.Kill()
		<-b1.done
		msg := head.stderr.String()
		if code == 0 {
			t.Fatalf("%s of the only B1: the head exited 0:\n%s", kind, msg)
		}
		if !strings.Contains(lastLine(msg), addrB1) {
			t.Errorf("%s of the only B1: the head's error does not name it (%s):\n%s", kind, addrB1, msg)
		}
		if took > 5*time.Second {
			t.Errorf("%s of the only B1: the head failed %v after it, want within 5 s", kind, took)
		}
		t.Logf("no replica, %s: failed after %v: %s", kind, took.Round(time.Millisecond), lastLine(msg))
	}
}

func failoverLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "failover") {
			return l
		}
	}
	return ""
}

// lastLine is the head's final error line ("seam: ...").
func lastLine(stderr string) string {
	var last string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "seam: ") {
			last = l
		}
	}
	return fmt.Sprint(last)
}
