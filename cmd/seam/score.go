package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/seamlm/seam/generate"
	"github.com/spf13/cobra"
)

func newScoreCmd() *cobra.Command {
	var modelPath, tokPath, text, file string
	var threads int
	var asJSON, perToken bool
	cmd := &cobra.Command{
		Use:   "score --model PATH (--text TEXT | --file F) [--json [--per-token]]",
		Short: "Teacher-forced scoring: mean negative log-likelihood and perplexity",
		Long: `Score feeds the encoded text (after BOS when the vocabulary adds one)
through the model and reports how well each next token was predicted: the
token count (BOS included), the number of predicted positions, the mean
negative log-likelihood in nats per predicted token, and the perplexity (exp
of the mean).

With --json --per-token the object also has "per_token": one entry per
position, {"id", "argmax", "logprob"}: the token at that position, the most
likely next token after it, and the log-probability (nats) of the actual
next token (null at the last position). Compare it position by position with
another engine (llama.cpp, transformers) to check that a GGUF runs the same.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := applyThreads(threads); err != nil {
				return err
			}
			if (text == "") == (file == "") {
				return fmt.Errorf("give exactly one of --text or --file")
			}
			if perToken && !asJSON {
				return fmt.Errorf("--per-token needs --json")
			}
			if file != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				text = string(b)
			}
			m, sess, err := localSession(modelPath, tokPath)
			if err != nil {
				return err
			}
			defer m.Close()
			sc, err := generate.ScoreTextWith(context.Background(), sess, m.Tokenizer, m.Weights.Config.SeqLen, text,
				generate.ScoreOptions{PerToken: perToken})
			if err != nil {
				return err
			}
			return printScore(cmd, sc, asJSON)
		},
	}
	cmd.Flags().StringVar(&modelPath, "model", "", "model: GGUF file, llama2.c checkpoint or container directory (required)")
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "llama2.c tokenizer file (required for llama2.c checkpoints)")
	cmd.Flags().StringVar(&text, "text", "", "text to score")
	cmd.Flags().StringVar(&file, "file", "", "file whose contents to score")
	addThreadsFlag(cmd.Flags(), &threads)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().BoolVar(&perToken, "per-token", false, `with --json: add "per_token", the id, argmax and next-token log-probability of every position`)
	cmd.MarkFlagRequired("model")
	return cmd
}

func printScore(cmd *cobra.Command, sc generate.Score, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(sc)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "tokens: %d\npredicted: %d\nmean_nll: %.6f nats/token\nperplexity: %.4f\n",
		sc.Tokens, sc.Predicted, sc.MeanNLL, sc.Perplexity)
	return err
}
