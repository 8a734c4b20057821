package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// TestMain lets tests run this binary as the seam command in a child
// process (stages as separate OS processes) when SEAM_TEST_MAIN is set.
func TestMain(m *testing.M) {
	if os.Getenv("SEAM_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// seamProcess starts `seam args...` as a child process.
func seamProcess(t *testing.T, args ...string) (*exec.Cmd, io.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SEAM_TEST_MAIN=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, stdout, &stderr
}

// startStage runs `seam serve` on a free loopback port and returns its address.
func startStage(t *testing.T, modelDir string, a, b int, extra ...string) (string, *exec.Cmd) {
	t.Helper()
	args := append([]string{"serve", "--model", modelDir, "--layers", fmt.Sprintf("%d:%d", a, b), "--listen", "127.0.0.1:0"}, append(keyFlags(t), extra...)...)
	cmd, stdout, stderr := seamProcess(t, args...)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("stage [%d,%d) did not start: %v; stderr: %s", a, b, err, stderr)
	}
	i := strings.LastIndex(line, " on ")
	if i < 0 {
		t.Fatalf("unexpected serve output %q", line)
	}
	return strings.TrimSpace(line[i+4:]), cmd
}

func importStories(t *testing.T) string {
	t.Helper()
	dir := testmodels.Dir(t)
	out := filepath.Join(t.TempDir(), "stories.seam")
	if _, err := seam(t, "import", filepath.Join(dir, testmodels.Stories260K), "--tokenizer", filepath.Join(dir, testmodels.Tok512), "--out", out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Split across 2, 3 and 5 separate processes with the f32 wire: logits are
// bit-identical to the whole model at every position (teacher-forced), and
// the greedy text is the reference text.
func TestProcessSplitParity(t *testing.T) {
	ctr := importStories(t)
	want, _ := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	m, err := loader.Open(ctr, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	id, _ := m.Identity()
	mod, _ := model.New(m.Weights)
	whole, _ := generate.NewLocal(mod)
	tokens := m.Tokenizer.Encode(string(want[:400]), true, false)
	wantLogits, err := whole.Forward(context.Background(), tokens, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("%d stages", k), func(t *testing.T) {
			ranges, _ := stage.EvenRanges(m.Weights.Config.NLayers, k)
			var addrs []string
			for _, r := range ranges {
				addr, _ := startStage(t, ctr, r[0], r[1])
				addrs = append(addrs, addr)
			}
			c, err := pipeline.Dial(context.Background(), addrs, pipeline.Options{Identity: id, Config: m.Weights.Config, Encoding: wire.EncodingF32, Timeout: 10 * time.Second, Auth: testAuth(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, err := c.NewSession(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Forward(context.Background(), tokens, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			testmodels.SameBits(t, fmt.Sprintf("%d processes against the whole model", k), got, wantLogits)
			text, err := seam(t, append([]string{"run", "--model", ctr, "--stages", strings.Join(addrs, ","), "-n", "256", "--temperature", "0", "Once upon a time"}, keyFlags(t)...)...)
			if err != nil {
				t.Fatal(err)
			}
			if text != string(want) {
				t.Fatalf("greedy text through %d stages differs:\n%s", k, text)
			}
		})
	}
}

// Killing a stage mid-generation ends `seam run` with a non-zero exit and an
// error naming the stage, within the timeout; what was printed before is a
// prefix of the true text, and nothing follows the failure.
func TestKilledStageProcess(t *testing.T) {
	ctr := importStories(t)
	want, _ := os.ReadFile(testmodels.Path(t, testmodels.GreedyOnceUpon))
	// 10 ms of latency on every hop makes each token take tens of ms, so
	// the kill lands mid-generation.
	a1, _ := startStage(t, ctr, 0, 2, "--link-latency-ms", "10")
	a2, victim := startStage(t, ctr, 2, 5, "--link-latency-ms", "10")
	head, stdout, stderr := seamProcess(t, append([]string{"run", "--model", ctr, "--stages", a1 + "," + a2, "-n", "256", "--temperature", "0", "--timeout", "5s", "Once upon a time"}, keyFlags(t)...)...)
	var got []byte
	buf := make([]byte, 64)
	var killedAt time.Time
	for {
		n, err := stdout.Read(buf)
		got = append(got, buf[:n]...)
		if killedAt.IsZero() && len(got) > 40 {
			victim.Process.Signal(syscall.SIGKILL)
			killedAt = time.Now()
		}
		if err != nil {
			break
		}
	}
	err := head.Wait()
	took := time.Since(killedAt)
	if killedAt.IsZero() {
		t.Fatalf("generation finished before the kill; output %q", got)
	}
	if err == nil {
		t.Fatal("seam run exited 0 after a stage was killed")
	}
	if took > 5*time.Second {
		t.Errorf("seam run took %v to fail, beyond its 5 s timeout", took)
	}
	msg := stderr.String()
	if !strings.Contains(msg, "stage") || !strings.Contains(msg, a2) && !strings.Contains(msg, a1) {
		t.Errorf("error does not name the stage: %q", msg)
	}
	text := strings.TrimSuffix(string(got), "\n")
	if !strings.HasPrefix(string(want), text) || len(text) >= len(want)-1 {
		t.Errorf("output is not a strict prefix of the true text: %q", got)
	}
	t.Logf("failed %v after the kill, having printed %d bytes; stderr: %s", took.Round(time.Millisecond), len(got), msg)
}
