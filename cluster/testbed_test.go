package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/internal/netns"
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
		if os.Getenv("SEAM_REQUIRE_NETNS") == "1" || os.Getenv("CI") != "" {
			t.Fatalf("network namespace testbed unavailable: %v", err)
		}
		t.Skipf("network namespace testbed unavailable: %v", err)
	}
	if testing.Short() {
		t.Skip("the testbed runs real processes for a minute or more; not in -short")
	}
}

// fixture is what the process tests share: the command, a
// stories110M-shaped model with random weights, and a key per node with
// a trust file listing them all.
type fixture struct {
	bin, model, tok, dir string
}

var fixtureOnce struct {
	sync.Once
	fx  *fixture
	err error
}

func getFixture(t testing.TB) *fixture {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seam-cluster-test-")
		if err != nil {
			fixtureOnce.err = err
			return
		}
		bin, err := buildSeam(dir)
		if err != nil {
			fixtureOnce.err = err
			return
		}
		if out, err := exec.Command(bin, "synth", "--shape", "stories110m", "--out", dir).CombinedOutput(); err != nil {
			fixtureOnce.err = fmt.Errorf("synth: %v\n%s", err, out)
			return
		}
		var trust strings.Builder
		for _, n := range nodes {
			out, err := exec.Command(bin, "keygen", "--out", filepath.Join(dir, n+".key")).Output()
			if err != nil {
				fixtureOnce.err = fmt.Errorf("keygen: %v", err)
				return
			}
			fmt.Fprintf(&trust, "%s %s\n", strings.TrimSpace(string(out)), n)
		}
		if err := os.WriteFile(filepath.Join(dir, "trust"), []byte(trust.String()), 0o644); err != nil {
			fixtureOnce.err = err
			return
		}
		fixtureOnce.fx = &fixture{bin: bin, model: filepath.Join(dir, "model.bin"), tok: filepath.Join(dir, "tokenizer.bin"), dir: dir}
	})
	if fixtureOnce.err != nil {
		t.Fatal(fixtureOnce.err)
	}
	return fixtureOnce.fx
}

// keys are node's --key and --trust flags.
func (fx *fixture) keys(node string) []string {
	return []string{"--key", filepath.Join(fx.dir, node+".key"), "--trust", filepath.Join(fx.dir, "trust")}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureOnce.fx != nil {
		os.RemoveAll(fixtureOnce.fx.dir)
	}
	os.Exit(code)
}

// buildSeam builds the command into dir.
func buildSeam(dir string) (string, error) {
	bin := filepath.Join(dir, "seam")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/seam")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// slowSide is the latency node's processes add to what they send.
func slowSide(node string) time.Duration {
	if node == "c" {
		return slowLatency
	}
	return 0
}

var (
	// seam run's timing line: "prefill: 144 tokens in 1.94s (74.2 tok/s); decode: 32 tokens in 1.46s (22.0 tok/s); ..."
	achievedRE = regexp.MustCompile(`prefill: (\d+) tokens in (\S+) \([0-9.]+ tok/s\); decode: (\d+) tokens in (\S+) \(`)
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

func parseRun(t testing.TB, stdout, stderr string) runResult {
	t.Helper()
	m := achievedRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no timing line in the run's stderr:\n%s", stderr)
	}
	p, _ := strconv.Atoi(m[1])
	pd, err1 := time.ParseDuration(m[2])
	n, _ := strconv.Atoi(m[3])
	dd, err2 := time.ParseDuration(m[4])
	if err1 != nil || err2 != nil || pd <= 0 || dd <= 0 {
		t.Fatalf("timing line %q: %v %v", m[0], err1, err2)
	}
	return runResult{text: stdout, decode: float64(n) / dd.Seconds(), prefill: float64(p) / pd.Seconds(), prompt: p}
}

const prompt = "Once upon a time there was a little robot who lived in a big city full of lights and noise. " +
	"Every morning it walked to the harbour to watch the ships, and every evening it told the old cat what it had seen. " +
	"One day a storm came over the sea"

// startProc starts seam in node's namespace and waits for its first line
// on stdout, which must start with ready.
func startProc(t *testing.T, ctx context.Context, tb *netns.Testbed, node, bin, ready string, args ...string) (*exec.Cmd, string) {
	t.Helper()
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
	started := make(chan error, 1)
	var first string
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() && strings.HasPrefix(sc.Text(), ready) {
			first = sc.Text()
			started <- nil
		} else {
			started <- fmt.Errorf("%s in %s did not start: %q %v", args[0], node, sc.Text(), sc.Err())
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("%s in %s did not start within 90 s", args[0], node)
	}
	return cmd, first
}

func stop(cmds []*exec.Cmd) {
	for _, c := range cmds {
		c.Process.Signal(os.Interrupt)
		c.Wait()
	}
}

// runHead runs a greedy generation from the head in h.
func runHead(t *testing.T, ctx context.Context, tb *netns.Testbed, bin, model, tok string, steps int, chain ...string) (runResult, string) {
	t.Helper()
	args := append([]string{"-v", "run", "--model", model, "--tokenizer", tok, "-n", strconv.Itoa(steps), "--temperature", "0"}, getFixture(t).keys("h")...)
	args = append(args, chain...)
	head := tb.Command(ctx, "h", bin, append(args, prompt)...)
	var stdout, stderr strings.Builder
	head.Stdout, head.Stderr = &stdout, &stderr
	if err := head.Run(); err != nil {
		t.Fatalf("head: %v\n%s", err, stderr.String())
	}
	return parseRun(t, stdout.String(), stderr.String()), stderr.String()
}

// runFixed starts stages holding the given ranges (on port 7071, beside the
// pool members on 7070) and runs the head through them.
func runFixed(t *testing.T, ctx context.Context, tb *netns.Testbed, bin, model, tok string, steps int, p *cluster.Plan) runResult {
	t.Helper()
	var addrs []string
	var procs []*exec.Cmd
	for _, st := range p.Stages {
		addr := tb.Host(st.Member.Name) + ":7071"
		p, _ := startProc(t, ctx, tb, st.Member.Name, bin, "serving layers", append([]string{"serve", "--model", model,
			"--layers", fmt.Sprintf("%d:%d", st.First, st.Last), "--listen", addr, "--name", st.Member.Name}, getFixture(t).keys(st.Member.Name)...)...)
		procs = append(procs, p)
		addrs = append(addrs, addr)
	}
	defer stop(procs)
	r, _ := runHead(t, ctx, tb, bin, model, tok, steps, "--stages", strings.Join(addrs, ","))
	return r
}

var memberProbeRE = regexp.MustCompile(`free, ([0-9.]+) ms per layer per token \(decode\)`)

var plannedRE = regexp.MustCompile(`msg="pool planned" chain=(\S+) ranges="([^"]+)" decode_tok_s=([0-9.]+) prefill_tok_s=([0-9.]+)`)

// The planner on the testbed: its plan beats an even split and exo's
// memory-proportional split on decode and prefill, its prediction is
// within 25% of what is measured, and every chain's greedy text (f32
// wire) equals the whole model's.
func TestPlannerOnTestbed(t *testing.T) {
	needTestbed(t)
	fx := getFixture(t)
	bin, model, tok := fx.bin, fx.model, fx.tok
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
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The pool: one member per stage host, each with its memory budget.
	var pool []string
	var members []*exec.Cmd
	var memberDecode []float64 // ms per layer, as each member's probe measured it
	for _, n := range []string{"a", "b", "c"} {
		addr := tb.Host(n) + ":7070"
		p, line := startProc(t, ctx, tb, n, bin, "pool member", append([]string{"serve", "--model", model, "--listen", addr,
			"--name", n, "--memory", fmt.Sprintf("%dMiB", budgets[n]/mib)}, fx.keys(n)...)...)
		members = append(members, p)
		pool = append(pool, addr)
		t.Log(line)
		if m := memberProbeRE.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			memberDecode = append(memberDecode, v)
		}
	}
	defer stop(members)

	// The first run measures the pool, plans and assigns; it is the
	// warm-up, discarded. Later planned runs reuse the assignment.
	r, log := runHead(t, ctx, tb, bin, model, tok, steps, "--pool", strings.Join(pool, ","))
	m := plannedRE.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("the head logged no plan:\n%s", log)
	}
	predDecode, _ := strconv.ParseFloat(m[3], 64)
	predPrefill, _ := strconv.ParseFloat(m[4], 64)
	t.Logf("the head planned chain %s, ranges %s, predicted decode %.2f tok/s, prefill %.1f tok/s", m[1], m[2], predDecode, predPrefill)
	if r.text != ref.text {
		t.Errorf("planned chain: greedy text differs from the whole model's:\n got %q\nwant %q", r.text, ref.text)
	}
	if strings.Contains(m[1], tb.Host("c")) {
		t.Errorf("the plan uses c, behind the slow link, though a and b hold the model")
	}

	// The splits to compare with, over all three hosts in order.
	dummy := cluster.Links{}
	for i, x := range append([]string{cluster.HeadName}, "a", "b", "c") {
		for _, y := range []string{"a", "b", "c"}[i:] {
			dummy.Set(x, y, cluster.Link{RTT: time.Millisecond, Mbps: 100})
		}
	}
	req := cluster.Request{Shape: shape, Links: dummy, Prompt: promptTokens, Generate: generate}
	for _, n := range []string{"a", "b", "c"} {
		req.Members = append(req.Members, cluster.Member{Name: n, Free: budgets[n], Speed: speed, Encodings: []wire.EncodingID{wire.EncodingF32}})
	}
	even, err := cluster.EvenPlan(req)
	if err != nil {
		t.Fatal(err)
	}
	exo, err := cluster.ProportionalPlan(req)
	if err != nil {
		t.Fatal(err)
	}
	type chain struct {
		name   string
		ranges string
		run    func() runResult
	}
	chains := []chain{
		{"planned", m[2], func() runResult {
			r, _ := runHead(t, ctx, tb, bin, model, tok, steps, "--pool", strings.Join(pool, ","))
			return r
		}},
		{"even", fmt.Sprint(even.Ranges()), func() runResult { return runFixed(t, ctx, tb, bin, model, tok, steps, even) }},
		{"exo", fmt.Sprint(exo.Ranges()), func() runResult { return runFixed(t, ctx, tb, bin, model, tok, steps, exo) }},
	}
	got := map[string][]runResult{}
	for _, i := range []int{0, 1, 2, 2, 1, 0} { // order alternated: ABCCBA
		c := chains[i]
		r := c.run()
		if r.text != ref.text {
			t.Errorf("%s chain %s: greedy text differs from the whole model's:\n got %q\nwant %q", c.name, c.ranges, r.text, ref.text)
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
	t.Logf("%-8s %-26s %14s %14s", "chain", "ranges", "decode tok/s", "prefill tok/s")
	for _, c := range chains {
		t.Logf("%-8s %-26s %14.2f %14.1f", c.name, c.ranges, mean(got[c.name], dec), mean(got[c.name], pre))
	}
	t.Logf("planned, predicted: decode %.2f tok/s, prefill %.1f tok/s", predDecode, predPrefill)
	busy := ""
	if off := math.Abs(ref.decode*wholeStep - 1); off > 0.25 {
		busy = fmt.Sprintf("the whole model decodes at %.2f tok/s, %.0f%% off the probe's %.2f", ref.decode, 100*off, 1/wholeStep)
	}
	for i, d := range memberDecode {
		if off := math.Abs(d/(speed.DecodeLayer.Seconds()*1e3) - 1); off > 0.25 {
			busy = fmt.Sprintf("member %d's probe measured %.2f ms per layer, %.0f%% off this process's %.2f", i+1, d, 100*off, speed.DecodeLayer.Seconds()*1e3)
		}
	}
	if len(memberDecode) != 3 {
		t.Fatalf("read %d members' probe figures, want 3", len(memberDecode))
	}
	for _, c := range chains[1:] {
		if mean(got["planned"], dec) <= mean(got[c.name], dec) || mean(got["planned"], pre) <= mean(got[c.name], pre) {
			t.Errorf("the planned chain does not beat the %s split", c.name)
		}
	}
	// The prediction is only as good as the probes' figures: a machine
	// whose other work slows long runs (go test runs other packages'
	// tests beside this one; the probes' short bursts escape it) is told
	// apart by the whole model, alone in one process, running slower than
	// the probe predicts. On such a machine the accuracy is logged, not
	// asserted; the ordering above is asserted everywhere (it held by
	// 1.7x under a load average of 5). docs/cluster.md reports the
	// accuracy measured on a quiet machine.
	for _, m := range []struct {
		what      string
		pred, got float64
	}{{"decode", predDecode, mean(got["planned"], dec)}, {"prefill", predPrefill, mean(got["planned"], pre)}} {
		off := math.Abs(m.pred-m.got) / m.got
		t.Logf("planned %s: predicted %.2f tok/s, measured %.2f: off by %.0f%%", m.what, m.pred, m.got, 100*off)
		if off > 0.25 {
			if busy != "" {
				t.Logf("prediction accuracy not asserted: %s: this machine is too busy to compare with the probes (load average %s)", busy, loadAverage())
			} else {
				t.Errorf("planned %s: predicted %.2f tok/s, measured %.2f: off by more than 25%%", m.what, m.pred, m.got)
			}
		}
	}
}
