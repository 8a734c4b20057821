package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seamlm/seam/container"
	"github.com/spf13/cobra"
)

func newVerifyCmd() *cobra.Command {
	var layers string
	cmd := &cobra.Command{
		Use:   "verify DIR [--layers A:B]",
		Short: "Check a container's structure, shapes, bounds and every checksum",
		Long: `Verify checks the index digest and generation, the structure, every region's
shape against its byte length for its dtype, bounds, alignment and overlaps,
and the BLAKE3 checksum of every region, tokenizer and codec. It exits 1 and
names the first failing region on any failure. An empty container fails.

--layers A:B checks a partial container: a stage's folder holding the
index and only the segments that layers [A, B) map (docs/container.md,
"Partial containers"). It hashes exactly those segments and the codecs at
boundaries A and B, the tokenizer if present, and lists the other segments
as absent or present.`,
		Example: `  seam verify stories.seam
  seam verify stage2.seam --layers 2:5`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			c, err := container.Open(args[0])
			if err != nil {
				return fmt.Errorf("verify %s: FAILED: %w", args[0], err)
			}
			progress := byteProgress(cmd, "verifying")
			if layers != "" {
				a, b, err := parseRange(layers)
				if err != nil {
					return err
				}
				rep, err := c.VerifyLayers(a, b, progress)
				if err != nil {
					return fmt.Errorf("verify %s --layers %d:%d: FAILED: %w", args[0], a, b, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "verify %s --layers %d:%d: OK: %s checked (%d regions, %d bytes) in %v, tokenizer %v, %d codecs; not needed: %d absent, %d present; identity %s\n",
					args[0], a, b, strings.Join(rep.Checked, " "), rep.Regions, rep.Bytes, time.Since(start).Round(time.Millisecond),
					rep.Tokenizer, rep.Codecs, len(rep.Absent), len(rep.Present), hexID(rep.Identity))
				return nil
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
	cmd.Flags().StringVar(&layers, "layers", "", "check only what layers A:B need (a stage's partial container)")
	return cmd
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
