package main

import (
	"fmt"
	"time"

	"github.com/seamlm/seam/eval"
	"github.com/spf13/cobra"
)

func newCaptureCmd() *cobra.Command {
	var (
		modelPath, tokPath, out string
		boundary, maxMB         int
		data                    dataFlags
	)
	cmd := &cobra.Command{
		Use:   "capture --model PATH --boundary L [--file TEXT | --sample-tokens N --seed S] --out F",
		Short: "Record the hidden states that cross a split boundary, to fit a codec on",
		Long: `Capture runs layers [0, L) of the model over a token stream and records
the hidden state entering layer L at every position: exactly what a pipeline
stage ending at layer L sends to the next. The capture file also holds the
tokens, the model identity and a digest of
the tokens, so that 'seam fit-codec' can record where a codec came from and
measure its KL divergence on held-out sequences.

The token stream is a text file (--file), cut into context-sized sequences
that each start with BOS, or, by default, text the model samples itself
(--sample-tokens, --seed), so that a codec can be fitted without a corpus.
Calibrate and evaluate on different seeds: 'seam eval' uses seed 2 by default,
capture seed 1.

--max-mb caps the file: capture stops after that many megabytes of hidden
states (4 bytes per value).`,
		Example: `  seam capture --model stories260K.seam --boundary 2 --sample-tokens 16384 --seed 1 --out b2.capture
  seam capture --model model.gguf --boundary 16 --file corpus.txt --out b16.capture`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := data.get(cmd)
			if err != nil {
				return err
			}
			lm, m, err := openFull(modelPath, tokPath)
			if err != nil {
				return err
			}
			defer lm.Close()
			if err := eval.CheckBoundary(boundary, m.Config().NLayers); err != nil {
				return err
			}
			seqs, desc, err := d.Tokens(lm, m, progress(cmd, "sampling tokens"), logf(cmd))
			if err != nil {
				return err
			}
			start := time.Now()
			cf, err := eval.CaptureAt(lm, m, seqs, boundary, maxMB, progress(cmd, "capturing"))
			if err != nil {
				return err
			}
			if n, all := cf.N(), eval.CountTokens(seqs); n < all {
				infof(cmd, "--max-mb %d reached: keeping the first %d of %d hidden states", maxMB, n, all)
			}
			if err := cf.WriteFile(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "captured %d hidden states entering layer %d (width %d) from %d sequences (%s) into %s in %v; calibration digest %s\n",
				cf.N(), boundary, cf.Width, len(cf.Seqs), desc, out, time.Since(start).Round(time.Millisecond), hexID(cf.CalibDigest()))
			return nil
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "model: container directory, GGUF file or llama2.c checkpoint (required)")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (required for llama2.c checkpoints)")
	cmd.Flags().IntVar(&boundary, "boundary", 0, "boundary layer L: record the hidden states entering layer L, 1..n_layers-1 (required)")
	cmd.Flags().StringVar(&out, "out", "", "capture file to write (required)")
	cmd.Flags().IntVar(&maxMB, "max-mb", 1024, "size cap: stop after this many MiB of hidden states")
	data.register(cmd, eval.DefaultCalibTokens, eval.DefaultCalibSeed, "calibration text")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("boundary")
	cmd.MarkFlagRequired("out")
	return cmd
}
