package main

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
	"github.com/spf13/cobra"
)

// poolServe is 'seam serve' without --layers: a pool member.
type poolServe struct {
	modelPath, listen, name, memory string
	verify                          bool
	base                            stage.Config
	// kvAuto, when set (--kv-budget auto), resolves the KV budget once an
	// assignment's weights are loaded.
	kvAuto func() (int64, error)
}

// run probes this machine, then serves the pool protocol until a head
// assigns a range, and that range from then on.
func (o *poolServe) run(cmd *cobra.Command, lc link.Config) error {
	head, err := loader.OpenHead(o.modelPath, loader.Options{NoTokenizer: true})
	if err != nil {
		return err
	}
	cfg := head.Config
	free, err := cluster.AvailableMemory()
	if err != nil {
		return err
	}
	if o.memory != "" {
		budget, err := cluster.ParseSize(o.memory)
		if err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
		free = min(free, budget)
	}
	speed, err := probe(o.modelPath, cfg.NLayers)
	if err != nil {
		return err
	}
	base := o.base
	base.Name, base.Link, base.Logger = o.name, lc, slog.Default()
	pm, err := stage.NewPoolMember(stage.PoolConfig{
		Base: base, Identity: head.Identity, Model: cfg, Codecs: codec.Digests(head.Codecs),
		Describe: wire.Description{Free: uint64(free), DecodeNanos: uint64(speed.DecodeLayer), PrefillNanos: uint64(speed.PrefillLayer), HeadNanos: uint64(speed.Head)},
		Open: func(first, last int) (*stage.Part, error) {
			return openPart(o.modelPath, o.name, first, last, o.verify, o.kvAuto)
		},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "pool member %q on %s: %s free, %.2f ms per layer per token (decode), %.3f (prefill), classifier %.2f ms; waiting for a head to assign layers\n",
		o.name, ln.Addr(), cluster.GiB(free), speed.DecodeLayer.Seconds()*1e3, speed.PrefillLayer.Seconds()*1e3, speed.Head.Seconds()*1e3)
	return serveUntilSignal(cmd, pm, ln, o.name)
}

// probe measures compute speed on the model's first layers (about 100 MB
// of them, so that weights stream from memory as in decoding).
func probe(path string, nLayers int) (cluster.Speed, error) {
	m, err := loader.Open(path, loader.Options{First: 0, Last: 1, NoTokenizer: true, Mapped: true})
	if err != nil {
		return cluster.Speed{}, err
	}
	per := 0
	for _, t := range m.Weights.Layers[0].Tensors() {
		per += len(t.Data)
	}
	m.Close()
	k := min(nLayers, max(1, (100<<20)/max(per, 1)))
	if m, err = loader.Open(path, modelOpts(loader.Options{First: 0, Last: k, NoTokenizer: true})); err != nil {
		return cluster.Speed{}, err
	}
	defer m.Close()
	return cluster.ProbeSpeed(m.Weights, cluster.ProbeOptions{})
}

// openPart loads layers [first, last) of the model for an assignment, and
// resolves an automatic KV budget (kvAuto) from the memory left after.
func openPart(path, stageName string, first, last int, verify bool, kvAuto func() (int64, error)) (*stage.Part, error) {
	m, err := loader.Open(path, modelOpts(loader.Options{First: first, Last: last, NoTokenizer: true, Verify: verify}))
	if err != nil {
		return nil, err
	}
	mod, err := model.New(m.Weights)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	logLoaded(stageName, m)
	part := &stage.Part{Model: mod, Codecs: m.Codecs, Close: m.Close}
	if kvAuto != nil {
		if part.KVBudget, err = kvAuto(); err != nil {
			m.Close()
			return nil, err
		}
	}
	return part, nil
}
