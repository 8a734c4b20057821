package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/scheduler"
)

// A stream whose middle stage dies goes on through that stage's replica:
// the client sees the whole model's text and [DONE], no error, and the
// failover is counted in /metrics.
func TestStreamContinuesAcrossFailover(t *testing.T) {
	m := stories(t)
	const body = `{"model":"stories260K","prompt":"Once upon a time","max_tokens":200,"temperature":0,"stream":true}`
	_, wholeURL := serveWhole(t, m)
	wch, _ := stream(t, context.Background(), wholeURL, body)
	want, done, errMsg := collect(wch)
	if !done || errMsg != "" {
		t.Fatalf("whole model: done %v, error %q", done, errMsg)
	}

	n := m.Weights.Config.NLayers
	procs := stagesOver(t, m, [][2]int{{0, 2}, {2, 4}, {2, 4}, {4, n}}, 0)
	id, _ := m.Identity()
	positions := [][]string{{procs[0].addr}, {procs[1].addr, procs[2].addr}, {procs[3].addr}}
	sup, err := pipeline.Supervise(context.Background(), positions, pipeline.Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second, Logger: quiet},
		pipeline.SupervisorOptions{Poll: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	_, url := serve(t, m, scheduler.Pipeline(sup))
	ch, _ := stream(t, context.Background(), url, body)
	var b strings.Builder
	for range 5 {
		ev := <-ch
		if ev.Error != "" || ev.Done {
			t.Fatalf("stream ended before the kill: %+v", ev)
		}
		b.WriteString(ev.Text)
	}
	procs[1].kill()
	rest, done, errMsg := collect(ch)
	if !done || errMsg != "" {
		t.Fatalf("after killing the middle stage's first replica: done %v, error %q; want the stream to go on", done, errMsg)
	}
	if got := b.String() + rest; got != want {
		t.Fatalf("text across the failover differs from the whole model's:\n got %q\nwant %q", got, want)
	}
	_, metrics := httpGet(t, url+"/metrics")
	if !strings.Contains(metrics, "seam_pipeline_failovers_total 1\n") {
		t.Errorf("/metrics does not count the failover:\n%s", grepLines(metrics, "failover"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
