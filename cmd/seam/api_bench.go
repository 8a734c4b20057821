package main

import (
	"fmt"
	"slices"

	"github.com/seamlm/seam/bench"
	"github.com/seamlm/seam/loader"
	"github.com/spf13/cobra"
)

func newBenchAPICmd() *cobra.Command {
	var modelPath, tokPath, prompt string
	var opts bench.APIOptions
	cmd := &cobra.Command{
		Use:   "api --model PATH [--tokens N] [--rounds N]",
		Short: "A/B: single-stream decode tok/s through seam api against seam run",
		Long: `Api measures greedy single-stream decode speed of the whole model two ways,
alternated in one process: seam run's generation loop, and a streamed
/v1/completions request to an API server on loopback, timed by its client
(HTTP, server-sent events and JSON included). Both count decode only. The
first round is a warm-up and is discarded. On a shared machine the numbers
are noisy: compare medians, and rerun.`,
		Example: `  seam synth --shape stories110m --out /tmp/s110 && seam bench api --model /tmp/s110/model.bin --tokenizer /tmp/s110/tokenizer.bin`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Rounds < 2 || opts.Tokens < 2 {
				return fmt.Errorf("--rounds %d --tokens %d: want at least 2 of each (the first round is discarded)", opts.Rounds, opts.Tokens)
			}
			m, err := loader.Open(modelPath, modelOpts(loader.Options{TokenizerPath: tokPath}))
			if err != nil {
				return err
			}
			defer m.Close()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "model: %s\n", m.Weights.Config.String())
			opts.Prompt, opts.Log = prompt, out
			res, err := bench.APIOverhead(cmd.Context(), m, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "seam run: median %.2f tok/s (min %.2f, max %.2f) over %d runs of %d tokens\n",
				res.RunMedian(), slices.Min(res.Run), slices.Max(res.Run), len(res.Run), res.Tokens)
			fmt.Fprintf(out, "seam api: median %.2f tok/s (min %.2f, max %.2f)\n", res.APIMedian(), slices.Min(res.API), slices.Max(res.API))
			fmt.Fprintf(out, "api / run: %.3f (wall-clock tok/s, medians)\n", res.Ratio())
			fmt.Fprintf(out, "run / api CPU time per token: %.3f (medians; less sensitive to other load)\n", res.CPURatio())
			return nil
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "model (required)")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file")
	cmd.Flags().StringVar(&prompt, "prompt", "Once upon a time", "prompt")
	cmd.Flags().IntVar(&opts.Tokens, "tokens", 64, "tokens to generate per run")
	cmd.Flags().IntVar(&opts.Rounds, "rounds", 4, "A/B rounds, the first discarded as warm-up")
	cmd.MarkFlagRequired("model")
	return cmd
}
