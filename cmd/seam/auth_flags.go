package main

import (
	"fmt"
	"log/slog"

	"github.com/seamlm/seam/auth"
	"github.com/spf13/cobra"
)

// authFlags are --key, --trust and --insecure, shared by serve, run and api.
type authFlags struct {
	key, trust string
	insecure   bool
}

func (f *authFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.key, "key", "", "this node's private key (seam keygen); connections are TLS 1.3, mutually authenticated")
	cmd.Flags().StringVar(&f.trust, "trust", "", "trust file: fingerprints of the peers this node accepts, one per line")
	cmd.Flags().BoolVar(&f.insecure, "insecure", false, "plaintext, unauthenticated connections (loopback experiments only; the peer must use it too)")
}

// config loads the key and trust file, or returns the insecure
// configuration after warning loudly. what names the node in the warning;
// stage is the stage name its log lines carry ("head" for a head).
func (f *authFlags) config(what, stage string) (*auth.Config, error) {
	log := slog.Default().With("stage", stage) // auth's own lines give the session
	if f.insecure {
		if f.key != "" || f.trust != "" {
			return nil, fmt.Errorf("--insecure turns keys off: give either --insecure or --key and --trust, not both")
		}
		log.Warn("INSECURE: --insecure is set: "+what+" connections are neither encrypted nor authenticated; anyone who can reach them can read, inject and use them", "session", 0)
		return &auth.Config{Insecure: true, Logger: log}, nil
	}
	if f.key == "" || f.trust == "" {
		return nil, fmt.Errorf("give --key FILE and --trust FILE (make a key with 'seam keygen --out FILE'), or --insecure for plaintext on a network you trust")
	}
	key, err := auth.LoadKeyFile(f.key)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	trust, err := auth.LoadTrustFile(f.trust)
	if err != nil {
		return nil, fmt.Errorf("--trust: %w", err)
	}
	if trust.Len() == 0 {
		return nil, fmt.Errorf("--trust %s lists no keys: this node would refuse every peer", f.trust)
	}
	cfg := &auth.Config{Key: key, Trust: trust, Logger: log}
	if err := cfg.Prepare(); err != nil {
		return nil, err
	}
	log.Info("authenticating connections", "session", 0, "self", auth.Public(key), "trusted", trust.Len(), "trust", f.trust)
	return cfg, nil
}

// set reports whether any of the flags was given.
func (f *authFlags) set() bool { return f.key != "" || f.trust != "" || f.insecure }
