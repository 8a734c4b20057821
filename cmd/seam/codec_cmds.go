package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/eval"
	"github.com/spf13/cobra"
	"github.com/zeebo/blake3"
)

// codecCommands are the boundary-codec and evaluation commands.
func codecCommands() []*cobra.Command {
	group := &cobra.Command{
		Use:   "codec",
		Short: "Attach and inspect learned boundary codecs",
		Long: `A boundary codec compresses the hidden states that cross a split boundary
(docs/codec.md). Make one with 'seam capture' and 'seam fit-codec', attach it
to a container with 'seam codec add', and measure it with 'seam eval'.`,
		RunE: groupRun,
	}
	group.AddCommand(newCodecAddCmd(), newCodecShowCmd())
	return []*cobra.Command{newCaptureCmd(), newFitCodecCmd(), group, newEvalCmd()}
}

func newCodecAddCmd() *cobra.Command {
	var dir string
	var boundary int
	cmd := &cobra.Command{
		Use:   "add --model DIR --boundary L CODEC",
		Short: "Attach a codec file to a container at a boundary",
		Long: `Codec add copies CODEC into the container DIR as the codec of boundary L
(the hidden states entering layer L, sent by the stage that ends at L), and
records its size and BLAKE3 digest in the index, replacing any codec there.
Stages then load it with the weights, and both ends of the boundary compare
its digest at handshake.

The codec must have the model's hidden width, and the model identity and
boundary it records (set by 'seam fit-codec') must be this container's and L.`,
		Example: `  seam codec add --model stories260K.seam --boundary 2 b2.codec`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			c, err := codec.Unmarshal(b)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			ctr, err := container.Open(dir)
			if err != nil {
				return err
			}
			cfg := ctr.Config()
			if boundary < 1 || boundary >= cfg.NLayers {
				return fmt.Errorf("--boundary %d: a container of %d layers has codecs at boundaries 1..%d", boundary, cfg.NLayers, cfg.NLayers-1)
			}
			if err := eval.CheckCodec(c, args[0], ctr.Identity(), cfg, boundary); err != nil {
				return err
			}
			if c.Provenance().Model == ([32]byte{}) {
				infof(cmd, "warning: %s records no model identity; attaching it unchecked", args[0])
			}
			if err := container.AddCodec(dir, boundary, b, blake3.Sum256(b)); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "attached %s at boundary %d of %s: %s bytes per token, %d of %d components, codec %s (short id %08x)\n",
				args[0], boundary, dir, strconv.FormatFloat(c.MeanPayloadBytes(), 'g', 4, 64), c.Kept(), c.Width(), hexID(c.Digest()), c.ShortID())
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "model", "", "container directory (required)")
	cmd.Flags().IntVar(&boundary, "boundary", 0, "boundary layer L: the codec carries the hidden states entering layer L (required)")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("boundary")
	return cmd
}

func newCodecShowCmd() *cobra.Command {
	var dir string
	var boundary int
	cmd := &cobra.Command{
		Use:   "show (CODEC | --model DIR --boundary L)",
		Short: "Print a codec's shape, bit allocation, provenance and measurements",
		Example: `  seam codec show b2.codec
  seam codec show --model stories260K.seam --boundary 2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c *codec.Codec
			var err error
			switch {
			case len(args) == 1 && dir == "":
				c, err = codec.ReadFile(args[0])
			case len(args) == 0 && dir != "":
				c, err = eval.AttachedCodec(dir, boundary)
			default:
				return errors.New("give a codec file, or --model DIR --boundary L")
			}
			if err != nil {
				return err
			}
			printCodec(cmd, c)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "model", "", "container directory whose attached codec to show")
	cmd.Flags().IntVar(&boundary, "boundary", 0, "boundary of the attached codec")
	return cmd
}

func printCodec(cmd *cobra.Command, c *codec.Codec) {
	out := cmd.OutOrStdout()
	p, s := c.Provenance(), c.Stats()
	fmt.Fprintf(out, "codec %s (short id %08x)\n", hexID(c.Digest()), c.ShortID())
	fit := "for the activations"
	if c.Weights() != nil {
		fit = "for the model's output (weighted by measured sensitivity)"
	}
	if c.Variable() {
		steps := c.Steps()
		scheme := "entropy-coded"
		if c.Trellis() {
			scheme = "trellis-coded (8 states), entropy-coded"
		}
		fmt.Fprintf(out, "format version %d, %s, fitted %s\n", c.Version(), scheme, fit)
		fmt.Fprintf(out, "width %d, %d components kept, %.2f bytes per token on the held-out rows (at most %d)\n", c.Width(), c.Kept(), c.MeanPayloadBytes(), c.PayloadBytes())
		if len(steps) > 0 {
			fmt.Fprintf(out, "quantizer steps %.4g (first component) to %.4g (last)\n", steps[0], steps[len(steps)-1])
		}
		if m := c.ClassMultipliers(); m != nil {
			fmt.Fprintf(out, "token classes: %d, step multipliers %v (by rising predicted sensitivity)\n", len(m), m)
		}
	} else {
		fmt.Fprintf(out, "format version %d, fixed bits, fitted %s\n", c.Version(), fit)
		fmt.Fprintf(out, "width %d, %d components kept, %d bytes per token, gain %v\n", c.Width(), c.Kept(), c.PayloadBytes(), c.Gain())
		fmt.Fprintf(out, "bits per component: %s\n", bitRuns(c.Bits()))
	}
	fmt.Fprintf(out, "model %s, boundary %d, calibration data %s\n", hexID(p.Model), p.Boundary, hexID(p.CalibData))
	fmt.Fprintf(out, "fitted on %d rows, %d held out\n", s.FitSamples, s.HoldoutSamples)
	if s.HasMSE {
		fmt.Fprintf(out, "held-out MSE %.6g, variance %.6g: %.4g of the variance lost\n", s.HeldoutMSE, s.HeldoutVar, s.HeldoutMSE/s.HeldoutVar)
	}
	if s.HasKL {
		fmt.Fprintf(out, "held-out KL %.6g nats per token\n", s.HeldoutKL)
	}
}

// bitRuns prints a bit allocation compactly: "6x3 5x10 4x40" is three
// components at 6 bits, then ten at 5, then forty at 4.
func bitRuns(bits []uint8) string {
	if len(bits) == 0 {
		return "none (every component dropped)"
	}
	var parts []string
	for i := 0; i < len(bits); {
		j := i
		for j < len(bits) && bits[j] == bits[i] {
			j++
		}
		parts = append(parts, fmt.Sprintf("%dx%d", bits[i], j-i))
		i = j
	}
	return strings.Join(parts, " ")
}
