package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/pipeline"
	"github.com/spf13/cobra"
)

// planPool is 'seam plan --pool': plan a running pool without assigning.
type planPool struct {
	pool, model string
	auth        authFlags
	timeout     time.Duration
}

func (p *planPool) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.pool, "pool", "", "plan these running pool members (comma-separated host:port) instead of a cluster file")
	cmd.Flags().StringVar(&p.model, "model", "", "with --pool: the head's copy of the model")
	cmd.Flags().DurationVar(&p.timeout, "timeout", 30*time.Second, "with --pool: bound on each member's answer")
	p.auth.register(cmd)
}

func (p *planPool) run(cmd *cobra.Command, req cluster.Request, measureKL int, tokPath string) error {
	ac, err := p.auth.config("head", "head")
	if err != nil {
		return err
	}
	head, err := loader.OpenHead(p.model, loader.Options{NoTokenizer: true})
	if err != nil {
		return err
	}
	if req.Shape, err = modelShape(p.model); err != nil {
		return err
	}
	if req.Codecs, err = cluster.CodecInfos(head.Codecs); err != nil {
		return err
	}
	if measureKL > 0 {
		if req.KL, err = measureModelKL(p.model, tokPath, measureKL); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "measured KL (nats per position, %d sampled tokens):\n%s\n", measureKL, req.KL)
	}
	opts := pipeline.Options{Identity: head.Identity, Config: head.Config, Codecs: codec.Digests(head.Codecs),
		Timeout: p.timeout, Auth: ac, Logger: slog.Default()}
	asm, err := pipeline.Assemble(cmd.Context(), strings.Split(p.pool, ","), opts,
		pipeline.PoolOptions{Request: req, Logger: slog.Default(), PlanOnly: true})
	if err != nil {
		return err
	}
	if asm.Plan == nil {
		fmt.Fprintf(cmd.OutOrStdout(), "the pool already holds layers from an earlier plan: %s\n", strings.Join(asm.Addrs, ", "))
		return nil
	}
	c, err := cluster.Compare(asm.Request)
	if err != nil {
		return err
	}
	c.Write(cmd.OutOrStdout())
	return nil
}
