package main

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/mapped"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var (
		modelPath, layers, listen, name string
		timeout, heartbeat              time.Duration
		allowDown                       []string
		maxSessions, maxConns, threads  int
		lf                              limitFlags
		verify                          bool
		linkMbps, linkLatMs             float64
		memory                          string
		af                              authFlags
		kv                              kvFlags
	)
	cmd := &cobra.Command{
		Use:   "serve --model DIR [--layers A:B] --listen ADDR",
		Short: "Serve a range of a model's layers as a pipeline stage",
		Long: `Serve runs layers [A, B) of the model as one pipeline stage. A head
('seam run --stages ...') connects, checks every stage's range, and routes each
stage to the next. The first stage (A = 0) embeds token ids; the last
(B = n_layers) sends logits straight back to the head.

With a container only this range's segment files are mapped (plus the
embedding for a first stage and the head for a last one).

Without --layers the stage joins a pool: it measures its free memory
(capped by --memory) and its compute speed on the model's own layers, and
waits for a head ('seam run --pool', 'seam api --pool') to measure the
links, plan the chain and assign it a range, which it then maps and
serves. A pool member is assigned once; restart it to re-plan.

Every connection is TLS 1.3 with mutual authentication: give --key (made with
'seam keygen') and --trust (the fingerprints of the head and of the other
stages). A peer whose key is not trusted is refused before any frame is read,
and the refusal is logged with its fingerprint. --insecure turns this off for
loopback experiments; the head must then use --insecure too.`,
		Example: `  seam serve --model model.seam --layers 0:3 --listen :7070 --key stage1.key --trust cluster.trust
  seam serve --model model.seam --listen :7070 --key stage2.key --trust cluster.trust --memory 6GiB`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyThreads(threads); err != nil {
				return err
			}
			lc, err := linkConfig(linkMbps, linkLatMs)
			if err != nil {
				return err
			}
			var a, b int // 0, 0: a pool member, assigned its range later
			if layers != "" {
				if a, b, err = parseRange(layers); err != nil {
					return err
				}
			}
			if name == "" {
				name = defaultStageName(a, b)
			}
			if err := lf.check(); err != nil {
				return err
			}
			if err := kv.check(); err != nil {
				return err
			}
			ac, err := af.config("stage", name)
			if err != nil {
				return err
			}
			if layers == "" {
				// An automatic budget is resolved once an assignment's
				// weights are loaded (kvAuto); a given one now.
				var kvBudget int64
				if !kv.auto() {
					if kvBudget, err = kv.bytes(name); err != nil {
						return err
					}
				}
				if cmd.Flags().Changed("max-sessions") {
					return fmt.Errorf("--max-sessions: a pool member holds as many sessions as the head's plan budgets for (seam run --pool --sessions N)")
				}
				base := stage.Config{Timeout: timeout, AllowDownstream: allowDown, Auth: ac, MaxConns: maxConns, Heartbeat: heartbeat,
					KVBudget: kvBudget, KVF16: kv.f16, Chunk: kv.chunk, Watch: mapped.Changed}
				lf.apply(&base)
				ps := poolServe{modelPath: modelPath, listen: listen, name: name, memory: memory, verify: verifyWeights(cmd, name, modelPath, verify), base: base}
				if kv.auto() {
					ps.kvAuto = func() (int64, error) { return kv.bytes(name) }
				}
				return ps.run(cmd, lc)
			}
			if cmd.Flags().Changed("memory") {
				return fmt.Errorf("--memory is a pool member's budget; a stage with --layers maps its range whatever it costs")
			}
			m, err := loader.Open(modelPath, modelOpts(loader.Options{First: a, Last: b, NoTokenizer: true, Verify: verifyWeights(cmd, name, modelPath, verify)}))
			if err != nil {
				return err
			}
			// Unmapped only after the server has stopped: every handler
			// has returned, so no kernel still reads the weights.
			defer m.Close()
			id, err := m.Identity()
			if err != nil {
				return err
			}
			// After loading: the weights' copy is no longer available
			// memory.
			kvBudget, err := kv.bytes(name)
			if err != nil {
				return err
			}
			mod, err := model.New(m.Weights)
			if err != nil {
				return fmt.Errorf("%s: %w", modelPath, err)
			}
			cfg := stage.Config{Model: mod, Identity: id, Name: name, Link: lc, Timeout: timeout, MaxSessions: maxSessions, MaxConns: maxConns,
				AllowDownstream: allowDown, Logger: slog.Default(), Auth: ac, Heartbeat: heartbeat, KVBudget: kvBudget, KVF16: kv.f16, Chunk: kv.chunk,
				Watch: mapped.Changed}
			lf.apply(&cfg)
			if err := stage.UseCodecs(&cfg, m.Codecs); err != nil {
				return err
			}
			srv, err := stage.New(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			logLoaded(name, m)
			// The address line is for scripts and tests that pick port 0.
			fmt.Fprintf(cmd.OutOrStdout(), "serving layers [%d, %d) of %d as %q on %s\n", a, b, m.Weights.Config.NLayers, name, ln.Addr())
			return serveUntilSignal(cmd, srv, ln, name)
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "model: a container directory (or a GGUF file / llama2.c checkpoint) (required)")
	cmd.Flags().StringVar(&layers, "layers", "", "layer range A:B to serve, 0 <= A < B <= n_layers (default: join a pool and let a head assign one)")
	cmd.Flags().StringVar(&memory, "memory", "", "pool member: memory to offer for weights and KV caches, e.g. 6GiB (default: what the system has available)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7070", "address to listen on")
	addThreadsFlag(cmd.Flags(), &threads)
	cmd.Flags().StringVar(&name, "name", "", "stage name in messages (default host[A:B])")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "bound on each write and on the downstream handshake")
	cmd.Flags().DurationVar(&heartbeat, "heartbeat", stage.DefaultHeartbeat, "while computing a frame, tell its head this often that the stage is alive (a head declares a stage hung after its --hang of silence; keep this a few times shorter)")
	cmd.Flags().IntVar(&maxSessions, "max-sessions", 64, "most sessions (KV caches) held at once")
	cmd.Flags().IntVar(&maxConns, "max-conns", stage.DefaultMaxConns, "most connections held at once; more are closed as they arrive (and logged)")
	cmd.Flags().BoolVar(&verify, "verify", true, "check the BLAKE3 checksums of a container's range before serving it, and refuse a damaged one (GGUF and llama2.c files have none: --verify with one is an error)")
	cmd.Flags().StringSliceVar(&allowDown, "allow-downstream", nil, "host:port addresses this stage may be routed to (default: any, or with --insecure only loopback addresses; set it on stages reachable by untrusted hosts)")
	lf.register(cmd)
	registerLinkFlags(cmd, &linkMbps, &linkLatMs)
	af.register(cmd)
	kv.register(cmd)
	cmd.MarkFlagRequired("model")
	return cmd
}

// logLoaded says how the stage holds its weights.
func logLoaded(stageName string, m *loader.Model) {
	w := m.Weights
	if m.Resident > 0 {
		slog.Info("weights copied into huge-page memory (--mmap reads them from the file instead)", "stage", stageName, "session", 0,
			"layers", fmt.Sprintf("[%d, %d)", w.First, w.Last), "bytes", m.Resident)
		return
	}
	slog.Info("weights read from the file's mapping (--mmap)", "stage", stageName, "session", 0, "layers", fmt.Sprintf("[%d, %d)", w.First, w.Last))
}

// verifyWeights says whether to check the checksums of the range served:
// as --verify says for a container; for a file without checksums only when
// --verify was given explicitly, so that the loader refuses it by name
// rather than the default being dropped in silence.
func verifyWeights(cmd *cobra.Command, name, path string, verify bool) bool {
	if cmd.Flags().Changed("verify") {
		return verify
	}
	f, err := loader.Detect(path)
	if err == nil && f != loader.FormatContainer {
		slog.Info("no checksums to verify: not a Seam container", "stage", name, "session", 0, "model", path, "format", string(f))
		return false
	}
	return verify
}

// limitFlags are serve's quotas on what one peer may make the stage hold or
// compute (docs/reliability.md, "Limits"). Zero takes the default that
// stage.Config documents; the defaults never refuse a head that waits for
// each session's reply, as every head of this project does.
type limitFlags struct {
	perConn, perIdentity, prefill, queue, inflight int
	idle                                           time.Duration
}

func (f *limitFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.perConn, "max-sessions-per-conn", 0, "most sessions one head connection holds (default: --max-sessions)")
	fl.IntVar(&f.perIdentity, "max-sessions-per-identity", 0, "most sessions one peer key holds over all its connections, or one IP address with --insecure (default: --max-sessions)")
	fl.IntVar(&f.prefill, "max-prefill", stage.DefaultMaxPrefill, "most tokens in one Prefill frame; longer ones are refused (at most the wire's 8192)")
	fl.IntVar(&f.queue, "max-queue", 0, "most frames a connection may have sent that the stage has not finished (default: 2 x --max-sessions-per-conn)")
	fl.IntVar(&f.inflight, "max-inflight-tokens", 0, "most tokens of those frames (default: --max-sessions-per-conn x --max-prefill)")
	fl.DurationVar(&f.idle, "idle-timeout", stage.DefaultIdleTimeout, "close a head connection that holds no session and sends nothing for this long (0: never)")
}

// check refuses values no stage can honour, naming the flag.
func (f *limitFlags) check() error {
	for _, v := range []struct {
		n    int
		flag string
	}{{f.perConn, "--max-sessions-per-conn"}, {f.perIdentity, "--max-sessions-per-identity"}, {f.queue, "--max-queue"}, {f.inflight, "--max-inflight-tokens"}} {
		if v.n < 0 {
			return fmt.Errorf("%s %d: want 0 (the default) or more", v.flag, v.n)
		}
	}
	if wireMax := wire.DefaultLimits().MaxTokens; f.prefill < 1 || f.prefill > wireMax {
		return fmt.Errorf("--max-prefill %d: want 1 to %d (the wire's cap on the tokens of a frame)", f.prefill, wireMax)
	}
	if f.idle < 0 {
		return fmt.Errorf("--idle-timeout %v: want a duration, or 0 to never close idle connections", f.idle)
	}
	return nil
}

func (f *limitFlags) apply(c *stage.Config) {
	c.MaxSessionsPerConn, c.MaxSessionsPerIdentity, c.MaxPrefill = f.perConn, f.perIdentity, f.prefill
	c.MaxQueue, c.MaxInFlight, c.IdleTimeout = f.queue, f.inflight, f.idle
	if f.idle == 0 {
		c.IdleTimeout = -1 // the flag's 0 is "never"; the Config's 0 is the default
	}
}
