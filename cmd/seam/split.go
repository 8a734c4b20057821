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
	c, err := f.chain(ctx, modelPath, tokPath)
	if err != nil {
		return nil, nil, nil, err
	}
	chain, err := pipeline.Dial(ctx, c.addrs, c.opts)
	if err != nil {
		c.cleanup()
		return nil, nil, nil, err
	}
	sess, err := chain.NewSession(ctx)
	if err != nil {
		chain.Close()
		c.cleanup()
		return nil, nil, nil, err
	}
	return sess, c.head, func() { chain.Close(); c.cleanup() }, nil
}

// chainSpec is what a head dials: the stages' addresses in layer order
// and the options, with the head's view of the model; cleanup stops
// in-process stages.
type chainSpec struct {
	head    *loader.Head
	addrs   []string
	opts    pipeline.Options
	cleanup func()
}

// chain resolves the split flags into a chain to dial: in-process stages
// (--split, with a key made for the run), given stages (--stages) or a
// planned pool (--pool), authenticated by --key and --trust unless
// --insecure.
func (f *splitFlags) chain(ctx context.Context, modelPath, tokPath string) (*chainSpec, error) {
	if n := btoi(f.stages != "") + btoi(f.split > 0) + btoi(f.pool.pool != ""); n > 1 {
		return nil, fmt.Errorf("give one of --stages, --split and --pool")
	}
	enc, err := encodingByName(f.wireName)
	if err != nil {
		return nil, err
	}
	lc, err := linkConfig(f.linkMbps, f.linkLatMs)
	if err != nil {
		return nil, err
	}
	c := &chainSpec{cleanup: func() {}}
	var ac *auth.Config
	if f.split > 0 {
		if f.auth.set() {
			return nil, fmt.Errorf("--key, --trust and --insecure are for remote stages; --split stages in this process use a key made for the run")
		}
		if ac, err = auth.Ephemeral(); err != nil {
			return nil, err
		}
		if c.head, c.addrs, c.cleanup, err = startLocal(modelPath, tokPath, f.split, lc, f.timeout, ac); err != nil {
			return nil, err
		}
	} else {
		if ac, err = f.auth.config("head", "head"); err != nil {
			return nil, err
		}
		if c.head, err = loader.OpenHead(modelPath, loader.Options{TokenizerPath: tokPath}); err != nil {
			return nil, err
		}
		if f.stages != "" {
			c.addrs = strings.Split(f.stages, ",")
			for i := range c.addrs {
				c.addrs[i] = strings.TrimSpace(c.addrs[i])
			}
		}
	}
	c.opts = pipeline.Options{Identity: c.head.Identity, Config: c.head.Config, Encoding: enc,
		Codecs: codec.Digests(c.head.Codecs), Timeout: f.timeout, Link: lc, Logger: slog.Default(), Auth: ac}
	if f.pool.pool != "" {
		if f.wireName != "f32" {
			return nil, fmt.Errorf("--wire %s with --pool: the plan chooses each boundary's encoding, bounded by --max-kl", f.wireName)
		}
		asm, err := f.pool.assemble(ctx, modelPath, tokPath, c.opts)
		if err != nil {
			return nil, err
		}
		c.addrs, c.opts.Encodings = asm.Addrs, asm.Encodings
	}
	return c, nil
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
