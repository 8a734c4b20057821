// Package importer converts a GGUF file or a llama2.c checkpoint into a Seam
// container, streaming one tensor at a time. Quantized tensors are copied
// byte for byte: nothing is dequantized or requantized.
package importer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/tensor"
	"github.com/seamlm/seam/tokenizer"
)

// Options control an import.
type Options struct {
	// TokenizerPath is a llama2.c tokenizer file: needed for llama2.c
	// checkpoints, optional for GGUF files (which carry their vocabulary).
	TokenizerPath string
	// Progress, if set, is called as bytes are written.
	Progress func(done, total int64)
	// Context, when set, stops the import when cancelled (a signal): what
	// was written is removed, and Import returns the context's cause.
	Context context.Context
	// Force replaces a container already at the output folder. Without it
	// such a folder is refused; what an interrupted import left is removed
	// either way, and a folder holding other files is always refused.
	Force bool
	// Logger receives the import's events (nil: slog.Default()).
	Logger *slog.Logger
	// Tests simulate a killed import: extra container options inject the
	// interruption, and keepPartial skips the cleanup a killed process
	// would never get to run.
	containerOpts []container.Option
	keepPartial   bool
}

// Import reads the model at src and writes a container at dir, which must
// not exist or be empty. On failure the partial directory has no index, so
// no reader mistakes it for a container.
func Import(src, dir string, opts Options) error {
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m, err := loader.Open(src, loader.Options{TokenizerPath: opts.TokenizerPath, Mapped: true})
	if err != nil {
		return err
	}
	defer m.Close()
	if m.Format == loader.FormatContainer {
		return fmt.Errorf("%s is already a Seam container", src)
	}
	w := m.Weights
	copts := append([]container.Option{container.WithTotal(totalBytes(w))}, opts.containerOpts...)
	if opts.Progress != nil {
		copts = append(copts, container.WithProgress(opts.Progress))
	}
	// Every line names the "stage" (the import) and a session (none: 0),
	// as a pipeline's lines do.
	log := opts.Logger.With("stage", "import", "session", 0)
	out, err := prepare(dir, opts.Force, log)
	if err != nil {
		return err
	}
	defer out.release()
	b, err := container.Create(dir, w.Config, copts...)
	if err != nil {
		out.failed()
		return err
	}
	if err := out.lockCreated(); err != nil {
		b.Abort()
		return err
	}
	log = log.With("src", src, "out", dir)
	log.Info("import started", "format", string(m.Format), "config", w.Config.String(), "bytes", totalBytes(w))
	if err := writeAll(opts.Context, b, m); err != nil {
		if !opts.keepPartial {
			b.Abort()
			out.failed()
		}
		if opts.Context.Err() != nil {
			return fmt.Errorf("import %s into %s stopped (%w); what it wrote was removed", src, dir, context.Cause(opts.Context))
		}
		return fmt.Errorf("import %s into %s: %w", src, dir, err)
	}
	log.Info("import finished")
	return nil
}

func writeAll(ctx context.Context, b *container.Builder, m *loader.Model) error {
	w := m.Weights
	if err := segment(ctx, b, container.EmbedSegment, []named{{container.RoleEmbedding, &w.Embedding}}); err != nil {
		return err
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		var ts []named
		for j, t := range l.TensorsOf(&w.Config) {
			ts = append(ts, named{w.Config.LayerRoles()[j], t})
		}
		if err := segment(ctx, b, container.LayerSegment(i), ts); err != nil {
			return err
		}
	}
	head := []named{{container.RoleFinalNorm, &w.FinalNorm}}
	if !w.Config.TiedOutput {
		head = append(head, named{container.RoleOutput, &w.Output})
	}
	if err := segment(ctx, b, container.HeadSegment, head); err != nil {
		return err
	}
	if m.Tokenizer != nil {
		spec, err := tokenizer.SpecOf(m.Tokenizer)
		if err != nil {
			return err
		}
		if err := b.SetTokenizerSpec(spec); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err // the last moment to stop: Finish makes the folder a container
	}
	return b.Finish()
}

type named struct {
	role string
	t    *tensor.Tensor
}

// segment writes one segment, releasing each tensor's source pages once
// copied so that resident memory stays near one tensor.
func segment(ctx context.Context, b *container.Builder, name string, ts []named) error {
	if err := b.BeginSegment(name); err != nil {
		return err
	}
	for _, n := range ts {
		t := n.t
		spec := container.RegionSpec{Name: t.Name, Role: n.role, DType: t.Type, Rows: t.Rows, Cols: t.Cols, GroupSize: t.GroupSize}
		r := ctxReader{ctx, io.MultiReader(bytes.NewReader(t.Data), bytes.NewReader(t.Scales))}
		if err := b.AddRegion(spec, r); err != nil {
			return fmt.Errorf("segment %s, tensor %s: %w", name, n.t.Name, err)
		}
		if n.role == model.RoleRopeFreqs {
			// Shared by every layer, and possibly computed in memory from
			// metadata: releasing heap pages would zero them.
			continue
		}
		mapped.Release(n.t.Data)
		mapped.Release(n.t.Scales)
	}
	return b.EndSegment()
}

func totalBytes(w *model.Weights) int64 {
	var n int64
	add := func(t *tensor.Tensor) { n += int64(len(t.Data) + len(t.Scales)) }
	add(&w.Embedding)
	for i := range w.Layers {
		for _, t := range w.Layers[i].TensorsOf(&w.Config) {
			add(t)
		}
	}
	add(&w.FinalNorm)
	if !w.Config.TiedOutput {
		add(&w.Output)
	}
	return n
}
