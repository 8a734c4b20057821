package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/wire"
	"github.com/spf13/cobra"
)

// splitFlags are the flags of a split run, shared by run and demo.
type splitFlags struct {
	stages    string
	split     int
	wireName  string
	timeout   time.Duration
	hang      time.Duration
	linkMbps  float64
	linkLatMs float64
	pool      poolFlags
	auth      authFlags
}

func (f *splitFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.stages, "stages", "", "comma-separated stage addresses (host:port), in layer order; run through them. Replicas of a stage (same layers) go with '|': a:7070,b1:7070|b2:7070,c:7070; when the one in use dies or hangs, the head moves each session to the next and replays its tokens")
	cmd.Flags().IntVar(&f.split, "split", 0, "start N stages in this process on loopback, with even layer ranges, and run through them")
	cmd.Flags().StringVar(&f.wireName, "wire", "f32", "activation encoding between stages: f32, f16, q8, q5, q4, or lowrank (the container's learned codec)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for any stage's reply before failing the request")
	cmd.Flags().DurationVar(&f.hang, "hang", pipeline.DefaultHang, "declare a stage hung, and name it, after this long without a word from it while a request waits (stages send heartbeats while they compute; 0: off)")
	registerLinkFlags(cmd, &f.linkMbps, &f.linkLatMs)
	f.pool.register(cmd)
	f.auth.register(cmd)
}

func registerLinkFlags(cmd *cobra.Command, mbps, latMs *float64) {
	cmd.Flags().Float64Var(mbps, "link-mbps", 0, "emulate a link of this many Mbit/s on what this process sends (0: off)")
	cmd.Flags().Float64Var(latMs, "link-latency-ms", 0, "emulate this one-way latency in ms on what this process sends (0: off)")
}

func linkConfig(mbps, latMs float64) (link.Config, error) {
	if mbps < 0 || latMs < 0 {
		return link.Config{}, fmt.Errorf("--link-mbps %v and --link-latency-ms %v must not be negative", mbps, latMs)
	}
	return link.Config{RateMbps: mbps, Latency: time.Duration(latMs * float64(time.Millisecond))}, nil
}

func (f *splitFlags) active() bool { return f.stages != "" || f.split > 0 || f.pool.pool != "" }

// validate refuses split flags that cannot be honoured: a stage count below
// one, an empty stage address, or flags that only apply between stages
// given without any.
func (f *splitFlags) validate(cmd *cobra.Command) error {
	fl := cmd.Flags()
	if fl.Changed("split") && f.split < 1 {
		return fmt.Errorf("--split %d: want the number of in-process stages, 1 or more (leave --split out to run the model whole)", f.split)
	}
	if fl.Changed("stages") {
		if f.stages == "" {
			return errors.New("--stages is empty: give the stage addresses as host:port,host:port")
		}
		if _, err := pipeline.ParsePositions(f.stages); err != nil {
			return fmt.Errorf("--stages %q: %w", f.stages, err)
		}
	}
	if !f.active() {
		for _, name := range []string{"wire", "timeout", "hang", "link-mbps", "link-latency-ms", "key", "trust", "insecure"} {
			if fl.Changed(name) {
				return fmt.Errorf("--%s applies between pipeline stages: add --stages or --split (or --pool), or leave it out", name)
			}
		}
	}
	return f.pool.check(cmd)
}

// encodingByName resolves --wire: a built-in encoding, or lowrank (each
// boundary's learned codec, attached to the container).
func encodingByName(name string) (wire.EncodingID, error) {
	ids := append(wire.Default.IDs(), wire.EncodingLowRank)
	var names []string
	for _, id := range ids {
		if id.String() == name {
			return id, nil
		}
		names = append(names, id.String())
	}
	return 0, fmt.Errorf("--wire %q: want one of %s", name, strings.Join(names, ", "))
}
