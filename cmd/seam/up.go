package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/seamlm/seam/api"
	"github.com/seamlm/seam/batch"
	"github.com/seamlm/seam/cluster"
	"github.com/spf13/cobra"
)

func newUpCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "up CLUSTER.toml",
		Short: "Bring a cluster up from one file: plan the pool and serve the API",
		Long: `Up reads a cluster file (TOML) and runs its head: it connects to the
hosts, which run 'seam serve' without --layers (pool members), measures
them and the links between them, plans where the layers go and which wire
encoding each boundary uses, assigns each member its layers, and serves the
OpenAI-compatible API (as 'seam api') on the file's listen address.

  model = "stories.seam"       # the head's copy of the model
  key = "head.key"             # seam keygen --out head.key
  trust = "cluster.trust"      # every node's fingerprint
  listen = "127.0.0.1:8080"    # where the API listens
  sessions = 4                 # KV caches each stage budgets (default 4)
  max_kl = 0.0                 # per-boundary quality budget (0: exact f32)
  # measure_kl = 256           # needed with max_kl > 0 (loads the model here)

  [[host]]
  name = "desktop"
  addr = "10.0.0.2:7070"

Paths are relative to the file. Unknown keys are refused. Members already
assigned by an earlier head are reused; restart them to plan anew.`,
		Example: `  seam up cluster.toml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := cluster.ReadFile(args[0])
			if err != nil {
				return err
			}
			af, err := upFlags(f)
			if err != nil {
				return err
			}
			af.name = name
			return runAPI(cmd, af)
		},
	}
	cmd.Flags().StringVar(&name, "model-name", "", "model id API clients use (default: the model's file name without extension)")
	return cmd
}

// upFlags turns a cluster file into the flags of 'seam api --pool'.
func upFlags(f *cluster.File) (*apiFlags, error) {
	var addrs []string
	for _, h := range f.Hosts {
		if h.Addr == "" {
			return nil, fmt.Errorf("%s: host %s has no addr", f.Path, h.Name)
		}
		if h.Memory != "" || h.DecodeMS != 0 || h.PrefillMS != 0 || h.HeadMS != 0 {
			return nil, fmt.Errorf("%s: host %s gives planning figures (memory, decode_ms, ...); seam up measures the running members instead (those figures are for seam plan)", f.Path, h.Name)
		}
		addrs = append(addrs, h.Addr)
	}
	if len(f.Links) > 0 || f.Prompt != 0 || f.Generate != 0 {
		return nil, fmt.Errorf("%s: [[link]], prompt and generate are for seam plan; seam up measures the links", f.Path)
	}
	listen := f.Listen
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	af := &apiFlags{modelPath: f.Model, tokPath: f.Tokenizer, listen: listen,
		maxConcurrent: api.DefaultMaxConcurrent, queue: api.DefaultQueue, maxBody: api.DefaultMaxBody, poll: 500 * time.Millisecond}
	af.split.wireName, af.split.timeout = "f32", 30*time.Second
	af.kv = kvFlags{budget: "auto", chunk: batch.DefaultChunk} // seam api's defaults; the pool's stages size their own
	af.split.pool = poolFlags{pool: strings.Join(addrs, ","), maxKL: f.MaxKL, sessions: f.Sessions, measureKL: f.MeasureKL}
	if af.split.pool.sessions == 0 {
		af.split.pool.sessions = 4
	}
	// Each request in flight holds a session on every stage, and the plan
	// budgets the stages' memory for this many.
	af.maxConcurrent = min(af.maxConcurrent, af.split.pool.sessions)
	af.split.auth = authFlags{key: f.Key, trust: f.Trust, insecure: f.Insecure}
	return af, nil
}
