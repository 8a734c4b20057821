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
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "score --model PATH (--text TEXT | --file F) [--json]",
		Short: "Teacher-forced scoring: mean negative log-likelihood and perplexity",
		Long: `Score feeds BOS + the encoded text through the model and reports how well
each next token was predicted: the token count (BOS included), the number of
predicted positions, the mean negative log-likelihood in nats per predicted
token, and the perplexity (exp of the mean).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (text == "") == (file == "") {
				return fmt.Errorf("give exactly one of --text or --file")
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
			sc, err := generate.ScoreText(context.Background(), sess, m.Tokenizer, m.Weights.Config.SeqLen, text)
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
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
