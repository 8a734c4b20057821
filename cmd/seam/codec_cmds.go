package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
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
		Args: cobra.NoArgs,
	}
	group.AddCommand(newCodecAddCmd(), newCodecShowCmd())
	return []*cobra.Command{newCaptureCmd(), newFitCodecCmd(), group, newEvalCmd()}
}

// Defaults shared by capture and eval, so that 'seam eval --budgets' fits
// the same codecs as 'seam capture' followed by 'seam fit-codec' with their
// defaults.
const (
	defaultCalibTokens = 16384
	defaultCalibSeed   = 1
	defaultEvalTokens  = 2048
	defaultEvalSeed    = 2
)

// dataFlags choose a token stream: a text file cut into context-sized
// sequences, or text the model samples itself.
type dataFlags struct {
	file         string
	sampleTokens int
	seed         uint64
	temperature  float64
	context      int
}

func (f *dataFlags) register(cmd *cobra.Command, defTokens int, defSeed uint64, what string) {
	cmd.Flags().StringVar(&f.file, "file", "", what+" from a text file: BOS, then the text's tokens, cut into context-sized sequences")
	cmd.Flags().IntVar(&f.sampleTokens, "sample-tokens", defTokens, what+" sampled from the model itself: this many tokens in all, BOS not counted (used unless --file)")
	cmd.Flags().Uint64Var(&f.seed, "seed", defSeed, "seed of the sampled text; calibration and evaluation must use different seeds")
	cmd.Flags().Float64Var(&f.temperature, "temperature", 1, "sampling temperature of the sampled text")
	cmd.Flags().IntVar(&f.context, "context", 0, "tokens per sequence cut from --file, BOS included (default: the model's context length)")
}

// tokens returns the sequences the flags ask for and a one-line description.
func (f *dataFlags) tokens(cmd *cobra.Command, lm *loader.Model, m *model.Model) ([][]int, string, error) {
	given := cmd.Flags().Changed("sample-tokens")
	if f.file != "" && given {
		return nil, "", errors.New("give --file or --sample-tokens, not both")
	}
	if f.file != "" {
		return textTokens(lm, f.file, f.context)
	}
	n := f.sampleTokens
	if n < 1 {
		return nil, "", fmt.Errorf("--sample-tokens %d: want at least 1", n)
	}
	if lm.Tokenizer == nil {
		return nil, "", fmt.Errorf("%s: sampling needs the vocabulary's BOS and EOS: give --tokenizer", lm.Path)
	}
	start := time.Now()
	seqs, err := eval.SampleTokens(m, lm.Tokenizer.BOS(), lm.Tokenizer.EOS(), n, f.seed, f.temperature, progress(cmd, "sampling tokens"))
	if err != nil {
		return nil, "", err
	}
	infof(cmd, "sampled %d tokens in %d sequences (seed %d, temperature %g) in %v", n, len(seqs), f.seed, f.temperature, time.Since(start).Round(time.Millisecond))
	return seqs, fmt.Sprintf("%d tokens sampled from the model (seed %d, temperature %g)", n, f.seed, f.temperature), nil
}

// textTokens cuts a text file into sequences of at most context tokens.
func textTokens(lm *loader.Model, path string, context int) ([][]int, string, error) {
	if lm.Tokenizer == nil {
		return nil, "", fmt.Errorf("%s: encoding --file needs a vocabulary: give --tokenizer", lm.Path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	seqLen := lm.Weights.Config.SeqLen
	if context != 0 {
		if context < 2 || context > seqLen {
			return nil, "", fmt.Errorf("--context %d: want 2..%d (the model's context length)", context, seqLen)
		}
		seqLen = context
	}
	seqs := eval.TokensFromText(lm.Tokenizer, string(b), seqLen)
	if len(seqs) == 0 {
		return nil, "", fmt.Errorf("%s: no text to use", path)
	}
	return seqs, fmt.Sprintf("%d tokens of %s", eval.CountTokens(seqs)-len(seqs), path), nil
}

// openFull opens a model holding every layer and prepares its forward pass.
func openFull(path, tokPath string) (*loader.Model, *model.Model, error) {
	lm, err := loader.Open(path, loader.Options{TokenizerPath: tokPath})
	if err != nil {
		return nil, nil, err
	}
	m, err := model.New(lm.Weights)
	if err != nil {
		lm.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return lm, m, nil
}

// progress returns a progress bar on stderr when it is a terminal, else nil
// (eval accepts a nil Progress).
func progress(cmd *cobra.Command, what string) eval.Progress {
	f, ok := stderrTerminal(cmd)
	if !ok {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
				progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
		}
		bar.Set(done)
		if done >= total {
			bar.Finish()
		}
	}
}

// infof prints a progress line to stderr.
func infof(cmd *cobra.Command, format string, args ...any) {
	fmt.Fprintf(cmd.ErrOrStderr(), "seam %s: %s\n", cmd.Name(), fmt.Sprintf(format, args...))
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(flag, s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%s %q: want comma-separated positive integers such as 16,24,32", flag, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// checkCodecFor checks a codec against the model and boundary it is meant
// for: width, and the provenance it records (when it records one).
func checkCodecFor(c *codec.Codec, what string, identity [32]byte, cfg model.Config, boundary int) error {
	if c.Width() != cfg.Dim {
		return fmt.Errorf("%s has width %d, the model's hidden width is %d", what, c.Width(), cfg.Dim)
	}
	p := c.Provenance()
	if p.Model != ([32]byte{}) && p.Model != identity {
		return fmt.Errorf("%s was fitted for model %s, this model is %s", what, hexID(p.Model), hexID(identity))
	}
	if p.Boundary != 0 && int(p.Boundary) != boundary {
		return fmt.Errorf("%s was fitted at boundary %d, not %d", what, p.Boundary, boundary)
	}
	return nil
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
			if err := checkCodecFor(c, args[0], ctr.Identity(), cfg, boundary); err != nil {
				return err
			}
			if c.Provenance().Model == ([32]byte{}) {
				infof(cmd, "warning: %s records no model identity; attaching it unchecked", args[0])
			}
			if err := container.AddCodec(dir, boundary, b, blake3.Sum256(b)); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "attached %s at boundary %d of %s: %d bytes per token, %d of %d components, codec %s (short id %08x)\n",
				args[0], boundary, dir, c.PayloadBytes(), c.Kept(), c.Width(), hexID(c.Digest()), c.ShortID())
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
				c, err = attachedCodec(dir, boundary)
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

// attachedCodec reads the codec attached to a container at boundary.
func attachedCodec(dir string, boundary int) (*codec.Codec, error) {
	ctr, err := container.Open(dir)
	if err != nil {
		return nil, err
	}
	b, err := ctr.Codec(boundary)
	if err != nil {
		return nil, fmt.Errorf("%s: boundary %d: %w", dir, boundary, err)
	}
	c, err := codec.Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("%s: codec at boundary %d: %w", dir, boundary, err)
	}
	return c, nil
}

func printCodec(cmd *cobra.Command, c *codec.Codec) {
	out := cmd.OutOrStdout()
	p, s := c.Provenance(), c.Stats()
	fmt.Fprintf(out, "codec %s (short id %08x)\n", hexID(c.Digest()), c.ShortID())
	fmt.Fprintf(out, "width %d, %d components kept, %d bytes per token, gain %v\n", c.Width(), c.Kept(), c.PayloadBytes(), c.Gain())
	fmt.Fprintf(out, "bits per component: %s\n", bitRuns(c.Bits()))
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
