package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seamlm/seam/chat"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/pipeline"
	"github.com/seamlm/seam/scheduler"
	"github.com/seamlm/seam/tokenizer"
)

// apiEngine is what seam api serves: the engine, the head's view of the
// model, and how to stop it all.
type apiEngine struct {
	engine scheduler.Engine
	config model.Config
	tok    tokenizer.Tokenizer
	stop   func()
}

// openEngine builds the engine for seam api: the whole model in this
// process, n in-process stages (--split), remote stages (--stages) or a
// planned pool (--pool), supervised so that a lost chain is re-dialled.
func openEngine(ctx context.Context, modelPath, tokPath string, f *splitFlags, kv *kvFlags, poll time.Duration) (*apiEngine, error) {
	if !f.active() {
		m, mod, err := openFull(modelPath, tokPath)
		if err != nil {
			return nil, err
		}
		// After loading: the weights' copy is no longer available memory.
		budget, err := kv.bytes("head")
		if err != nil {
			m.Close()
			return nil, err
		}
		e, err := scheduler.NewLocalWith(mod, scheduler.LocalOptions{Chunk: kv.chunk, KVBudget: budget, F16KV: kv.f16})
		if err != nil {
			m.Close()
			return nil, err
		}
		return &apiEngine{engine: e, config: m.Weights.Config, tok: m.Tokenizer, stop: func() { e.Close(); m.Close() }}, nil
	}
	c, err := f.chain(ctx, modelPath, tokPath)
	if err != nil {
		return nil, err
	}
	head, stop := c.head, c.cleanup
	sup, err := pipeline.Supervise(ctx, c.positions, c.opts, pipeline.SupervisorOptions{Poll: poll, Logger: slog.Default(), Spare: c.spare})
	if err != nil {
		stop()
		return nil, err
	}
	return &apiEngine{engine: scheduler.Pipeline(sup), config: head.Config, tok: head.Tokenizer,
		stop: func() { sup.Close(); stop() }}, nil
}

// loadTemplate reads the model's chat template: from the GGUF, the
// tokenizer.json / tokenizer_config.json or the folder given (--tokenizer,
// else --model). llama2.c files carry none: they get chat's documented
// fallback, as does any model without a template.
func loadTemplate(modelPath, tokPath string) (*chat.Template, error) {
	src := tokPath
	if src == "" {
		src = modelPath
	}
	st, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		if string(head[:n]) != "GGUF" && !strings.HasPrefix(strings.TrimSpace(string(head[:n])), "{") {
			return chat.New("", chat.Config{Name: "fallback"})
		}
	}
	return chat.Load(src)
}

// defaultModelName is the file or directory name without its extension:
// "stories260K" for stories260K.bin or stories260K.seam.
func defaultModelName(path string) string {
	base := filepath.Base(filepath.Clean(path))
	if ext := filepath.Ext(base); ext != "" && ext != base {
		base = strings.TrimSuffix(base, ext)
	}
	return base
}
