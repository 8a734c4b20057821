package main

import (
	"context"
	"fmt"
	"log/slog"
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
	var (
		sess *pipeline.Session
		stop func() error
	)
	if c.replicated() {
		// A supervisor moves the session to a replica if a stage fails.
		sup, err := pipeline.Supervise(ctx, c.positions, c.opts, pipeline.SupervisorOptions{Logger: slog.Default(), Spare: c.spare})
		if err != nil {
			c.cleanup()
			return nil, nil, nil, err
		}
		stop = sup.Close
		if sess, err = sup.NewSession(ctx); err != nil {
			sup.Close()
			c.cleanup()
			return nil, nil, nil, err
		}
	} else {
		chain, err := pipeline.Dial(ctx, c.addrs(), c.opts)
		if err != nil {
			c.cleanup()
			return nil, nil, nil, err
		}
		stop = chain.Close
		if sess, err = chain.NewSession(ctx); err != nil {
			chain.Close()
			c.cleanup()
			return nil, nil, nil, err
		}
	}
	return sess, c.head, func() { stop(); c.cleanup() }, nil
}

// chainSpec is what a head dials: the stages' addresses in layer order
// (with their replicas) and the options, with the head's view of the
// model; cleanup stops in-process stages.
type chainSpec struct {
	head      *loader.Head
	positions [][]string
	opts      pipeline.Options
	spare     pipeline.SpareFunc // pool members left out of the plan
	cleanup   func()
}

// addrs is the first replica of each position.
func (c *chainSpec) addrs() []string {
	out := make([]string, len(c.positions))
	for i, p := range c.positions {
		out[i] = p[0]
	}
	return out
}

// replicated: some stage has a replica or a spare to fail over to.
func (c *chainSpec) replicated() bool {
	if c.spare != nil {
		return true
	}
	for _, p := range c.positions {
		if len(p) > 1 {
			return true
		}
	}
	return false
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
		var addrs []string
		if c.head, addrs, c.cleanup, err = startLocal(modelPath, tokPath, f.split, lc, f.timeout, ac); err != nil {
			return nil, err
		}
		c.positions = pipeline.Singles(addrs)
	} else {
		if ac, err = f.auth.config("head", "head"); err != nil {
			return nil, err
		}
		if c.head, err = loader.OpenHead(modelPath, loader.Options{TokenizerPath: tokPath}); err != nil {
			return nil, err
		}
		if f.stages != "" {
			if c.positions, err = pipeline.ParsePositions(f.stages); err != nil {
				return nil, fmt.Errorf("--stages %q: %w", f.stages, err)
			}
		}
	}
	c.opts = pipeline.Options{Identity: c.head.Identity, Config: c.head.Config, Encoding: enc,
		Codecs: codec.Digests(c.head.Codecs), Timeout: f.timeout, Hang: hangOption(f.hang), Link: lc, Logger: slog.Default(), Auth: ac}
	if f.pool.pool != "" {
		if f.wireName != "f32" {
			return nil, fmt.Errorf("--wire %s with --pool: the plan chooses each boundary's encoding, bounded by --max-kl", f.wireName)
		}
		asm, err := f.pool.assemble(ctx, modelPath, tokPath, c.opts)
		if err != nil {
			return nil, err
		}
		c.positions, c.opts.Encodings, c.spare = pipeline.Singles(asm.Addrs), asm.Encodings, asm.Spare
	}
	return c, nil
}

// startLocal loads the whole model once and serves it as n in-process
// stages on loopback; stop shuts them down and unmaps the model.
func startLocal(modelPath, tokPath string, n int, lc link.Config, timeout time.Duration, ac *auth.Config) (head *loader.Head, addrs []string, stop func(), err error) {
	m, err := loader.Open(modelPath, modelOpts(loader.Options{TokenizerPath: tokPath}))
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

// hangOption maps --hang to pipeline.Options.Hang, where 0 means the
// default and a negative value off.
func hangOption(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
