package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/zeebo/blake3"
)

func TestKeygen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.key")
	out, err := seam(t, "keygen", "--out", path)
	if err != nil {
		t.Fatal(err)
	}
	key, err := auth.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out != auth.Public(key)+"\n" {
		t.Fatalf("stdout %q, want the fingerprint alone on a line (%s)", out, auth.Public(key))
	}
	if _, err := seam(t, "keygen", "--out", path); err == nil {
		t.Fatal("keygen overwrote a key")
	}
}

func TestPlanCommand(t *testing.T) {
	model := testmodels.Path(t, "stories260K.bin")
	dir := t.TempDir()
	file := `model = "` + model + `"
insecure = true
[[host]]
name = "big"
addr = "198.18.0.1:7070"
memory = "100MiB"
decode_ms = 0.02
prefill_ms = 0.01
head_ms = 0.03
[[host]]
name = "small"
addr = "198.18.1.2:7070"
memory = "70MiB"
decode_ms = 0.02
prefill_ms = 0.01
head_ms = 0.03
[[link]]
a = "head"
b = "big"
mbps = 1000
rtt_ms = 0.1
[[link]]
a = "head"
b = "small"
mbps = 20
rtt_ms = 30
[[link]]
a = "big"
b = "small"
mbps = 20
rtt_ms = 30
`
	path := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := seam(t, "plan", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stage 1: big", "layers [0, 5)", "small unused", "even split [[0 2] [2 5]]", "predicted: decode"} {
		if !strings.Contains(out, want) {
			t.Fatalf("plan output lacks %q:\n%s", want, out)
		}
	}
	if _, err := seam(t, "plan", "--sessions", "1000", path); err == nil || !strings.Contains(err.Error(), "short by") {
		t.Fatalf("oversized plan: %v", err)
	}
	if err := os.WriteFile(path, []byte(file+"colour = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := seam(t, "plan", path); err == nil || !strings.Contains(err.Error(), "unknown keys") {
		t.Fatalf("unknown key: %v", err)
	}
}

var testKeyFlags struct {
	sync.Once
	flags []string
	err   error
}

// keyFlags returns --key and --trust flags for a key that every test
// process shares and trusts (made once per test binary), so that process
// tests run over TLS as real deployments do.
func keyFlags(t *testing.T) []string {
	t.Helper()
	testKeyFlags.Do(func() {
		dir, err := os.MkdirTemp("", "seam-test-keys-")
		if err != nil {
			testKeyFlags.err = err
			return
		}
		key := filepath.Join(dir, "node.key")
		k, err := auth.GenerateKey(nil)
		if err == nil {
			err = auth.WriteKeyFile(key, k)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "trust"), []byte(auth.Public(k)+" tests\n"), 0o644)
		}
		testKeyFlags.flags, testKeyFlags.err = []string{"--key", key, "--trust", filepath.Join(dir, "trust")}, err
	})
	if testKeyFlags.err != nil {
		t.Fatal(testKeyFlags.err)
	}
	return testKeyFlags.flags
}

// testAuth is the authentication of keyFlags, for heads run in the test.
func testAuth(t *testing.T) *auth.Config {
	t.Helper()
	f := keyFlags(t)
	a := authFlags{key: f[1], trust: f[3]}
	c, err := a.config("test head", "head")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startMember runs `seam serve` without --layers (a pool member) on a free
// loopback port and returns its address.
func startMember(t *testing.T, ctr string, extra ...string) string {
	t.Helper()
	args := append([]string{"serve", "--model", ctr, "--listen", "127.0.0.1:0"}, append(keyFlags(t), extra...)...)
	_, stdout, stderr := seamProcess(t, args...)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "pool member") {
		t.Fatalf("pool member did not start: %q %v; stderr: %s", line, err, stderr)
	}
	// pool member "name" on ADDR: ...
	_, rest, _ := strings.Cut(line, " on ")
	addr, _, _ := strings.Cut(rest, ":")
	port, _, _ := strings.Cut(strings.TrimPrefix(rest, addr+":"), ":")
	return addr + ":" + port
}

// Three pool member processes, none able to hold the model with its
// budget, are planned by `seam run --pool` over TLS; the greedy text is
// the reference text; a second run reuses the assignment.
func TestRunPool(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the plan record
	ctr := importStories(t)
	want, err := os.ReadFile(filepath.Join(testmodels.Dir(t), testmodels.GreedyOnceUpon))
	if err != nil {
		t.Fatal(err)
	}
	var pool []string
	for range 3 {
		pool = append(pool, startMember(t, ctr, "--memory", "65MiB"))
	}
	// seam plan --pool measures and plans without assigning anything.
	out, err := seam(t, append([]string{"plan", "--model", ctr, "--pool", strings.Join(pool, ","), "--sessions", "1"}, keyFlags(t)...)...)
	if err != nil || !strings.Contains(out, "predicted: decode") || !strings.Contains(out, "stage 2:") || !strings.Contains(out, "even split") {
		t.Fatalf("plan --pool: %v\n%s", err, out)
	}
	args := append([]string{"run", "--model", ctr, "--pool", strings.Join(pool, ","), "--sessions", "1", "-n", "256", "--temperature", "0", "Once upon a time"}, keyFlags(t)...)
	for run := range 2 {
		text, err := seam(t, args...)
		if err != nil || text != string(want) {
			t.Fatalf("run %d through the pool: %v\n%s", run+1, err, text)
		}
	}
	if _, err := seam(t, append(args, "--wire", "q8")...); err == nil || !strings.Contains(err.Error(), "--wire q8 with --pool") {
		t.Fatalf("--wire with --pool: %v", err)
	}
	if _, err := seam(t, append(args, "--max-kl", "0.01")...); err == nil || !strings.Contains(err.Error(), "--measure-kl") {
		t.Fatalf("--max-kl without measurements: %v", err)
	}
}

// seam up: one file names the model, the keys, the pool and the API's
// address; the head plans the pool over TLS and serves the API, whose
// greedy completion continues the reference text.
func TestUp(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the plan record
	ctr := importStories(t)
	want, err := os.ReadFile(filepath.Join(testmodels.Dir(t), testmodels.GreedyOnceUpon))
	if err != nil {
		t.Fatal(err)
	}
	keys := keyFlags(t)
	file := fmt.Sprintf("model = %q\nkey = %q\ntrust = %q\nlisten = \"127.0.0.1:0\"\nsessions = 2\n", ctr, keys[1], keys[3])
	for i := range 2 {
		file += fmt.Sprintf("[[host]]\nname = \"m%d\"\naddr = %q\n", i+1, startMember(t, ctr, "--memory", "66MiB", "--name", fmt.Sprintf("m%d", i+1)))
	}
	path := filepath.Join(t.TempDir(), "cluster.toml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCmd()
	pr, pw := io.Pipe()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"up", path})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx); pw.Close() }()
	url, err := servingURL(pr)
	if err != nil {
		cancel()
		t.Fatalf("seam up: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("seam up exited with %v", err)
		}
	}()
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"stories","prompt":"Once upon a time","max_tokens":40,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 || len(body.Choices) != 1 {
		t.Fatalf("status %d, %+v, %v", resp.StatusCode, body, err)
	}
	if got := "Once upon a time" + body.Choices[0].Text; !strings.HasPrefix(string(want), got) || len(body.Choices[0].Text) < 40 {
		t.Fatalf("completion %q does not continue the reference text %q", got, want[:200])
	}
}

// Every command that talks to other nodes needs keys or --insecure: none
// of them is refused, both is refused, and --insecure warns on stderr.
func TestAuthFlagsRefused(t *testing.T) {
	ctr := importStories(t)
	const none = "give --key FILE and --trust FILE"
	for _, args := range [][]string{
		{"serve", "--model", ctr, "--layers", "0:5", "--listen", "127.0.0.1:0"},
		{"serve", "--model", ctr, "--listen", "127.0.0.1:0"},
		{"run", "--model", ctr, "--stages", "127.0.0.1:1", "-n", "4", "Once"},
		{"run", "--model", ctr, "--pool", "127.0.0.1:1", "-n", "4", "Once"},
		{"plan", "--model", ctr, "--pool", "127.0.0.1:1"},
	} {
		if _, _, err := seamAll(t, args...); err == nil || !strings.Contains(err.Error(), none) {
			t.Errorf("%s without keys or --insecure: %v, want %q", strings.Join(args[:2], " "), err, none)
		}
		both := append(slices.Clone(args), append([]string{"--insecure"}, keyFlags(t)...)...)
		if _, _, err := seamAll(t, both...); err == nil || !strings.Contains(err.Error(), "give either --insecure or --key and --trust, not both") {
			t.Errorf("%s with --insecure and keys: %v", strings.Join(args[:2], " "), err)
		}
	}
	// Nothing listens on port 1: the run fails after the warning.
	_, stderr, err := seamAll(t, "run", "--model", ctr, "--stages", "127.0.0.1:1", "--insecure", "-n", "4", "Once")
	if err == nil || !strings.Contains(stderr, "INSECURE: --insecure is set: head connections are neither encrypted nor authenticated") {
		t.Fatalf("run --insecure: %v, stderr:\n%s", err, stderr)
	}
}

// fitCodecsInto fits a codec of perToken bytes at every boundary of the
// container's model, records its held-out KL (on sampled tokens) and
// attaches it; it returns the KLs by boundary.
func fitCodecsInto(t *testing.T, ctr string, perToken int) map[int]float64 {
	t.Helper()
	ref, _ := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	m, err := loader.Open(ctr, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mod, _ := model.New(m.Weights)
	held, err := eval.SampleTokens(mod, m.Tokenizer.BOS(), m.Tokenizer.EOS(), 128, 7, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	kls := map[int]float64{}
	for b := 1; b < m.Weights.Config.NLayers; b++ {
		c := fitAt(t, m, b, strings.Repeat(string(ref), 2), perToken)
		if kls[b], err = eval.HeldoutKL(mod, held, b, c); err != nil {
			t.Fatal(err)
		}
		if err := c.SetHeldoutKL(kls[b]); err != nil {
			t.Fatal(err)
		}
		file := c.Marshal()
		if err := container.AddCodec(ctr, b, file, blake3.Sum256(file)); err != nil {
			t.Fatal(err)
		}
	}
	return kls
}

// seam plan FILE with --max-kl and --measure-kl: over a slow link between
// two hosts that are both needed, the boundary gets the container's codec
// when its recorded KL is within the budget, a measured quantized
// encoding when only those are, and f32 with no budget; each with its
// reason line.
func TestPlanFileChoosesEncodings(t *testing.T) {
	ctr := importStories(t)
	kls := fitCodecsInto(t, ctr, 16)
	shape, err := modelShape(ctr)
	if err != nil {
		t.Fatal(err)
	}
	// Room for three layers and the embedding or classifier, with one
	// session: each host holds 3 of the 5 layers, so both are needed.
	mem := 64<<20 + max(shape.EmbedBytes, shape.HeadBytes) + 3*(shape.LayerBytes+shape.KVBytesPerLayer()) + 1024
	file := fmt.Sprintf("model = %q\ninsecure = true\nsessions = 1\n", ctr)
	for _, h := range []string{"a", "b"} {
		file += fmt.Sprintf("[[host]]\nname = %q\naddr = \"198.18.0.9:7070\"\nmemory = \"%d\"\ndecode_ms = 0.02\nprefill_ms = 0.01\nhead_ms = 0.03\n", h, mem)
	}
	for _, l := range []string{`a = "head"` + "\nb = \"a\"\nmbps = 1000\nrtt_ms = 0.1", `a = "head"` + "\nb = \"b\"\nmbps = 1000\nrtt_ms = 0.1", `a = "a"` + "\nb = \"b\"\nmbps = 0.5\nrtt_ms = 30"} {
		file += "[[link]]\n" + l + "\n"
	}
	path := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	worst, best := 0.0, math.Inf(1)
	for _, kl := range kls {
		worst, best = max(worst, kl), min(best, kl)
	}
	for _, c := range []struct {
		maxKL string
		want  []string
		not   string
	}{
		{fmt.Sprint(1.01 * worst), []string{"boundary 1 → lowrank (KL", "f32 would cap decode at"}, ""},
		{fmt.Sprint(min(0.01, best/2)), []string{"boundary 1 → q", "f32 would cap decode at"}, "lowrank"},
		{"0", []string{"boundary 1 → f32: a → b over 0.50 Mbit/s", "exact: --max-kl 0 allows only f32"}, "would cap"},
	} {
		args := []string{"plan", path, "--max-kl", c.maxKL}
		if c.maxKL != "0" {
			args = append(args, "--measure-kl", "64")
		}
		out, err := seam(t, args...)
		if err != nil {
			t.Fatalf("plan --max-kl %s: %v", c.maxKL, err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("plan --max-kl %s: output lacks %q:\n%s", c.maxKL, w, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "boundary 1 →") && c.not != "" && strings.Contains(line, c.not) {
				t.Errorf("plan --max-kl %s: boundary line has %q:\n%s", c.maxKL, c.not, out)
			}
		}
	}
}

// run --pool with --max-kl and --measure-kl: a member that sends through
// an emulated 1 Mbit/s link makes the planner choose a lossy encoding for
// its boundary; the run produces text; a second run reuses the members
// with the same encoding, from the plan record the first head kept.
func TestRunPoolWithBudget(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the plan record
	ctr := importStories(t)
	pool := []string{startMember(t, ctr, "--memory", "65.5MiB", "--name", "slow", "--link-mbps", "1"), startMember(t, ctr, "--memory", "65.5MiB", "--name", "fast")}
	args := append([]string{"-v", "run", "--model", ctr, "--pool", strings.Join(pool, ","), "--sessions", "1", "--max-kl", "0.01", "--measure-kl", "64",
		"-n", "40", "--temperature", "0", "Once upon a time"}, keyFlags(t)...)
	boundary := regexp.MustCompile(`plan: boundary 1 → (\S+) \(KL [0-9.e-]+ ≤ 0.01\): (?:slow → fast|fast → slow)`)
	text, stderr, err := seamAll(t, args...)
	if err != nil {
		t.Fatalf("run --pool --max-kl: %v\n%s", err, stderr)
	}
	m := boundary.FindStringSubmatch(stderr)
	if m == nil || m[1] == "f32" {
		t.Fatalf("no lossy boundary planned over the slow link:\n%s", stderr)
	}
	if !strings.HasPrefix(text, "Once upon a time") || len(text) < 60 {
		t.Fatalf("text %q", text)
	}
	if !strings.Contains(stderr, `msg=routed session=0 stage=1`) || !strings.Contains(stderr, "encoding="+m[1]) {
		t.Fatalf("the chain was not routed with %s:\n%s", m[1], stderr)
	}
	_, stderr, err = seamAll(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "reusing them") || !strings.Contains(stderr, "encodings="+m[1]) || !strings.Contains(stderr, "encoding="+m[1]) {
		t.Fatalf("the second run did not reuse the chain with %s:\n%s", m[1], stderr)
	}
}
