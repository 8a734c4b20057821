package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/seamlm/seam/loader"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	var (
		verbose   int
		logFormat string
	)
	root := &cobra.Command{
		Use:   "seam",
		Short: "Run one language model across several ordinary machines",
		Long: `Seam runs a llama-family transformer whole or split into pipeline stages,
each a contiguous range of layers on one machine, connected by a framed,
checked wire protocol.

Models: GGUF files, llama2.c checkpoints, or Seam container directories
(made with 'seam import'). 'seam pull' downloads a GGUF.

Logs go to stderr: warnings and errors always; -v adds connections,
handshakes, sessions, plans, imports and progress; -vv adds every frame.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			h, err := logHandler(cmd.ErrOrStderr(), verbose, logFormat)
			if err != nil {
				return err
			}
			slog.SetDefault(slog.New(h))
			return nil
		},
	}
	root.PersistentFlags().CountVarP(&verbose, "verbose", "v", "log what happens to stderr: -v for events (Info), -vv for every frame (Debug)")
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format: text (key=value) or json")
	root.PersistentFlags().BoolVar(&keepMapped, "mmap", false, "commands that run a model: read its layers from the file's mapping instead of copying them into huge-page memory at load (less memory, and the system may drop and re-read them; f32 decode up to 16% slower)")
	root.AddCommand(newRunCmd(), newScoreCmd(), newDemoCmd(), newPullCmd(), newImportCmd(), newVerifyCmd(), newInspectCmd(),
		newServeCmd(), newSynthCmd(), newTemplateCmd(), newVersionCmd(), newAPICmd())
	root.AddCommand(codecCommands()...)
	root.AddCommand(newTokenizeCmd())
	root.AddCommand(clusterCommands()...)
	root.AddCommand(newBenchCmd())
	return root
}

// keepMapped is --mmap.
var keepMapped bool

// modelOpts applies --mmap to the options of a model that will run.
func modelOpts(o loader.Options) loader.Options {
	o.Mapped = o.Mapped || keepMapped
	return o
}

// logHandler builds the slog handler the flags ask for.
func logHandler(w io.Writer, verbose int, format string) (slog.Handler, error) {
	level := slog.LevelWarn
	switch {
	case verbose == 1:
		level = slog.LevelInfo
	case verbose >= 2:
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
