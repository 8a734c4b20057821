package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
	"github.com/spf13/cobra"
)

// plainWires are the built-in encodings eval knows by name.
var plainWires = map[string]wire.Encoding{"f32": wire.F32, "f16": wire.F16, "q8": wire.Q8, "q5": wire.Q5, "q4": wire.Q4}

type evalFlags struct {
	modelPath, tokPath, wires, budgets, plot string
	boundary, calibTokens                    int
	calibSeed                                uint64
	truncation, asJSON                       bool
	data                                     dataFlags
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
as rank@B. --plot draws KL against bytes per token: the codec curves across
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
	fl.BoolVar(&f.truncation, "truncation", false, "with --budgets: add the rank-truncation baseline (B components at 8 bits) at each budget")
	fl.StringVar(&f.plot, "plot", "", "write a plot of KL against bytes per token (.png, .svg or .pdf)")
	fl.IntVar(&f.calibTokens, "calib-tokens", defaultCalibTokens, "with --budgets: calibration tokens sampled from the model")
	fl.Uint64Var(&f.calibSeed, "calib-seed", defaultCalibSeed, "with --budgets: seed of the calibration text")
	f.data.register(cmd, defaultEvalTokens, defaultEvalSeed, "evaluation text")
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("boundary")
	return cmd
}

// evalRun is one named encoding to compare.
type evalRun struct {
	name string
	enc  wire.Encoding
}

func runEval(cmd *cobra.Command, f *evalFlags) error {
	lm, m, err := openFull(f.modelPath, f.tokPath)
	if err != nil {
		return err
	}
	defer lm.Close()
	cfg := m.Config()
	if f.boundary < 1 || f.boundary >= cfg.NLayers {
		return fmt.Errorf("--boundary %d: a model of %d layers splits at boundaries 1..%d", f.boundary, cfg.NLayers, cfg.NLayers-1)
	}
	budgets, err := f.budgetList(cfg.Dim)
	if err != nil {
		return err
	}
	if len(budgets) > 0 && f.data.file == "" && f.calibSeed == f.data.seed {
		return fmt.Errorf("--calib-seed %d equals --seed: the codecs would be evaluated on the text they were fitted on", f.calibSeed)
	}
	runs, err := f.plainRuns(lm, cfg)
	if err != nil {
		return err
	}
	seqs, desc, err := f.data.tokens(cmd, lm, m)
	if err != nil {
		return err
	}
	if lr := findRun(runs, "lowrank"); lr != nil {
		warnIfCalibrated(cmd, lr.enc, seqs)
	}
	fitted, err := f.fittedRuns(cmd, lm, m, budgets)
	if err != nil {
		return err
	}
	runs = append(runs, fitted...)
	encs := make([]wire.Encoding, len(runs))
	for i, r := range runs {
		encs[i] = r.enc
	}
	rep, err := eval.Compare(m, seqs, f.boundary, encs, progress(cmd, "evaluating"))
	if err != nil {
		return err
	}
	for i := range rep.Results {
		rep.Results[i].Wire = runs[i].name
	}
	if f.plot != "" {
		if err := plotReport(f.plot, lm.Path, rep); err != nil {
			return err
		}
		infof(cmd, "wrote %s", f.plot)
	}
	if f.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(rep.Results)
	}
	return printReport(cmd, rep, desc)
}

// budgetList parses --budgets, defaulting to eight budgets up to the width
// when only --plot is given.
func (f *evalFlags) budgetList(dim int) ([]int, error) {
	if f.budgets != "" {
		return parseInts("--budgets", f.budgets)
	}
	if f.truncation {
		return nil, errors.New("--truncation needs --budgets")
	}
	if f.plot == "" {
		return nil, nil
	}
	var out []int
	for i := 1; i <= 8; i++ {
		if b := max(1, i*dim/8); !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out, nil
}

// plainRuns resolves --wire: plain encodings by name, and lowrank from the
// container's codec at the boundary.
func (f *evalFlags) plainRuns(lm *loader.Model, cfg *model.Config) ([]evalRun, error) {
	names := []string{"f32", "f16", "q8", "q5", "q4"}
	explicit := f.wires != ""
	if explicit {
		names = strings.Split(f.wires, ",")
	} else if lm.Format == loader.FormatContainer && hasCodec(f.modelPath, f.boundary) {
		names = append(names, "lowrank")
	}
	var runs []evalRun
	for _, name := range names {
		name = strings.TrimSpace(name)
		if findRun(runs, name) != nil {
			return nil, fmt.Errorf("--wire %q lists %s twice", f.wires, name)
		}
		if e, ok := plainWires[name]; ok {
			runs = append(runs, evalRun{name, e})
			continue
		}
		if name != "lowrank" {
			return nil, fmt.Errorf("--wire %q: unknown encoding %q; want f32, f16, q8, q5, q4 or lowrank", f.wires, name)
		}
		e, err := f.lowrank(lm, cfg)
		if err != nil {
			return nil, err
		}
		runs = append(runs, evalRun{name, e})
	}
	return runs, nil
}

func findRun(runs []evalRun, name string) *evalRun {
	for i := range runs {
		if runs[i].name == name {
			return &runs[i]
		}
	}
	return nil
}

// hasCodec reports whether a container has a codec attached at boundary.
func hasCodec(dir string, boundary int) bool {
	ctr, err := container.Open(dir)
	if err != nil {
		return false
	}
	for _, ci := range ctr.Codecs() {
		if ci.Boundary == boundary {
			return true
		}
	}
	return false
}

// lowrank loads and checks the codec attached at the boundary.
func (f *evalFlags) lowrank(lm *loader.Model, cfg *model.Config) (wire.Encoding, error) {
	if lm.Format != loader.FormatContainer {
		return nil, fmt.Errorf("--wire lowrank: %s is a %s file; codecs are attached to containers ('seam import', then 'seam codec add')", f.modelPath, lm.Format)
	}
	c, err := attachedCodec(f.modelPath, f.boundary)
	if err != nil {
		if errors.Is(err, container.ErrNoCodec) {
			return nil, fmt.Errorf("--wire lowrank: %s has no codec at boundary %d; attach one with 'seam codec add --model %s --boundary %d CODEC'", f.modelPath, f.boundary, f.modelPath, f.boundary)
		}
		return nil, err
	}
	id, err := lm.Identity()
	if err != nil {
		return nil, err
	}
	if err := checkCodecFor(c, fmt.Sprintf("the codec at boundary %d of %s", f.boundary, f.modelPath), id, *cfg, f.boundary); err != nil {
		return nil, err
	}
	return codec.NewWire(c), nil
}

// warnIfCalibrated warns when the attached codec was fitted on exactly the
// evaluation tokens: its numbers would not be held out.
func warnIfCalibrated(cmd *cobra.Command, e wire.Encoding, seqs [][]int) {
	w, ok := e.(*codec.Wire)
	if ok && w.Codec().Provenance().CalibData == eval.TokensDigest(seqs) {
		infof(cmd, "warning: the lowrank codec was fitted on these very tokens; its results are not held out")
	}
}

// fittedRuns fits the --budgets codecs (and --truncation baselines) on
// calibration text sampled from the model, captured at the boundary.
func (f *evalFlags) fittedRuns(cmd *cobra.Command, lm *loader.Model, m *model.Model, budgets []int) ([]evalRun, error) {
	if len(budgets) == 0 {
		return nil, nil
	}
	if f.calibTokens < 1 {
		return nil, fmt.Errorf("--calib-tokens %d: want at least 1", f.calibTokens)
	}
	cf, err := f.calibration(cmd, lm, m)
	if err != nil {
		return nil, err
	}
	type namedSpec struct {
		name string
		spec eval.FitSpec
	}
	var runs []evalRun
	for _, b := range budgets {
		specs := []namedSpec{{fmt.Sprintf("lowrank@%d", b), eval.FitSpec{Bytes: b, Holdout: eval.DefaultHoldout}}}
		if f.truncation {
			if b > cf.Width {
				return nil, fmt.Errorf("--truncation: budget %d bytes is more components than the width %d", b, cf.Width)
			}
			specs = append(specs, namedSpec{fmt.Sprintf("rank@%d", b), eval.FitSpec{Rank: b, Holdout: eval.DefaultHoldout}})
		}
		for _, s := range specs {
			c, _, err := eval.FitCapture(cf, s.spec)
			if err != nil {
				return nil, fmt.Errorf("--budgets: %s: %w", s.name, err)
			}
			runs = append(runs, evalRun{s.name, codec.NewWire(c)})
		}
	}
	infof(cmd, "fitted %d codecs on %d calibration hidden states (seed %d)", len(runs), cf.N(), f.calibSeed)
	return runs, nil
}

// calibration samples --calib-tokens tokens with --calib-seed and captures
// them at the boundary, as 'seam capture' does with the same flags.
func (f *evalFlags) calibration(cmd *cobra.Command, lm *loader.Model, m *model.Model) (*eval.CaptureFile, error) {
	if lm.Tokenizer == nil {
		return nil, fmt.Errorf("%s: sampling calibration text needs the vocabulary's BOS and EOS: give --tokenizer", lm.Path)
	}
	seqs, err := eval.SampleTokens(m, lm.Tokenizer.BOS(), lm.Tokenizer.EOS(), f.calibTokens, f.calibSeed, f.data.temperature, progress(cmd, "sampling calibration"))
	if err != nil {
		return nil, err
	}
	rows, n, err := eval.Capture(m, seqs, f.boundary, 0, progress(cmd, "capturing"))
	if err != nil {
		return nil, err
	}
	id, err := lm.Identity()
	if err != nil {
		return nil, err
	}
	return &eval.CaptureFile{Boundary: f.boundary, Width: m.Config().Dim, Model: id, Seqs: eval.Truncate(seqs, n), Rows: rows}, nil
}

func printReport(cmd *cobra.Command, rep *eval.Report, desc string) error {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "boundary %d, %d positions scored (%s); whole-model perplexity %.4f\n", rep.Boundary, rep.Positions, desc, rep.Perplexity)
	fmt.Fprintln(out, "bytes/token is the activation payload per token; each frame adds a 52-byte header.")
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WIRE\tRANK\tBYTES/TOKEN\tPERPLEXITY\tPPL Δ%\tKL (nats)\tTOP-1\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%d\t%g\t%.4f\t%+.3f\t%.3g\t%.4f\t\n", r.Wire, r.Rank, r.BytesPerToken, r.Perplexity, r.PPLDeltaPct, r.KL, r.Top1)
	}
	return tw.Flush()
}

// plotReport draws the fitted codec curves (lowrank@B, rank@B) and every
// other encoding as a labelled point.
func plotReport(path, modelPath string, rep *eval.Report) error {
	curves := []eval.Series{{Label: "water-filled PCA codec (lowrank@B)"}, {Label: "rank-B truncation, 8 bits"}}
	var points []eval.Result
	for _, r := range rep.Results {
		switch {
		case strings.HasPrefix(r.Wire, "lowrank@"):
			curves[0].Results = append(curves[0].Results, r)
		case strings.HasPrefix(r.Wire, "rank@"):
			curves[1].Results = append(curves[1].Results, r)
		default:
			points = append(points, r)
		}
	}
	title := fmt.Sprintf("%s split at layer %d: %d positions, whole-model ppl %.3f", filepath.Base(modelPath), rep.Boundary, rep.Positions, rep.Perplexity)
	return eval.PlotKL(path, title, curves, points)
}
