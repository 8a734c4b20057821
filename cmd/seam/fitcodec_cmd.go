package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/model"
	"github.com/spf13/cobra"
)

func newFitCodecCmd() *cobra.Command {
	var (
		captures, out, modelPath, tokPath string
		bytes, rank                       int
		targetKL, holdout                 float64
		gain, entropyCoded, forOutput     bool
		trellisCoded, tokenClasses        bool
	)
	cmd := &cobra.Command{
		Use:   "fit-codec --captures F (--bytes B | --target-kl X | --rank K) --out CODEC [--model PATH]",
		Short: "Fit a boundary codec to captured hidden states",
		Long: `Fit-codec fits a learned boundary codec (docs/codec.md) to a capture made by
'seam capture': the mean and PCA basis of the hidden states, then bits per
component by reverse water-filling, and a clip per component. The fit is
deterministic: the same capture and flags give a byte-identical file on any
machine.

The budget is one of:
  --bytes B       B bytes per token, bits (0 to 8) given to the components
                  whose variance earns them; components given 0 bits are
                  dropped.
  --target-kl X   the smallest budget whose held-out KL divergence stays
                  below X nats per token, found by bisection (needs --model).
  --rank K        plain truncation, the baseline: the K components of largest
                  variance at 8 bits each (K bytes per token).

By default the file is format version 2 with fixed bits per component.
--entropy entropy-codes the components instead: one quantizer step for every
component, cell indices coded against per-component tables stored in the file;
--bytes is then the mean payload of a one-token frame on the held-out rows (frames
vary in size; a prefill frame's tokens share one stream). It gives the same
quality for fewer bytes (docs/codec-quality.md). --for-output (needs --model)
weighs each component by its measured effect on the model's output (the KL of
the next-token distribution per unit of squared error along it) instead of
fitting for the activations alone; on stories260K it gains little.
--trellis trellis-codes the components (and entropy-codes them, so it implies
--entropy): the same steps, but each token's cells are chosen by a search over
an 8-state machine between two interleaved grids, for about 1.25x less squared
error and KL at the same bytes (docs/codec.md §11.7); encoding costs 2x (width
1024) to 3x (width 64) the compute of --entropy, decoding about the same.
--token-classes (needs --model; implies --trellis) measures how much each
calibration token's error moves the model's output (a noise probe through the
layers after the boundary: about 10 s for stories260K's 4096 probed tokens),
fits a predictor of it from the token's own coefficients, and gives each token
one of 4 step multipliers by it, the class coded with the token: finer steps
where the output is sensitive, coarser where it is not, at the same mean bytes
(docs/codec.md §11.8). On stories260K at 25 bytes it lowers the KL a further
1.16-1.17x.

The last sequences of the capture (--holdout, a fraction of its rows rounded
up to whole sequences) are kept out of the fit. The codec file records the
reconstruction error on them and, with --model, the mean KL divergence they
show when the model is split at the capture's boundary with the codec on the
wire. --model must be the model the capture was made with (its identity is
checked). The file also records the model identity, the boundary and the
digest of the capture's tokens.`,
		Example: `  seam fit-codec --captures b2.capture --bytes 32 --model stories260K.seam --out b2.codec
  seam fit-codec --captures b2.capture --target-kl 0.01 --model stories260K.seam --out b2.codec`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			set := 0
			for _, f := range []string{"bytes", "target-kl", "rank"} {
				if cmd.Flags().Changed(f) {
					set++
				}
			}
			if set != 1 {
				return errors.New("give exactly one of --bytes, --target-kl and --rank")
			}
			if forOutput && modelPath == "" {
				return errors.New("--for-output measures each component's effect on the output with the model: give --model (the model the capture was made with)")
			}
			if tokenClasses {
				if modelPath == "" {
					return errors.New("--token-classes measures each calibration token's effect on the output with the model: give --model (the model the capture was made with)")
				}
				trellisCoded = true // classes are a feature of the trellis-coded scheme
			}
			if trellisCoded {
				entropyCoded = true // a trellis' cells are entropy-coded
			}
			if (entropyCoded || forOutput) && (gain || rank > 0) {
				return errors.New("--entropy, --trellis, --token-classes and --for-output allocate a budget (--bytes or --target-kl); they do not combine with --gain or --rank")
			}
			if cmd.Flags().Changed("target-kl") && modelPath == "" {
				return errors.New("--target-kl measures KL divergence with the model: give --model (the model the capture was made with)")
			}
			start := time.Now()
			cf, err := eval.ReadCaptureFile(captures)
			if err != nil {
				return err
			}
			var m *model.Model
			if modelPath != "" {
				lm, mm, err := openFull(modelPath, tokPath)
				if err != nil {
					return err
				}
				defer lm.Close()
				id, err := lm.Identity()
				if err != nil {
					return err
				}
				if id != cf.Model {
					return fmt.Errorf("%s was captured from model %s, but %s is model %s", captures, hexID(cf.Model), modelPath, hexID(id))
				}
				m = mm
			}
			spec := eval.FitSpec{Bytes: bytes, Rank: rank, Holdout: holdout, Gain: gain, Entropy: entropyCoded, Trellis: trellisCoded}
			if forOutput {
				spec.Output = m
			}
			if tokenClasses {
				spec.TokenClasses, spec.Progress = m, progress(cmd, "measuring token sensitivity")
			}
			var c *codec.Codec
			if cmd.Flags().Changed("target-kl") {
				c, err = searchKL(cmd, m, cf, targetKL, spec)
			} else {
				c, err = eval.FitMeasured(m, cf, spec)
			}
			if err != nil {
				return err
			}
			if err := c.WriteFile(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "fitted %s in %v on %d of the %d hidden states of %s\n",
				out, time.Since(start).Round(time.Millisecond), c.Stats().FitSamples, cf.N(), captures)
			printCodec(cmd, c)
			return nil
		},
	}
	cmd.Flags().StringVar(&captures, "captures", "", "capture file made by 'seam capture' (required)")
	cmd.Flags().StringVar(&out, "out", "", "codec file to write (required)")
	cmd.Flags().IntVar(&bytes, "bytes", 0, "payload budget in bytes per token")
	cmd.Flags().Float64Var(&targetKL, "target-kl", 0, "find the smallest budget whose held-out KL (nats per token) is below this")
	cmd.Flags().IntVar(&rank, "rank", 0, "plain truncation baseline: keep this many components at 8 bits")
	cmd.Flags().StringVar(&modelPath, "model", "", "the model the capture was made with: measures and records the held-out KL")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (for llama2.c checkpoints)")
	cmd.Flags().Float64Var(&holdout, "holdout", eval.DefaultHoldout, "fraction of the capture's rows held out (whole sequences from the end)")
	cmd.Flags().BoolVar(&entropyCoded, "entropy", false, "entropy-code the components: --bytes is then the mean payload of a one-token frame")
	cmd.Flags().BoolVar(&trellisCoded, "trellis", false, "trellis-code the components (implies --entropy): a search over two interleaved grids per token, less error at the same bytes")
	cmd.Flags().BoolVar(&tokenClasses, "token-classes", false, "give each token one of 4 step multipliers by its predicted effect on the output (needs --model, implies --trellis)")
	cmd.Flags().BoolVar(&forOutput, "for-output", false, "weigh components by their measured effect on the model's output (needs --model)")
	cmd.Flags().BoolVar(&gain, "gain", false, "send a per-token gain (2 bytes of the budget; see docs/codec.md §4.3)")
	cmd.MarkFlagRequired("captures")
	cmd.MarkFlagRequired("out")
	return cmd
}

// searchKL runs the --target-kl search, reporting each budget tried.
func searchKL(cmd *cobra.Command, m *model.Model, cf *eval.CaptureFile, target float64, spec eval.FitSpec) (*codec.Codec, error) {
	c, trials, err := eval.SearchKL(m, cf, target, spec, func(t eval.Trial) {
		verdict := "above"
		if t.KL < target {
			verdict = "below"
		}
		infof(cmd, "budget %d bytes (payload %d): held-out KL %.5g, %s the target %g", t.Bytes, t.PayloadBytes, t.KL, verdict, target)
	})
	if err != nil {
		return nil, err
	}
	infof(cmd, "smallest budget under KL %g: %d bytes per token (%d budgets tried)", target, c.PayloadBytes(), len(trials))
	return c, nil
}
