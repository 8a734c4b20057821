package main

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/importer"
	"github.com/seamlm/seam/internal/signals"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newImportCmd() *cobra.Command {
	var (
		out, tokPath string
		force        bool
	)
	cmd := &cobra.Command{
		Use:   "import SRC --out DIR [--tokenizer PATH] [--force]",
		Short: "Convert a GGUF file or llama2.c checkpoint into a Seam container",
		Long: `Import writes a Seam container: one segment file per layer, one for the
token embedding, one for the final norm and classifier, and an index written
last. Tensors are streamed one at a time and copied byte for byte (quantized
tensors are not requantized).

Ctrl-C (or SIGTERM) stops the import and removes what it wrote. A killed
import leaves segment files but no index, so it is never mistaken for a
container; the next import into the same folder removes them, saying so.
A folder that already holds a container is refused unless --force is given;
a folder holding any other file is always refused.`,
		Example: `  seam import stories260K.bin --tokenizer tok512.bin --out stories260K.seam
  seam import model.gguf --out model.seam --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := importer.Options{TokenizerPath: tokPath, Force: force, Context: cmd.Context(), Logger: slog.Default()}
			opts.Progress = byteProgress(cmd, "importing")
			start := time.Now()
			if err := importer.Import(args[0], out, opts); err != nil {
				if in := signals.Cause(cmd.Context()); in != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "seam import: %v\n", err)
					return in
				}
				return err
			}
			c, err := container.Open(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %s into %s in %v: %d bytes of weights, identity %s\n",
				args[0], out, time.Since(start).Round(time.Millisecond), c.WeightBytes(), hexID(c.Identity()))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "container directory to create (new or empty, or an earlier container with --force)")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (required for llama2.c checkpoints)")
	cmd.Flags().BoolVar(&force, "force", false, "replace a container already in --out")
	cmd.MarkFlagRequired("out")
	return cmd
}

// newBar returns a byte progress bar on stderr when it is a terminal, else nil.
func newBar(cmd *cobra.Command, what string) *progressbar.ProgressBar {
	f, ok := stderrTerminal(cmd)
	if !ok {
		return nil
	}
	return progressbar.NewOptions64(-1, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30), progressbar.OptionOnCompletion(func() { fmt.Fprintln(f) }))
}

// byteProgress returns a progress callback: a bar on a terminal, otherwise
// (for work of 64 MiB or more, which takes long enough to wonder about) a
// line on stderr at every tenth of the total, or every 64 MiB when the total
// is unknown.
func byteProgress(cmd *cobra.Command, what string) func(done, total int64) {
	if bar := newBar(cmd, what); bar != nil {
		return func(done, total int64) {
			if total > 0 {
				bar.ChangeMax64(total)
			}
			bar.Set64(done)
		}
	}
	next := int64(1)
	return func(done, total int64) {
		switch {
		case total > 0 && total < 64<<20:
		case total > 0 && done*10 >= next*total:
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d%% (%d of %d bytes)\n", what, done*100/total, done, total)
			next = done*10/total + 1
		case total <= 0 && done >= next<<26:
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d bytes\n", what, done)
			next = done>>26 + 1
		}
	}
}

// stderrTerminal returns the command's stderr when it is a terminal: progress
// bars are drawn only there, never into logs or pipes.
func stderrTerminal(cmd *cobra.Command) (*os.File, bool) {
	f, ok := cmd.ErrOrStderr().(*os.File)
	return f, ok && term.IsTerminal(int(f.Fd()))
}

func hexID(d [32]byte) string { return hex.EncodeToString(d[:]) }
