package eval

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/container"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
)

// Defaults shared by capture and eval, so that 'seam eval --budgets' fits
// the same codecs as 'seam capture' followed by 'seam fit-codec' with their
// defaults.
const (
	DefaultCalibTokens = 16384
	DefaultCalibSeed   = 1
	DefaultEvalTokens  = 2048
	DefaultEvalSeed    = 2
)

// PlainWires are the built-in encodings by name, in the order eval lists them.
var PlainWires = []struct {
	Name string
	Enc  wire.Encoding
}{{"f32", wire.F32}, {"f16", wire.F16}, {"q8", wire.Q8}, {"q5", wire.Q5}, {"q4", wire.Q4}}

// Data chooses a token stream: a text file cut into context-sized
// sequences, or text the model samples itself.
type Data struct {
	File         string  // a text file; empty to sample
	SampleTokens int     // tokens to sample, BOS not counted
	Seed         uint64  // seed of the sampled text
	Temperature  float64 // temperature of the sampled text
	Context      int     // tokens per sequence cut from File, BOS included (0: the model's context)
}

// Tokens returns the sequences d asks for and a one-line description.
func (d Data) Tokens(lm *loader.Model, m *model.Model, progress Progress, logf func(string, ...any)) ([][]int, string, error) {
	if d.File != "" {
		return d.textTokens(lm)
	}
	if d.SampleTokens < 1 {
		return nil, "", fmt.Errorf("--sample-tokens %d: want at least 1", d.SampleTokens)
	}
	if lm.Tokenizer == nil {
		return nil, "", fmt.Errorf("%s: sampling needs the vocabulary's BOS and EOS: give --tokenizer", lm.Path)
	}
	start := time.Now()
	seqs, err := SampleTokens(m, lm.Tokenizer.BOS(), lm.Tokenizer.EOS(), d.SampleTokens, d.Seed, d.Temperature, progress)
	if err != nil {
		return nil, "", err
	}
	logf("sampled %d tokens in %d sequences (seed %d, temperature %g) in %v", d.SampleTokens, len(seqs), d.Seed, d.Temperature, time.Since(start).Round(time.Millisecond))
	return seqs, fmt.Sprintf("%d tokens sampled from the model (seed %d, temperature %g)", d.SampleTokens, d.Seed, d.Temperature), nil
}

// textTokens cuts a text file into sequences of at most Context tokens.
func (d Data) textTokens(lm *loader.Model) ([][]int, string, error) {
	if lm.Tokenizer == nil {
		return nil, "", fmt.Errorf("%s: encoding --file needs a vocabulary: give --tokenizer", lm.Path)
	}
	b, err := os.ReadFile(d.File)
	if err != nil {
		return nil, "", err
	}
	seqLen := lm.Weights.Config.SeqLen
	if d.Context != 0 {
		if d.Context < 2 || d.Context > seqLen {
			return nil, "", fmt.Errorf("--context %d: want 2..%d (the model's context length)", d.Context, seqLen)
		}
		seqLen = d.Context
	}
	seqs := TokensFromText(lm.Tokenizer, string(b), seqLen)
	if len(seqs) == 0 {
		return nil, "", fmt.Errorf("%s: no text to use", d.File)
	}
	return seqs, fmt.Sprintf("%d tokens of %s", CountTokens(seqs)-len(seqs), d.File), nil
}

// CheckBoundary refuses a boundary a model of n layers cannot split at.
func CheckBoundary(boundary, n int) error {
	if boundary < 1 || boundary >= n {
		return fmt.Errorf("--boundary %d: a model of %d layers splits at boundaries 1..%d", boundary, n, n-1)
	}
	return nil
}

// CaptureAt records the hidden states entering layer boundary over seqs, at
// most maxMB MiB of them, as a capture file of the model lm.
func CaptureAt(lm *loader.Model, m *model.Model, seqs [][]int, boundary, maxMB int, progress Progress) (*CaptureFile, error) {
	if maxMB < 1 {
		return nil, fmt.Errorf("--max-mb %d: want at least 1", maxMB)
	}
	cfg := m.Config()
	if err := CheckBoundary(boundary, cfg.NLayers); err != nil {
		return nil, err
	}
	id, err := lm.Identity()
	if err != nil {
		return nil, err
	}
	maxRows := max(1, maxMB<<20/(4*cfg.Dim))
	rows, n, err := Capture(m, seqs, boundary, maxRows, progress)
	if err != nil {
		return nil, err
	}
	return &CaptureFile{Boundary: boundary, Width: cfg.Dim, Model: id, Seqs: Truncate(seqs, n), Rows: rows}, nil
}

// Evaluation is what 'seam eval' measures: the wire encodings at one
// boundary of one model, on one token stream.
type Evaluation struct {
	Model    *loader.Model // must hold every layer
	Forward  *model.Model  // the forward pass over Model.Weights
	Boundary int
	// Wires names the encodings: f32, f16, q8, q5, q4, lowrank. Empty means
	// every plain one, and lowrank when the container has a codec attached
	// at Boundary.
	Wires []string
	// Budgets adds codecs fitted at each budget (bytes per token) on text
	// sampled with CalibSeed, as lowrank@B; Truncation adds the rank-B
	// baseline as rank@B.
	Budgets    []int
	Truncation bool
	// Fits lists the fits made at each budget (FitKinds; empty: "mse"):
	// "mse" is lowrank@B, fitted for the activations; "output" is out@B,
	// fitted for the model's output (FitSpec.Output); "entropy" (ec@B) and
	// "output+entropy" (out+ec@B) entropy-code them (FitSpec.Entropy);
	// "trellis" (tcq@B) and "output+trellis" (out+tcq@B) trellis-code them
	// (FitSpec.Trellis); "trellis+tokens" (tcq+tok@B) and
	// "output+trellis+tokens" (out+tcq+tok@B) add token classes
	// (FitSpec.TokenClasses).
	Fits        []string
	CalibTokens int
	CalibSeed   uint64
	Data        Data
	// Progress returns a progress callback for a named phase (nil: none).
	Progress func(what string) Progress
	// Logf reports what was done (nil: nothing).
	Logf func(format string, args ...any)
}

// DefaultBudgets are eight budgets from width/8 to width bytes per token.
func DefaultBudgets(width int) []int {
	var out []int
	for i := 1; i <= 8; i++ {
		if b := max(1, i*width/8); !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

type run struct {
	name string
	enc  wire.Encoding
}

// Run measures every encoding and returns the report (Results named as the
// encodings were) and a description of the token stream.
func (e *Evaluation) Run() (*Report, string, error) {
	if e.Logf == nil {
		e.Logf = func(string, ...any) {}
	}
	if e.Progress == nil {
		e.Progress = func(string) Progress { return nil }
	}
	cfg := e.Forward.Config()
	if err := CheckBoundary(e.Boundary, cfg.NLayers); err != nil {
		return nil, "", err
	}
	if len(e.Budgets) > 0 && e.Data.File == "" && e.CalibSeed == e.Data.Seed {
		return nil, "", fmt.Errorf("--calib-seed %d equals --seed: the codecs would be evaluated on the text they were fitted on", e.CalibSeed)
	}
	if e.Truncation && len(e.Budgets) == 0 {
		return nil, "", errors.New("--truncation needs --budgets")
	}
	runs, err := e.plainRuns(cfg)
	if err != nil {
		return nil, "", err
	}
	seqs, desc, err := e.Data.Tokens(e.Model, e.Forward, e.Progress("sampling tokens"), e.Logf)
	if err != nil {
		return nil, "", err
	}
	for _, r := range runs {
		if w, ok := r.enc.(interface{ Codec() *codec.Codec }); ok && w.Codec().Provenance().CalibData == TokensDigest(seqs) {
			e.Logf("warning: the lowrank codec was fitted on these very tokens; its results are not held out")
		}
	}
	fitted, err := e.fittedRuns()
	if err != nil {
		return nil, "", err
	}
	runs = append(runs, fitted...)
	encs := make([]wire.Encoding, len(runs))
	for i, r := range runs {
		encs[i] = r.enc
	}
	rep, err := Compare(e.Forward, seqs, e.Boundary, encs, e.Progress("evaluating"))
	if err != nil {
		return nil, "", err
	}
	if err := MeasureCost(e.Forward, seqs, e.Boundary, encs, rep); err != nil {
		return nil, "", fmt.Errorf("timing the encodings: %w", err)
	}
	for i := range rep.Results {
		rep.Results[i].Wire = runs[i].name
	}
	return rep, desc, nil
}

// plainRuns resolves Wires: plain encodings by name, and lowrank from the
// container's codec at the boundary.
func (e *Evaluation) plainRuns(cfg *model.Config) ([]run, error) {
	names := e.Wires
	if len(names) == 0 {
		for _, p := range PlainWires {
			names = append(names, p.Name)
		}
		if e.Model.Format == loader.FormatContainer && hasCodec(e.Model.Path, e.Boundary) {
			names = append(names, "lowrank")
		}
	}
	var runs []run
	for _, name := range names {
		name = strings.TrimSpace(name)
		if slices.ContainsFunc(runs, func(r run) bool { return r.name == name }) {
			return nil, fmt.Errorf("--wire %q lists %s twice", strings.Join(e.Wires, ","), name)
		}
		i := slices.IndexFunc(PlainWires, func(p struct {
			Name string
			Enc  wire.Encoding
		}) bool {
			return p.Name == name
		})
		if i >= 0 {
			runs = append(runs, run{name, PlainWires[i].Enc})
			continue
		}
		if name != "lowrank" {
			return nil, fmt.Errorf("--wire %q: unknown encoding %q; want f32, f16, q8, q5, q4 or lowrank", strings.Join(e.Wires, ","), name)
		}
		enc, err := e.lowrank(cfg)
		if err != nil {
			return nil, err
		}
		runs = append(runs, run{name, enc})
	}
	return runs, nil
}

// hasCodec reports whether a container has a codec attached at boundary.
func hasCodec(dir string, boundary int) bool {
	ctr, err := container.Open(dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ctr.Codecs(), func(ci container.CodecInfo) bool { return ci.Boundary == boundary })
}

// lowrank loads and checks the codec attached at the boundary.
func (e *Evaluation) lowrank(cfg *model.Config) (wire.Encoding, error) {
	path := e.Model.Path
	if e.Model.Format != loader.FormatContainer {
		return nil, fmt.Errorf("--wire lowrank: %s is a %s file; codecs are attached to containers ('seam import', then 'seam codec add')", path, e.Model.Format)
	}
	c, err := AttachedCodec(path, e.Boundary)
	if err != nil {
		if errors.Is(err, container.ErrNoCodec) {
			return nil, fmt.Errorf("--wire lowrank: %s has no codec at boundary %d; attach one with 'seam codec add --model %s --boundary %d CODEC'", path, e.Boundary, path, e.Boundary)
		}
		return nil, err
	}
	id, err := e.Model.Identity()
	if err != nil {
		return nil, err
	}
	if err := CheckCodec(c, fmt.Sprintf("the codec at boundary %d of %s", e.Boundary, path), id, *cfg, e.Boundary); err != nil {
		return nil, err
	}
	return codec.NewWire(c), nil
}

// FitKinds are the fits Evaluation.Fits may name.
var FitKinds = []string{"mse", "output", "entropy", "output+entropy", "trellis", "output+trellis", "trellis+tokens", "output+trellis+tokens"}

// fittedRuns fits the Budgets codecs (and Truncation baselines) on
// calibration text sampled from the model, captured at the boundary.
func (e *Evaluation) fittedRuns() ([]run, error) {
	if len(e.Budgets) == 0 {
		return nil, nil
	}
	if e.CalibTokens < 1 {
		return nil, fmt.Errorf("--calib-tokens %d: want at least 1", e.CalibTokens)
	}
	cf, err := e.calibration()
	if err != nil {
		return nil, err
	}
	fits := e.Fits
	if len(fits) == 0 {
		fits = []string{"mse"}
	}
	for _, f := range fits {
		if !slices.Contains(FitKinds, f) {
			return nil, fmt.Errorf("--fit %q: unknown fit %q; want one of %s", strings.Join(e.Fits, ","), f, strings.Join(FitKinds, ", "))
		}
	}
	// Every output fit of this capture has the same basis: measure its
	// sensitivity once.
	sp, err := SplitHoldout(cf.Seqs, DefaultHoldout)
	if err != nil {
		return nil, err
	}
	probeSeqs := Truncate(cf.Seqs[:len(cf.Seqs)-len(sp.Held)], DefaultOutputTokens)
	weights := MemoSensitivity(func(b codec.Basis) ([]float64, error) {
		return Sensitivity(e.Forward, probeSeqs, e.Boundary, b, e.Progress("measuring sensitivity"))
	})
	// Token classes: the fit sequences' token sensitivity, measured once.
	var tokenSens []float64
	if slices.ContainsFunc(fits, func(f string) bool { return strings.HasSuffix(f, "+tokens") }) {
		if tokenSens, err = FitTokenSens(e.Forward, cf, sp, TokenSensOptions{}, e.Progress("measuring token sensitivity")); err != nil {
			return nil, err
		}
	}
	var runs []run
	for _, b := range e.Budgets {
		var specs []struct {
			name string
			spec FitSpec
		}
		for _, f := range fits {
			spec := FitSpec{Bytes: b, Holdout: DefaultHoldout}
			prefix := "lowrank"
			switch f {
			case "output":
				spec.Output, spec.Weights, prefix = e.Forward, weights, "out"
			case "entropy":
				spec.Entropy, prefix = true, "ec"
			case "output+entropy":
				spec.Output, spec.Weights, spec.Entropy, prefix = e.Forward, weights, true, "out+ec"
			case "trellis":
				spec.Entropy, spec.Trellis, prefix = true, true, "tcq"
			case "output+trellis":
				spec.Output, spec.Weights, spec.Entropy, spec.Trellis, prefix = e.Forward, weights, true, true, "out+tcq"
			case "trellis+tokens":
				spec.Entropy, spec.Trellis, prefix = true, true, "tcq+tok"
				spec.TokenClasses, spec.TokenSens = e.Forward, tokenSens
			case "output+trellis+tokens":
				spec.Output, spec.Weights, spec.Entropy, spec.Trellis, prefix = e.Forward, weights, true, true, "out+tcq+tok"
				spec.TokenClasses, spec.TokenSens = e.Forward, tokenSens
			}
			name := fmt.Sprintf("%s@%d", prefix, b)
			specs = append(specs, struct {
				name string
				spec FitSpec
			}{name, spec})
		}
		if e.Truncation {
			if b > cf.Width {
				return nil, fmt.Errorf("--truncation: budget %d bytes is more components than the width %d", b, cf.Width)
			}
			specs = append(specs, struct {
				name string
				spec FitSpec
			}{fmt.Sprintf("rank@%d", b), FitSpec{Rank: b, Holdout: DefaultHoldout}})
		}
		for _, s := range specs {
			c, _, err := FitCapture(cf, s.spec)
			if err != nil {
				return nil, fmt.Errorf("--budgets: %s: %w", s.name, err)
			}
			runs = append(runs, run{s.name, codec.NewWire(c)})
		}
	}
	e.Logf("fitted %d codecs on %d calibration hidden states (seed %d)", len(runs), cf.N(), e.CalibSeed)
	return runs, nil
}

// calibration samples CalibTokens tokens with CalibSeed and captures them at
// the boundary, as 'seam capture' does with the same flags.
func (e *Evaluation) calibration() (*CaptureFile, error) {
	lm := e.Model
	if lm.Tokenizer == nil {
		return nil, fmt.Errorf("%s: sampling calibration text needs the vocabulary's BOS and EOS: give --tokenizer", lm.Path)
	}
	seqs, err := SampleTokens(e.Forward, lm.Tokenizer.BOS(), lm.Tokenizer.EOS(), e.CalibTokens, e.CalibSeed, e.Data.Temperature, e.Progress("sampling calibration"))
	if err != nil {
		return nil, err
	}
	rows, n, err := Capture(e.Forward, seqs, e.Boundary, 0, e.Progress("capturing"))
	if err != nil {
		return nil, err
	}
	id, err := lm.Identity()
	if err != nil {
		return nil, err
	}
	return &CaptureFile{Boundary: e.Boundary, Width: e.Forward.Config().Dim, Model: id, Seqs: Truncate(seqs, n), Rows: rows}, nil
}

// WriteTable prints the report as the table 'seam eval' shows.
func (r *Report) WriteTable(w io.Writer, desc string) error {
	fmt.Fprintf(w, "boundary %d, %d positions scored (%s); whole-model perplexity %.4f\n", r.Boundary, r.Positions, desc, r.Perplexity)
	fmt.Fprintln(w, "bytes/token is the activation payload per token; each frame adds a 52-byte header. An entropy-coded")
	fmt.Fprintln(w, "codec's is the mean of one-token frames (decode steps), with a whole sequence per frame (prefill) in brackets.")
	fmt.Fprintf(w, "enc/dec is the encoding's compute per token, one token per frame, against %.1f µs for a decode step of\n", r.UpperUS)
	fmt.Fprintf(w, "layers [0, %d) and %.1f µs for the layers after the boundary and the head.\n", r.Boundary, r.LowerUS)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WIRE\tRANK\tBYTES/TOKEN\tPERPLEXITY\tPPL Δ%\tKL (nats)\tTOP-1\tENC µs\tDEC µs\t")
	for _, x := range r.Results {
		bytes := fmt.Sprintf("%.4g", x.BytesPerToken)
		if x.PrefillBytesPerToken > 0 {
			bytes += fmt.Sprintf(" (%.4g)", x.PrefillBytesPerToken)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.4f\t%+.3f\t%.3g\t%.4f\t%.2f\t%.2f\t\n", x.Wire, x.Rank, bytes, x.Perplexity, x.PPLDeltaPct, x.KL, x.Top1, x.EncodeUS, x.DecodeUS)
	}
	return tw.Flush()
}

// Plot draws the fitted codec curves (lowrank@B, rank@B) and every other
// encoding as a labelled point.
func (r *Report) Plot(path, modelPath string) error {
	kinds := []struct{ prefix, label string }{
		{"lowrank@", "water-filled PCA codec (lowrank@B)"},
		{"rank@", "rank-B truncation, 8 bits"},
		{"ec@", "entropy-coded PCA codec (ec@B)"},
		{"out@", "fitted for the output (out@B)"},
		{"out+ec@", "entropy-coded, fitted for the output (out+ec@B)"},
		{"tcq@", "trellis-coded PCA codec (tcq@B)"},
		{"out+tcq@", "trellis-coded, fitted for the output (out+tcq@B)"},
		{"tcq+tok@", "trellis-coded with token classes (tcq+tok@B)"},
		{"out+tcq+tok@", "trellis-coded with token classes, for the output (out+tcq+tok@B)"},
	}
	var curves []Series
	var points []Result
	byPrefix := map[string]int{}
	for _, x := range r.Results {
		matched := false
		for _, k := range kinds {
			if strings.HasPrefix(x.Wire, k.prefix) {
				i, ok := byPrefix[k.prefix]
				if !ok {
					i = len(curves)
					byPrefix[k.prefix] = i
					curves = append(curves, Series{Label: k.label})
				}
				curves[i].Results = append(curves[i].Results, x)
				matched = true
				break
			}
		}
		if !matched {
			points = append(points, x)
		}
	}
	title := fmt.Sprintf("%s split at layer %d: %d positions, whole-model ppl %.3f", filepath.Base(modelPath), r.Boundary, r.Positions, r.Perplexity)
	return PlotKL(path, title, curves, points)
}

// CheckCodec checks a codec against the model and boundary it is meant
// for: width, and the provenance it records (when it records one). what
// names the codec in messages.
func CheckCodec(c *codec.Codec, what string, identity [32]byte, cfg model.Config, boundary int) error {
	if c.Width() != cfg.Dim {
		return fmt.Errorf("%s has width %d, the model's hidden width is %d", what, c.Width(), cfg.Dim)
	}
	p := c.Provenance()
	if p.Model != ([32]byte{}) && p.Model != identity {
		return fmt.Errorf("%s was fitted for model %x, this model is %x", what, p.Model, identity)
	}
	if p.Boundary != 0 && int(p.Boundary) != boundary {
		return fmt.Errorf("%s was fitted at boundary %d, not %d", what, p.Boundary, boundary)
	}
	return nil
}

// AttachedCodec reads the codec attached to a container at boundary.
func AttachedCodec(dir string, boundary int) (*codec.Codec, error) {
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
