package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	var verbose bool
	root := &cobra.Command{
		Use:   "seam",
		Short: "Run one language model across several ordinary machines",
		Long: `Seam runs a llama-family transformer whole or split into pipeline stages,
each a contiguous range of layers on one machine, connected by a framed,
checked wire protocol.

Models: GGUF files, llama2.c checkpoints, or Seam container directories
(made with 'seam import').`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
		},
	}
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log progress and timings to stderr")
	root.AddCommand(newRunCmd(), newScoreCmd(), newDemoCmd(), newImportCmd(), newVerifyCmd(), newInspectCmd(), newServeCmd(), newSynthCmd())
	root.AddCommand(codecCommands()...)
	root.AddCommand(clusterCommands()...)
	bench := &cobra.Command{Use: "bench", Short: "Measure Seam's speed: imports, stage links, decode", Args: cobra.NoArgs}
	bench.AddCommand(newBenchSplitCmd())
	bench.AddCommand(benchCommands()...)
	root.AddCommand(bench)
	return root
}
