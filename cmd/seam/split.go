package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/stage"
)

// splitSession connects to the stages (starting them in-process for
// --split) and opens a session through them. cleanup stops everything.
func (f *splitFlags) session(ctx context.Context, modelPath, tokPath string) (generate.Session, *loader.Head, func(), error) {
	if n := btoi(f.stages != "") + btoi(f.split > 0) + btoi(f.pool.pool != ""); n > 1 {
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
			for i := range addrs {
				addrs[i] = strings.TrimSpace(addrs[i])
			}
		}
	}
	opts := pipeline.Options{Identity: head.Identity, Config: head.Config, Encoding: enc,
		Codecs: codec.Digests(head.Codecs), Timeout: f.timeout, Link: lc, Logger: slog.Default(), Auth: ac}
	if f.pool.pool != "" {
		if f.wireName != "f32" {
			cleanup()
			return nil, nil, nil, fmt.Errorf("--wire %s with --pool: the plan chooses each boundary's encoding, bounded by --max-kl", f.wireName)
		}
		asm, err := f.pool.assemble(ctx, modelPath, tokPath, opts)
		if err != nil {
			cleanup()
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

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
