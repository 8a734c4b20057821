package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/spf13/cobra"
)

// dataFlags choose a token stream (eval.Data): a text file cut into
// context-sized sequences, or text the model samples itself.
type dataFlags struct{ d eval.Data }

func (f *dataFlags) register(cmd *cobra.Command, defTokens int, defSeed uint64, what string) {
	fl := cmd.Flags()
	fl.StringVar(&f.d.File, "file", "", what+" from a text file: BOS, then the text's tokens, cut into context-sized sequences")
	fl.IntVar(&f.d.SampleTokens, "sample-tokens", defTokens, what+" sampled from the model itself: this many tokens in all, BOS not counted (used unless --file)")
	fl.Uint64Var(&f.d.Seed, "seed", defSeed, "seed of the sampled text; calibration and evaluation must use different seeds")
	fl.Float64Var(&f.d.Temperature, "temperature", 1, "sampling temperature of the sampled text")
	fl.IntVar(&f.d.Context, "context", 0, "tokens per sequence cut from --file, BOS included (default: the model's context length)")
}

// get returns the token source, refusing flags that contradict each other.
func (f *dataFlags) get(cmd *cobra.Command) (eval.Data, error) {
	fl := cmd.Flags()
	if f.d.File != "" && fl.Changed("sample-tokens") {
		return f.d, errors.New("give --file or --sample-tokens, not both")
	}
	if f.d.File != "" && fl.Changed("seed") {
		return f.d, errors.New("--seed picks sampled text; with --file the text is the file's")
	}
	if f.d.File == "" && fl.Changed("context") {
		return f.d, errors.New("--context applies to --file: sampled sequences run until the model ends them or the context fills")
	}
	return f.d, nil
}

// openFull opens a model holding every layer and prepares its forward pass.
func openFull(path, tokPath string) (*loader.Model, *model.Model, error) {
	lm, err := loader.Open(path, modelOpts(loader.Options{TokenizerPath: tokPath}))
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

// progress returns a progress bar on stderr when it is a terminal;
// otherwise it prints a plain line each time another tenth is done, so a
// piped run is not silent.
func progress(cmd *cobra.Command, what string) eval.Progress {
	f, ok := stderrTerminal(cmd)
	if !ok {
		next := 1
		return func(done, total int) {
			if total > 0 && done*10 >= next*total {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d of %d (%d%%)\n", what, done, total, done*100/total)
				next = done*10/total + 1
			}
		}
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

func logf(cmd *cobra.Command) func(string, ...any) {
	return func(format string, args ...any) { infof(cmd, format, args...) }
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

// parseFloats parses a comma-separated list of numbers (checked by the
// caller).
func parseFloats(flag, s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil {
			return nil, fmt.Errorf("%s %q: want comma-separated numbers such as 33,64", flag, s)
		}
		out = append(out, v)
	}
	return out, nil
}
