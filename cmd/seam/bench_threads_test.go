package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seamlm/seam/bench"
	"github.com/seamlm/seam/internal/testmodels"
)

// bench threads runs decode and prefill at each count and reports every
// round but the warm-up; refused values name the flag.
func TestBenchThreads(t *testing.T) {
	model := filepath.Join(testmodels.Dir(t), testmodels.Stories260K)
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"decode", []string{"-n", "8", "--warmup", "2"}},
		{"prefill", []string{"--prefill", "--tokens", "16"}},
	} {
		args := append([]string{"bench", "threads", "--model", model, "--threads", "1,2", "--rounds", "3", "--bandwidth", "30,60", "--json"}, mode.args...)
		out, stderr, err := seamAll(t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode.name, err, stderr)
		}
		var res bench.Scaling
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: %v in %q", mode.name, err, out)
		}
		if res.Mode != mode.name || len(res.Threads) != 2 || res.Threads[0] != 1 || res.Threads[1] != 2 {
			t.Errorf("%s: mode %q threads %v", mode.name, res.Mode, res.Threads)
		}
		if len(res.TokS) != 2 {
			t.Errorf("%s: %d rounds reported, want 2 (3 less the warm-up)", mode.name, len(res.TokS))
		}
		for _, round := range res.TokS {
			if len(round) != 2 || !(round[0] > 0) || !(round[1] > 0) {
				t.Errorf("%s: round %v", mode.name, round)
			}
		}
		if len(res.Ratio) != 2 || res.Ratio[0] != 1 || !(res.Ratio[1] > 0) {
			t.Errorf("%s: ratios %v", mode.name, res.Ratio)
		}
		if len(res.BandwidthGBs) != 2 || res.BandwidthGBs[0] != 30 || res.BandwidthGBs[1] != 60 || !(res.Fraction[0] > 0) {
			t.Errorf("%s: bandwidth %v, fraction %v", mode.name, res.BandwidthGBs, res.Fraction)
		}
	}
	// --per-token: every position at each count, the rounds after the
	// warm-up reported, the bandwidth given compared with.
	out, stderr, err := seamAll(t, "bench", "threads", "--model", model, "--threads", "1,2", "--per-token", "--rounds", "3", "-n", "12", "--bandwidth", "30,60", "--json")
	if err != nil {
		t.Fatalf("--per-token: %v\n%s", err, stderr)
	}
	var res bench.TokenScaling
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--per-token: %v in %q", err, out)
	}
	if res.Mode != "decode, token by token" || res.Positions != 12 || res.Rounds != 2 || len(res.TokS) != 2 || !(res.TokS[1] > 0) ||
		res.Ratio[0] != 1 || !(res.Ratio[1] > 0) || res.BandwidthGBs[1] != 60 || !(res.Fraction[1] > 0) {
		t.Errorf("--per-token: %+v", res)
	}
	// --block: blocks of positions at each count, said in the result.
	out, stderr, err = seamAll(t, "bench", "threads", "--model", model, "--threads", "1,2", "--per-token", "--block", "4", "--rounds", "2", "-n", "10", "--bandwidth", "30,60", "--json")
	if err != nil {
		t.Fatalf("--block: %v\n%s", err, stderr)
	}
	var blocks bench.TokenScaling
	if err := json.Unmarshal([]byte(out), &blocks); err != nil {
		t.Fatalf("--block: %v in %q", err, out)
	}
	if blocks.Mode != "decode, blocks of 4 tokens" || blocks.Block != 4 || blocks.Positions != 10 || !(blocks.TokS[1] > 0) {
		t.Errorf("--block 4: %+v", blocks)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--threads", "1,1"}, "1 is given twice"},
		{[]string{"--threads", "1,2", "--per-token", "--prefill"}, "--per-token times decode; it does not go with --prefill"},
		{[]string{"--threads", "1,2", "--per-token", "--warmup", "2"}, "--warmup does not apply with --per-token"},
		{[]string{"--threads", "1,2", "--per-token", "--tokens", "16"}, "--tokens does not apply with --per-token"},
		{[]string{"--threads", "1,2", "--per-token", "-n", "100000"}, "positions 100000: want 1 to the context"},
		{[]string{"--threads", "1,2", "--per-token", "--block", "5"}, "block 5: want 1 to the positions, 4"},
		{[]string{"--threads", "1,2", "--block", "2"}, "--block applies with --per-token only"},
		{[]string{"--threads", "0,2"}, "--threads \"0,2\": want comma-separated positive integers"},
		{[]string{"--threads", "1,2", "--bandwidth", "30"}, "want one figure per thread count (2)"},
		{[]string{"--threads", "1,2", "--bandwidth", "30,x"}, "--bandwidth \"30,x\": want comma-separated numbers"},
		{[]string{"--threads", "1,2", "--rounds", "1"}, "rounds 1: want at least 2"},
	} {
		_, _, err := seamAll(t, append([]string{"bench", "threads", "--model", model, "-n", "4"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
