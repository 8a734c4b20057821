package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/wire"
	"github.com/spf13/cobra"
)

// poolFlags are a head's flags for running on a pool of members.
type poolFlags struct {
	pool      string
	maxKL     float64
	sessions  int
	measureKL int
	greedy    bool // results come back as token ids, not logits (set by the caller)
}

func (f *poolFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.pool, "pool", "", "comma-separated addresses of pool members ('seam serve' without --layers): measure them, plan the chain and assign each its layers")
	cmd.Flags().Float64Var(&f.maxKL, "max-kl", 0, "with --pool: per-boundary quality budget in nats; an encoding other than f32 is used only where its KL, measured at that boundary, is within it (0: exact f32 everywhere)")
	cmd.Flags().IntVar(&f.sessions, "sessions", 4, "with --pool: sessions each stage must hold at once (the plan budgets their KV caches)")
	cmd.Flags().IntVar(&f.measureKL, "measure-kl", 0, "with --pool and --max-kl: measure each encoding's KL at every boundary on this many sampled tokens first (loads the whole model here)")
}

// check refuses pool settings given without --pool, so none is silently ignored.
func (f *poolFlags) check(cmd *cobra.Command) error {
	if f.pool != "" {
		if f.maxKL > 0 && f.measureKL <= 0 {
			return fmt.Errorf("--max-kl %v needs KL measurements to check each encoding against: add --measure-kl N (N sampled tokens; loads the whole model here)", f.maxKL)
		}
		if f.measureKL > 0 && f.maxKL == 0 {
			return fmt.Errorf("--measure-kl without --max-kl: with a budget of 0 every boundary is f32 and nothing needs measuring")
		}
		return nil
	}
	for _, name := range []string{"max-kl", "sessions", "measure-kl"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s applies to a pool; give --pool too", name)
		}
	}
	return nil
}

// assemble measures and plans the pool (or reuses its assignment) and
// returns the chain's addresses and boundary encodings.
func (f *poolFlags) assemble(ctx context.Context, modelPath, tokPath string, opts pipeline.Options) (*pipeline.Assembly, error) {
	shape, err := modelShape(modelPath)
	if err != nil {
		return nil, err
	}
	req := cluster.Request{Shape: shape, Sessions: f.sessions, MaxKL: f.maxKL, Logits: !f.greedy}
	codecs, err := containerCodecs(modelPath)
	if err != nil {
		return nil, err
	}
	if req.Codecs, err = cluster.CodecInfos(codecs); err != nil {
		return nil, err
	}
	if f.measureKL > 0 {
		if req.KL, err = measureModelKL(modelPath, tokPath, f.measureKL); err != nil {
			return nil, err
		}
		slog.Info("measured KL at every boundary", "session", 0, "stage", "head", "tokens", f.measureKL, "table", req.KL.String())
	}
	addrs := strings.Split(f.pool, ",")
	po := pipeline.PoolOptions{Request: req, Logger: slog.Default(), Record: planRecord(opts.Identity, addrs)}
	asm, err := pipeline.Assemble(ctx, addrs, opts, po)
	if err != nil {
		return nil, err
	}
	// The members the chain does not use can take over a stage that dies.
	var spares []string
	for _, a := range addrs {
		if !slices.Contains(asm.Addrs, a) {
			spares = append(spares, a)
		}
	}
	if len(spares) > 0 {
		asm.Spare = pipeline.PoolSpares(spares, opts, po)
		slog.Info("pool members left as spares", "session", 0, "stage", "head", "spares", strings.Join(spares, ","))
	}
	if asm.Plan != nil {
		p := asm.Plan.Predicted
		slog.Info("pool planned", "session", 0, "stage", "head", "chain", strings.Join(asm.Addrs, ","), "ranges", fmt.Sprint(asm.Plan.Ranges()),
			"decode_tok_s", fmt.Sprintf("%.2f", p.Decode), "prefill_tok_s", fmt.Sprintf("%.1f", p.Prefill))
	}
	return asm, nil
}

// containerCodecs are the boundary codecs attached to the head's container
// (none for a single-file model). For the planner (cluster.CodecInfos),
// lowrank is a candidate at a boundary whose codec has a recorded
// held-out KL.
func containerCodecs(path string) (map[int]*codec.Codec, error) {
	if f, err := loader.Detect(path); err != nil || f != loader.FormatContainer {
		return nil, err
	}
	h, err := loader.OpenHead(path, loader.Options{NoTokenizer: true})
	if err != nil {
		return nil, err
	}
	return h.Codecs, nil
}

// planRecord is where this head records the chain it assigns to a pool
// (pipeline.PoolOptions.Record), so that a restarted head reuses the
// plan's boundary encodings: a file per model and set of member addresses
// under the user's cache directory ("" when there is none).
func planRecord(id wire.Digest, addrs []string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	h := sha256.New()
	h.Write(id[:])
	for _, a := range slices.Sorted(slices.Values(addrs)) {
		h.Write([]byte(strings.TrimSpace(a) + "\n"))
	}
	return filepath.Join(dir, "seam", "plans", hex.EncodeToString(h.Sum(nil)[:12])+".json")
}
