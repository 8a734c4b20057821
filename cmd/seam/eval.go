package main

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/seamlm/seam/eval"
	"github.com/spf13/cobra"
)

type evalFlags struct {
	modelPath, tokPath, wires, budgets, plot, fits string
	boundary, calibTokens                          int
	calibSeed                                      uint64
	truncation, asJSON                             bool
	data                                           dataFlags
}

func newEvalCmd() *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval --model PATH --boundary L [--file TEXT | --sample-tokens N --seed S] [--wire f32,f16,q8,q5,q4,lowrank] [--json] [--budgets B1,B2,... [--plot out.png]]",
		Short: "Measure what each wire encoding costs at a split boundary",
		Long: `Eval splits the model at boundary L and measures, teacher-forced, what each
activation encoding does to the next-token distributions, against the whole
model on the same tokens:

  bytes_per_token  the activation payload per token on the wire (the 52-byte
                   frame header, one per frame, is not counted)
  perplexity       of the split model, and ppl_delta_pct, its change in % from
                   the whole model's
  kl               mean KL(whole || split) per position, in nats
  top1             fraction of positions whose most likely next token agrees

Every position's hidden state is encoded to bytes and decoded back exactly as
the stages would, then layers [L, n) and the head run on the result. f32 is
exact: KL 0, delta 0.

--wire lists the encodings: f32, f16, q8, q5, q4 (plain per-token encodings)
and lowrank (the codec attached to the container at boundary L; 'seam codec
add'). The default is every plain one, plus lowrank when a codec is attached.

--budgets fits water-filled codecs at each budget (bytes per token) on
calibration text sampled with --calib-seed (which must differ from --seed)
and adds them as lowrank@B; --truncation adds the rank-B truncation baseline
as rank@B. --fit chooses the fits made at each budget: mse (lowrank@B, fitted
for the activations, fixed bits), output (out@B, bits weighted by each
component's measured effect on the model's output), entropy (ec@B,
entropy-coded), output+entropy (out+ec@B), trellis (tcq@B, trellis-coded:
the cells chosen by a search over a state machine, then entropy-coded),
output+trellis (out+tcq@B), trellis+tokens (tcq+tok@B: trellis-coded with
token classes, each token's steps scaled by its predicted effect on the
output, measured once per run on the calibration text) and
output+trellis+tokens (out+tcq+tok@B). An entropy- or trellis-coded codec's frames
vary in size: its bytes_per_token is the mean of one-token frames (decode
steps), and prefill_bytes_per_token that of one frame per sequence.

Each result also gives the encoding's compute per token (encode_us,
decode_us: one token per frame; prefill_encode_us, prefill_decode_us: one
frame per sequence, the fastest of three timed rounds), beside upper_us and
lower_us, a decode step of the layers before and after the boundary: whether
a codec pays off on a link is its bytes saved against that compute.

--plot draws KL against bytes per token: the codec curves across
--budgets (default: eight budgets from width/8 to width bytes), the plain
encodings as points.

The evaluation text is a text file (--file), or by default text the model
samples itself (--sample-tokens, --seed). Use at least 2000 tokens:
perplexity is noisy on a few hundred, so prefer KL for fine comparisons.`,
		Example: `  seam eval --model stories260K.seam --boundary 2 --sample-tokens 4096 --seed 2
  seam eval --model stories260K.seam --boundary 2 --wire f16,q8,lowrank --json
  seam eval --model stories260K.seam --boundary 2 --budgets 16,24,32,40,48 --truncation --plot b2.png`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runEval(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.modelPath, "model", "", "model: container directory (needed for lowrank), GGUF file or llama2.c checkpoint (required)")
	fl.StringVar(&f.tokPath, "tokenizer", "", "llama2.c tokenizer file (required for llama2.c checkpoints)")
	fl.IntVar(&f.boundary, "boundary", 0, "split boundary L: the hidden states entering layer L cross the wire (required)")
	fl.StringVar(&f.wires, "wire", "", "comma-separated encodings: f32,f16,q8,q5,q4,lowrank (default: all plain ones, and lowrank if attached)")
	fl.BoolVar(&f.asJSON, "json", false, "print a JSON array of results")
	fl.StringVar(&f.budgets, "budgets", "", "also fit codecs at these budgets (bytes per token) on sampled calibration text, e.g. 16,24,32,40,48")
	fl.StringVar(&f.fits, "fit", "mse", "with --budgets: the fits to compare at each budget: mse (lowrank@B, for the activations), output (out@B, for the model's output), entropy (ec@B, mse entropy-coded), output+entropy (out+ec@B), trellis (tcq@B, trellis-coded), output+trellis (out+tcq@B), trellis+tokens (tcq+tok@B, with token classes), output+trellis+tokens (out+tcq+tok@B)")
	fl.BoolVar(&f.truncation, "truncation", false, "with --budgets: add the rank-truncation baseline (B components at 8 bits) at each budget")
	fl.StringVar(&f.plot, "plot", "", "write a plot of KL against bytes per token (.png, .svg or .pdf)")
	fl.IntVar(&f.calibTokens, "calib-tokens", eval.DefaultCalibTokens, "with --budgets: calibration tokens sampled from the model")
	fl.Uint64Var(&f.calibSeed, "calib-seed", eval.DefaultCalibSeed, "with --budgets: seed of the calibration text")
	f.data.register(cmd, eval.DefaultEvalTokens, eval.DefaultEvalSeed, "evaluation text")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("boundary")
	return cmd
}

func runEval(cmd *cobra.Command, f *evalFlags) error {
	data, err := f.data.get(cmd)
	if err != nil {
		return err
	}
	var budgets []int
	if f.budgets != "" {
		if budgets, err = parseInts("--budgets", f.budgets); err != nil {
			return err
		}
	} else if f.truncation {
		return errors.New("--truncation needs --budgets")
	}
	lm, m, err := openFull(f.modelPath, f.tokPath)
	if err != nil {
		return err
	}
	defer lm.Close()
	if budgets == nil && f.plot != "" {
		budgets = eval.DefaultBudgets(m.Config().Dim)
	}
	e := &eval.Evaluation{Model: lm, Forward: m, Boundary: f.boundary, Budgets: budgets, Truncation: f.truncation,
		CalibTokens: f.calibTokens, CalibSeed: f.calibSeed, Data: data,
		Progress: func(what string) eval.Progress { return progress(cmd, what) }, Logf: logf(cmd)}
	if f.fits != "" {
		e.Fits = strings.Split(f.fits, ",")
	}
	if f.wires != "" {
		e.Wires = strings.Split(f.wires, ",")
	}
	rep, desc, err := e.Run()
	if err != nil {
		return err
	}
	if f.plot != "" {
		if err := rep.Plot(f.plot, lm.Path); err != nil {
			return err
		}
		infof(cmd, "wrote %s", f.plot)
	}
	if f.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(rep.Results)
	}
	return rep.WriteTable(cmd.OutOrStdout(), desc)
}
