package cluster_test

import (
	"bufio"
	"context"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serveLocal starts a stage process on loopback and returns its address.
func serveLocal(t testing.TB, ctx context.Context, fx *fixture, layers string, flags ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, fx.bin, append([]string{"serve", "--model", fx.model, "--layers", layers, "--listen", "127.0.0.1:0"}, flags...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "serving layers") {
		t.Fatalf("stage %s did not start: %q %v", layers, line, err)
	}
	go io.Copy(io.Discard, out)
	f := strings.Fields(line)
	return f[len(f)-1]
}

// BenchmarkTLSDecodeLoopback measures decode through two stage processes
// on loopback, over TLS and in plaintext, in one run: five runs of each,
// order alternated (TPPTTPTPPT) after a warm-up of each, medians compared,
// on the stories110M-shaped model. It is a benchmark, not a test: a 3%
// difference cannot be resolved while other tests share the machine.
//
//	go test -run '^$' -bench TLSDecodeLoopback -benchtime 1x ./cluster
func BenchmarkTLSDecodeLoopback(b *testing.B) {
	t := b
	fx := getFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tlsStages := []string{serveLocal(t, ctx, fx, "0:6", fx.keys("a")...), serveLocal(t, ctx, fx, "6:12", fx.keys("b")...)}
	plainStages := []string{serveLocal(t, ctx, fx, "0:6", "--insecure"), serveLocal(t, ctx, fx, "6:12", "--insecure")}
	const steps = 96 // the prompt (~20 tokens) and the rest decoded
	run := func(tls bool) float64 {
		args := []string{"run", "--model", fx.model, "--tokenizer", fx.tok, "-n", strconv.Itoa(steps), "--temperature", "0"}
		if tls {
			args = append(append(args, fx.keys("h")...), "--stages", strings.Join(tlsStages, ","))
		} else {
			args = append(args, "--insecure", "--stages", strings.Join(plainStages, ","))
		}
		cmd := exec.CommandContext(ctx, fx.bin, append(args, "Once upon a time there was a little robot")...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("head (tls %v): %v\n%s", tls, err, stderr.String())
		}
		return parseRun(t, stdout.String(), stderr.String()).decode
	}
	run(true)
	run(false)
	var tlsRuns, plainRuns []float64
	for _, tls := range []bool{true, false, false, true, true, false, true, false, false, true} {
		if v := run(tls); tls {
			tlsRuns = append(tlsRuns, v)
		} else {
			plainRuns = append(plainRuns, v)
		}
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	// spread is the range of the middle three runs over the median.
	spread := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return (s[3] - s[1]) / s[2]
	}
	ratio := median(tlsRuns) / median(plainRuns)
	t.Logf("decode tok/s over TLS %.2f (median %.2f), plaintext %.2f (median %.2f): ratio %.3f; spread of the middle runs %.1f%% (TLS), %.1f%% (plain); load average %s",
		tlsRuns, median(tlsRuns), plainRuns, median(plainRuns), ratio, 100*spread(tlsRuns), 100*spread(plainRuns), loadAverage())
	b.ReportMetric(median(tlsRuns), "tls_tok/s")
	b.ReportMetric(median(plainRuns), "plain_tok/s")
	b.ReportMetric(ratio, "tls/plain")
	b.ReportMetric(100*math.Max(spread(tlsRuns), spread(plainRuns)), "spread_%")
}
