package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/importer"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newImportCmd() *cobra.Command {
	var out, tokPath string
	cmd := &cobra.Command{
		Use:   "import SRC --out DIR [--tokenizer PATH]",
		Short: "Convert a GGUF file or llama2.c checkpoint into a Seam container",
		Long: `Import writes a Seam container: one segment file per layer, one for the
token embedding, one for the final norm and classifier, and an index written
last. Tensors are streamed one at a time and copied byte for byte (quantized
tensors are not requantized). An interrupted import leaves no index, so it is
never mistaken for a container; rerun it into an empty directory.`,
		Example: `  seam import stories260K.bin --tokenizer tok512.bin --out stories260K.seam
  seam import model.gguf --out model.seam`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := importer.Options{TokenizerPath: tokPath}
			bar := newBar(cmd, "importing")
			if bar != nil {
				opts.Progress = func(done, total int64) {
					bar.ChangeMax64(total)
					bar.Set64(done)
				}
			}
			start := time.Now()
			if err := importer.Import(args[0], out, opts); err != nil {
				return err
			}
			if bar != nil {
				bar.Finish()
				fmt.Fprintln(cmd.ErrOrStderr())
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
	cmd.Flags().StringVar(&out, "out", "", "container directory to create (must not exist or be empty)")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (required for llama2.c checkpoints)")
	cmd.MarkFlagRequired("out")
	return cmd
}

// newBar returns a byte progress bar on stderr when it is a terminal, else nil.
func newBar(cmd *cobra.Command, what string) *progressbar.ProgressBar {
	if _, ok := stderrTerminal(cmd); !ok {
		return nil
	}
	return progressbar.DefaultBytes(-1, what)
}

// stderrTerminal returns the command's stderr when it is a terminal: progress
// bars are drawn only there, never into logs or pipes.
func stderrTerminal(cmd *cobra.Command) (*os.File, bool) {
	f, ok := cmd.ErrOrStderr().(*os.File)
	return f, ok && term.IsTerminal(int(f.Fd()))
}

func newVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify DIR",
		Short: "Check a container's structure, shapes, bounds and every checksum",
		Long: `Verify checks the index digest and generation, the structure, every region's
shape against its byte length for its dtype, bounds, alignment and overlaps,
and the BLAKE3 checksum of every region, tokenizer and codec. It exits 1 and
names the first failing region on any failure. An empty container fails.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			c, err := container.Open(args[0])
			if err != nil {
				return fmt.Errorf("verify %s: FAILED: %w", args[0], err)
			}
			var progress func(done, total int64)
			if bar := newBar(cmd, "verifying"); bar != nil {
				progress = func(done, total int64) { bar.ChangeMax64(total); bar.Set64(done) }
				defer fmt.Fprintln(cmd.ErrOrStderr())
			}
			rep, err := c.VerifyProgress(progress)
			if err != nil {
				return fmt.Errorf("verify %s: FAILED: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "verify %s: OK: generation %d, %d segments, %d regions, %d bytes checked in %v, tokenizer %v, %d codecs; identity %s\n",
				args[0], rep.Generation, rep.Segments, rep.Regions, rep.Bytes, time.Since(start).Round(time.Millisecond), rep.Tokenizer, rep.Codecs, hexID(rep.Identity))
			return nil
		},
	}
}

func newInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect DIR",
		Short: "Print a container's model, layers, regions and sizes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := container.Open(args[0])
			if err != nil {
				return err
			}
			cfg := c.Config()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "container %s (generation %d, alignment %d)\n", c.Dir(), c.Generation(), c.Alignment())
			fmt.Fprintf(out, "model: %s\nidentity: %s\nweights: %d bytes\ntokenizer: %v\n", cfg.String(), hexID(c.Identity()), c.WeightBytes(), c.HasTokenizer())
			for _, ci := range c.Codecs() {
				fmt.Fprintf(out, "codec: boundary %d, %s, %d bytes, digest %s\n", ci.Boundary, ci.File, ci.Size, hexID(ci.Digest))
			}
			tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "SEGMENT\tREGION\tROLE\tDTYPE\tSHAPE\tOFFSET\tBYTES")
			for _, s := range c.Segments() {
				for _, r := range s.Regions {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%dx%d\t%d\t%d\n", s.Name, r.Name, r.Role, r.DType, r.Rows, r.Cols, r.Offset, r.Length)
				}
			}
			return tw.Flush()
		},
	}
}

func hexID(d [32]byte) string { return hex.EncodeToString(d[:]) }
