package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
	"github.com/spf13/cobra"
)

// splitFlags are the flags of a split run, shared by run and demo.
type splitFlags struct {
	stages    string
	split     int
	wireName  string
	timeout   time.Duration
	linkMbps  float64
	linkLatMs float64
	pool      poolFlags
	auth      authFlags
}

func (f *splitFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.stages, "stages", "", "comma-separated stage addresses (host:port), in layer order; run through them")
	cmd.Flags().IntVar(&f.split, "split", 0, "start N stages in this process on loopback, with even layer ranges, and run through them")
	cmd.Flags().StringVar(&f.wireName, "wire", "f32", "activation encoding between stages: f32, f16, q8, q5, q4")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for any stage's reply before failing the request")
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

// splitSession connects to the stages (starting them in-process for
// --split) and opens a session through them. cleanup stops everything.
func (f *splitFlags) session(ctx context.Context, modelPath, tokPath string) (generate.Session, *loader.Head, func(), error) {
	if (f.stages != "") && f.split > 0 || (f.stages != "" || f.split > 0) && f.pool.pool != "" {
		return nil, nil, nil, fmt.Errorf("give one of --stages, --split and --pool")
	}
	enc, err := encodingByName(f.wireName)
	if err != nil {
		return nil, nil, nil, err
	}
	lc, err := linkConfig(f.linkMbps, f.linkLatMs)
	if err != nil {
		return nil, nil, nil, err
	}
	var (
		head    *loader.Head
		addrs   []string
		cleanup = func() {}
		ac      *auth.Config
	)
	if f.split > 0 {
		if f.auth.set() {
			return nil, nil, nil, fmt.Errorf("--key, --trust and --insecure are for remote stages; --split stages in this process use a key made for the run")
		}
		if ac, err = auth.Ephemeral(); err != nil {
			return nil, nil, nil, err
		}
		if head, addrs, cleanup, err = startLocal(modelPath, tokPath, f.split, lc, f.timeout, ac); err != nil {
			return nil, nil, nil, err
		}
	} else {
		if ac, err = f.auth.config("head"); err != nil {
			return nil, nil, nil, err
		}
		if head, err = loader.OpenHead(modelPath, loader.Options{TokenizerPath: tokPath}); err != nil {
			return nil, nil, nil, err
		}
		if f.stages != "" {
			addrs = strings.Split(f.stages, ",")
		}
	}
	opts := pipeline.Options{Identity: head.Identity, Config: head.Config, Encoding: enc,
		Codecs: codec.Digests(head.Codecs), Timeout: f.timeout, Link: lc, Auth: ac}
	if f.pool.pool != "" {
		if f.wireName != "f32" {
			return nil, nil, nil, fmt.Errorf("--wire %s with --pool: the plan chooses each boundary's encoding, bounded by --max-kl", f.wireName)
		}
		asm, err := f.pool.assemble(ctx, modelPath, tokPath, opts)
		if err != nil {
			return nil, nil, nil, err
		}
		addrs, opts.Encodings = asm.Addrs, asm.Encodings
	}
	chain, err := pipeline.Dial(ctx, addrs, opts)
	if err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	sess, err := chain.NewSession(ctx)
	if err != nil {
		chain.Close()
		cleanup()
		return nil, nil, nil, err
	}
	return sess, head, func() { chain.Close(); cleanup() }, nil
}

// startLocal loads the whole model once and serves it as n in-process
// stages on loopback; stop shuts them down and unmaps the model.
func startLocal(modelPath, tokPath string, n int, lc link.Config, timeout time.Duration, ac *auth.Config) (head *loader.Head, addrs []string, stop func(), err error) {
	m, err := loader.Open(modelPath, loader.Options{TokenizerPath: tokPath})
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	id, err := m.Identity()
	if err != nil {
		return nil, nil, nil, err
	}
	ranges, err := stage.EvenRanges(m.Weights.Config.NLayers, n)
	if err != nil {
		return nil, nil, nil, err
	}
	local, err := stage.StartLocal(m.Weights, ranges, stage.Config{Identity: id, Link: lc, Timeout: timeout, Auth: ac}, m.Codecs)
	if err != nil {
		return nil, nil, nil, err
	}
	head = &loader.Head{Config: m.Weights.Config, Tokenizer: m.Tokenizer, Identity: id, Codecs: m.Codecs}
	return head, local.Addrs, func() { local.Close(); m.Close() }, nil
}
