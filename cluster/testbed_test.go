package cluster_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/internal/netns"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/wire"
)

// The testbed's topology: the head in h; stage hosts a and b on gigabit
// links; c behind 20 Mbit/s with 30 ms of latency on everything it sends
// (tbf on the links, Seam's link emulation in c's processes).
const (
	slowLatency = 30 * time.Millisecond
	mib         = 1 << 20
)

var (
	nodes   = []string{"h", "a", "b", "c"}
	budgets = map[string]int64{"a": 700 * mib, "b": 700 * mib, "c": 400 * mib}
)

func testbedLinks() []netns.Link {
	var ls []netns.Link
	for i, x := range nodes {
		for _, y := range nodes[i+1:] {
			rate := 1000.0
			if x == "c" || y == "c" {
				rate = 20
			}
			ls = append(ls, netns.Link{A: x, B: y, Mbps: rate})
		}
	}
	return ls
}

func needTestbed(t *testing.T) {
	t.Helper()
	if err := netns.Available(); err != nil {
		if os.Getenv("SEAM_REQUIRE_NETNS") == "1" {
			t.Fatalf("network namespace testbed unavailable: %v", err)
		}
		t.Skipf("network namespace testbed unavailable: %v", err)
	}
	if testing.Short() {
		t.Skip("the testbed runs real processes for a minute or more; not in -short")
	}
}

// buildSeam builds the command into dir.
func buildSeam(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "seam")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/seam")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// slowSide is the latency node's processes add to what they send.
func slowSide(node string) time.Duration {
	if node == "c" {
		return slowLatency
	}
	return 0
}

type prober struct{ c net.Conn }

func (p prober) Probe(ctx context.Context, n int) error {
	buf := make([]byte, 4+n)
	binary.LittleEndian.PutUint32(buf, uint32(n))
	if _, err := p.c.Write(buf); err != nil {
		return err
	}
	var ack [1]byte
	_, err := io.ReadFull(p.c, ack[:])
	return err
}

// echoOnce serves one prober connection, sending its acks through the
// node's link emulation, as the node's stage process would.
func echoOnce(ln net.Listener, lat time.Duration) {
	c, err := ln.Accept()
	if err != nil {
		return
	}
	w, err := link.Wrap(c, link.Config{Latency: lat})
	if err != nil {
		c.Close()
		return
	}
	defer w.Close()
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.LittleEndian.Uint32(hdr[:]))); err != nil {
			return
		}
		if _, err := w.Write([]byte{1}); err != nil {
			return
		}
	}
}

// measureLinks measures every pair of nodes as the planner's head would:
// round trips and bandwidth, from the first node of the pair, with the
// second's emulated latency on its answers.
func measureLinks(t *testing.T, tb *netns.Testbed) cluster.Links {
	t.Helper()
	ls := cluster.Links{}
	for i, x := range nodes {
		for _, y := range nodes[i+1:] {
			from, to := x, y
			if slowSide(x) > 0 { // measure towards the slow side
				from, to = y, x
			}
			ln, err := tb.Listen(to, tb.Host(to)+":0")
			if err != nil {
				t.Fatal(err)
			}
			go echoOnce(ln, slowSide(to))
			c, err := tb.Dial(from, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			l, err := cluster.MeasureLink(context.Background(), prober{c}, cluster.MeasureOptions{Pings: 3})
			c.Close()
			ln.Close()
			if err != nil {
				t.Fatalf("%s-%s: %v", from, to, err)
			}
			name := func(n string) string {
				if n == "h" {
					return cluster.HeadName
				}
				return n
			}
			ls.Set(name(from), name(to), l)
			t.Logf("link %s-%s: %v", from, to, l)
		}
	}
	return ls
}

var (
	achievedRE = regexp.MustCompile(`achieved tok/s: ([0-9.]+) \(prompt (\d+) tokens in ([^,]+),`)
)

type runResult struct {
	text            string
	decode, prefill float64 // tok/s
	prompt          int
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func parseRun(t *testing.T, stdout, stderr string) runResult {
	t.Helper()
	m := achievedRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no timing line in the run's stderr:\n%s", stderr)
	}
	dec, _ := strconv.ParseFloat(m[1], 64)
	p, _ := strconv.Atoi(m[2])
	d, err := time.ParseDuration(m[3])
	if err != nil {
		t.Fatalf("prompt time %q: %v", m[3], err)
	}
	return runResult{text: stdout, decode: dec, prefill: float64(p) / d.Seconds(), prompt: p}
}

const prompt = "Once upon a time there was a little robot who lived in a big city full of lights and noise. " +
	"Every morning it walked to the harbour to watch the ships, and every evening it told the old cat what it had seen. " +
	"One day a storm came over the sea"

// runChain starts the plan's stages in their namespaces, runs a greedy
// generation from the head in h through them, and stops the stages.
func runChain(t *testing.T, tb *netns.Testbed, bin, model, tok string, p *cluster.Plan, steps int) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var addrs []string
	var procs []*exec.Cmd
	defer func() {
		for _, c := range procs {
			c.Process.Kill()
			c.Wait()
		}
	}()
	for _, st := range p.Stages {
		node := st.Member.Name
		addr := tb.Host(node) + ":7070"
		args := []string{"serve", "--model", model, "--layers", fmt.Sprintf("%d:%d", st.First, st.Last), "--listen", addr, "--name", node}
		if lat := slowSide(node); lat > 0 {
			args = append(args, "--link-latency-ms", strconv.Itoa(int(lat/time.Millisecond)))
		}
		cmd := tb.Command(ctx, node, bin, args...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := tb.Start(cmd); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		ready := make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(out)
			if sc.Scan() && strings.HasPrefix(sc.Text(), "serving layers") {
				ready <- nil
			} else {
				ready <- fmt.Errorf("stage %s did not start: %q %v", node, sc.Text(), sc.Err())
			}
			io.Copy(io.Discard, out)
		}()
		select {
		case err := <-ready:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("stage %s did not start within 60 s", node)
		}
		addrs = append(addrs, addr)
	}
	head := tb.Command(ctx, "h", bin, "run", "--model", model, "--tokenizer", tok, "--stages", strings.Join(addrs, ","),
		"-n", strconv.Itoa(steps), "--temperature", "0", prompt)
	var stdout, stderr strings.Builder
	head.Stdout, head.Stderr = &stdout, &stderr
	if err := head.Run(); err != nil {
		t.Fatalf("head: %v\n%s", err, stderr.String())
	}
	return parseRun(t, stdout.String(), stderr.String())
}

// The planner on the testbed: its plan beats an even split and exo's
// memory-proportional split on decode and prefill, its prediction is
// within 25% of what is measured, and every chain's greedy text (f32
// wire) equals the whole model's.
func TestPlannerOnTestbed(t *testing.T) {
	needTestbed(t)
	dir := t.TempDir()
	bin := buildSeam(t, dir)
	if out, err := exec.Command(bin, "synth", "--shape", "stories110m", "--out", dir).CombinedOutput(); err != nil {
		t.Fatalf("synth: %v\n%s", err, out)
	}
	model, tok := filepath.Join(dir, "model.bin"), filepath.Join(dir, "tokenizer.bin")
	const generate = 32

	lm, err := loader.Open(model, loader.Options{First: 0, Last: 4, TokenizerPath: tok})
	if err != nil {
		t.Fatal(err)
	}
	promptTokens := len(lm.Tokenizer.Encode(prompt, true, false))
	shape, err := cluster.ShapeOf(lm.Weights)
	if err != nil {
		t.Fatal(err)
	}
	speed, err := cluster.ProbeSpeed(lm.Weights, cluster.ProbeOptions{})
	lm.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("probe: %+v", speed)
	steps := promptTokens + generate

	// The whole model, in one process: the reference text, and a check
	// that this machine runs as fast as the probe says.
	whole := exec.Command(bin, "run", "--model", model, "--tokenizer", tok, "-n", strconv.Itoa(steps), "--temperature", "0", prompt)
	var wout, werr strings.Builder
	whole.Stdout, whole.Stderr = &wout, &werr
	if err := whole.Run(); err != nil {
		t.Fatalf("whole model: %v\n%s", err, werr.String())
	}
	ref := parseRun(t, wout.String(), werr.String())
	if ref.prompt != promptTokens {
		t.Fatalf("the run's prompt has %d tokens, the tokenizer gives %d", ref.prompt, promptTokens)
	}
	wholeStep := 12*speed.DecodeLayer.Seconds() + speed.Head.Seconds()
	t.Logf("whole model: %d-token prompt, decode %.1f tok/s (the probe predicts %.1f), prefill %.0f tok/s",
		ref.prompt, ref.decode, 1/wholeStep, ref.prefill)

	tb, err := netns.New(nodes, testbedLinks())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("testbed cleanup: %v", err)
		}
	})
	links := measureLinks(t, tb)

	req := cluster.Request{Shape: shape, Links: links, Prompt: promptTokens, Generate: generate}
	for _, n := range []string{"a", "b", "c"} {
		req.Members = append(req.Members, cluster.Member{Name: n, Free: budgets[n], Speed: speed, Encodings: []wire.EncodingID{wire.EncodingF32}})
	}
	cmp, err := cluster.Compare(req)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	cmp.Write(&sb)
	t.Logf("plan:\n%s", sb.String())
	if cmp.EvenErr != nil || cmp.ExoErr != nil {
		t.Fatalf("a baseline does not fit: even %v, exo %v", cmp.EvenErr, cmp.ExoErr)
	}
	chains := []struct {
		name string
		p    *cluster.Plan
	}{{"planned", cmp.Plan}, {"even", cmp.Even}, {"exo", cmp.Exo}}

	// A warm-up run (discarded), then each chain twice, in the order ABCCBA.
	runChain(t, tb, bin, model, tok, cmp.Plan, steps)
	got := map[string][]runResult{}
	for _, i := range []int{0, 1, 2, 2, 1, 0} {
		c := chains[i]
		r := runChain(t, tb, bin, model, tok, c.p, steps)
		if r.text != ref.text {
			t.Errorf("%s chain %v: greedy text differs from the whole model's:\n got %q\nwant %q", c.name, c.p.Ranges(), r.text, ref.text)
		}
		got[c.name] = append(got[c.name], r)
	}
	mean := func(rs []runResult, f func(runResult) float64) float64 {
		s := 0.0
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	dec := func(r runResult) float64 { return r.decode }
	pre := func(r runResult) float64 { return r.prefill }
	t.Logf("%-8s %-26s %22s %22s", "chain", "ranges", "decode tok/s (pred)", "prefill tok/s (pred)")
	for _, c := range chains {
		t.Logf("%-8s %-26s %10.2f (%8.2f) %10.1f (%8.1f)", c.name, fmt.Sprint(c.p.Ranges()), mean(got[c.name], dec), c.p.Predicted.Decode,
			mean(got[c.name], pre), c.p.Predicted.Prefill)
	}
	// Speed comparisons mean something only on a machine that runs a
	// process as fast as the probe measured. A shared machine whose other
	// work slows long runs (the probe's short bursts escape it) is told
	// apart by the whole model, alone in one process, running slower than
	// the probe predicts. CI runs alone and must assert.
	if off := math.Abs(ref.decode*wholeStep - 1); off > 0.25 {
		msg := fmt.Sprintf("the whole model decodes at %.2f tok/s, %.0f%% off the probe's %.2f: this machine is too busy to compare speeds (load average %s)",
			ref.decode, 100*off, 1/wholeStep, loadAverage())
		if os.Getenv("SEAM_REQUIRE_NETNS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; speed comparisons not asserted")
	}
	planned := chains[0]
	for _, c := range chains[1:] {
		if mean(got["planned"], dec) <= mean(got[c.name], dec) || mean(got["planned"], pre) <= mean(got[c.name], pre) {
			t.Errorf("the planned chain does not beat the %s split", c.name)
		}
	}
	for _, m := range []struct {
		what      string
		pred, got float64
	}{{"decode", planned.p.Predicted.Decode, mean(got["planned"], dec)}, {"prefill", planned.p.Predicted.Prefill, mean(got["planned"], pre)}} {
		if math.Abs(m.pred-m.got)/m.got > 0.25 {
			t.Errorf("planned %s: predicted %.2f tok/s, measured %.2f: off by more than 25%%", m.what, m.pred, m.got)
		}
	}
}
