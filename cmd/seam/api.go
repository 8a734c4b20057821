package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/seamlm/seam/api"
	"github.com/spf13/cobra"
)

type apiFlags struct {
	modelPath, tokPath, listen, name string
	maxConcurrent, queue, threads    int
	maxBody                          int64
	poll                             time.Duration
	split                            splitFlags
	kv                               kvFlags
}

func newAPICmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "api --model PATH [--stages A,B,... | --pool A,B,... | --split N] [--listen ADDR]",
		Short: "Serve the model over an OpenAI-compatible HTTP API, with a status page",
		Long: `Api runs the head of the model as a long-running HTTP server speaking
OpenAI's API: GET /v1/models, POST /v1/chat/completions and POST
/v1/completions (streamed with server-sent events or not). GET / is a chat
and status page (stages, wire, tok/s), GET /health answers 200 only when
every stage answers, GET /metrics is Prometheus.

Without --stages or --split the whole model runs in this process. With
--stages the head connects to stage servers ('seam serve') at start-up, pings
them, and re-dials them when the chain is lost; requests meanwhile get 503
naming the stage. --pool plans a pool of members ('seam serve' without
--layers): it measures them and their links, assigns each its layers, and
then runs as with --stages (docs/cluster.md). --split N starts N stages in
this process on loopback. Remote stages and pools need --key and --trust
(or --insecure on both ends).

Fields a request may not use (n > 1, tools, ...) are refused with 400 naming
them; nothing that changes the answer is silently ignored. See docs/api.md.`,
		Example: `  seam api --model stories260K.bin --tokenizer tok512.bin --listen 127.0.0.1:8080
  seam api --model model.seam --stages 10.0.0.2:7070,10.0.0.3:7070 --listen :8080
  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"stories260K","messages":[{"role":"user","content":"Hi"}]}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runAPI(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.modelPath, "model", "", "model: GGUF file, llama2.c checkpoint or container directory (required)")
	fl.StringVar(&f.tokPath, "tokenizer", "", "llama2.c tokenizer file (required for llama2.c checkpoints)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "HTTP address to listen on")
	fl.StringVar(&f.name, "model-name", "", "model id clients use (default: the model's file name without extension)")
	fl.IntVar(&f.maxConcurrent, "max-concurrent", api.DefaultMaxConcurrent, "requests generating at once (each holds a session on every stage)")
	fl.IntVar(&f.queue, "queue", api.DefaultQueue, "requests waiting for a slot beyond --max-concurrent; more get 429")
	fl.Int64Var(&f.maxBody, "max-body", api.DefaultMaxBody, "largest request body in bytes; larger gets 413")
	fl.DurationVar(&f.poll, "poll", 500*time.Millisecond, "how often the head pings every stage (status, metrics, re-dial)")
	addThreadsFlag(fl, &f.threads)
	f.split.register(cmd)
	f.kv.register(cmd)
	cmd.MarkFlagRequired("model")
	return cmd
}

func runAPI(cmd *cobra.Command, f *apiFlags) error {
	if err := applyThreads(f.threads); err != nil {
		return err
	}
	if f.maxConcurrent < 1 || f.queue < 0 || f.maxBody < 1 {
		return fmt.Errorf("--max-concurrent %d, --queue %d, --max-body %d: want >= 1, >= 0, >= 1", f.maxConcurrent, f.queue, f.maxBody)
	}
	if err := f.split.validate(cmd); err != nil {
		return err
	}
	if err := f.kv.check(); err != nil {
		return err
	}
	if n := f.kv.changed(cmd); n != "" && f.split.active() {
		return fmt.Errorf("--%s sizes the model run in this process; with stages give it to each 'seam serve'", n)
	}
	// main's context ends at SIGINT or SIGTERM (internal/signals), as for
	// every command; a second signal exits at once.
	ctx := cmd.Context()
	e, err := openEngine(ctx, f.modelPath, f.tokPath, &f.split, &f.kv, f.poll)
	if err != nil {
		return err
	}
	defer e.stop()
	tmpl, err := loadTemplate(f.modelPath, f.tokPath)
	if err != nil {
		return fmt.Errorf("chat template: %w", err)
	}
	name := f.name
	if name == "" {
		name = defaultModelName(f.modelPath)
	}
	srv, err := api.New(api.Config{Engine: e.engine, Tokenizer: e.tok, Template: tmpl, ContextLen: e.config.SeqLen, ModelName: name, ModelInfo: e.config.String(),
		MaxConcurrent: f.maxConcurrent, Queue: f.queue, MaxBody: f.maxBody, Logger: slog.Default()})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	// The address line is for scripts and tests that pick port 0.
	fmt.Fprintf(cmd.OutOrStdout(), "serving %q on http://%s (page at /, OpenAI API at /v1)\n", name, ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "seam api: shutting down: no new connections; aborting requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; err != nil {
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "seam api: stopped cleanly")
	return nil
}
