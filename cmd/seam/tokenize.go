package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/seamlm/seam/container"

	"github.com/seamlm/seam/tokenizer"
	"github.com/spf13/cobra"
)

func newTokenizeCmd() *cobra.Command {
	var path string
	var opt tokenizer.ToolOptions
	cmd := &cobra.Command{
		Use:   "tokenize --tokenizer PATH [--json] [--decode] [TEXT...]",
		Short: "Print the token ids of text (or the text of ids) with a model's vocabulary",
		Long: `Tokenize prints the token ids of each TEXT, one line per TEXT, with the
vocabulary at --tokenizer: a GGUF file, a Hugging Face tokenizer.json (or a
folder holding tokenizer.json and tokenizer_config.json), a llama2.c
tokenizer.bin, or a Seam container. Without TEXT it reads the text from standard input.

Text that spells a special token (<|eot_id|>, <|im_start|>, <s>) becomes that
token, as Hugging Face's encode(text, add_special_tokens=False) and
llama.cpp's tokenize(text, parse_special=true) do; --literal treats all text
as plain text. --special adds BOS/EOS as the vocabulary's rules say.

--decode reads token ids (separated by spaces or commas) instead and prints
their text; bytes that are not valid UTF-8 print as U+FFFD.

--json prints {"ids": [...]} (or {"text": "..."} with --decode) per line.`,
		Example: `  seam tokenize --tokenizer model.gguf "Hello world"
  seam tokenize --tokenizer ./llama3 --json '<|begin_of_text|>Hi'
  seam tokenize --tokenizer ./llama3 --decode "9906 1917"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := loadTokenizer(path)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				in, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return err
				}
				args = []string{string(in)}
			}
			return tokenizer.Tokenize(cmd.OutOrStdout(), tok, args, opt)
		},
	}
	f := cmd.Flags()
	f.StringVar(&path, "tokenizer", "", "vocabulary: GGUF file, tokenizer.json, folder holding tokenizer.json, llama2.c tokenizer.bin, or container (required)")
	f.BoolVar(&opt.JSON, "json", false, `print {"ids": [...]} (or {"text": ...} with --decode) per input`)
	f.BoolVar(&opt.Decode, "decode", false, "inputs are token ids; print their text")
	f.BoolVar(&opt.Special, "special", false, "add BOS/EOS as the vocabulary's rules say")
	f.BoolVar(&opt.Literal, "literal", false, "recognise no special token in the text")
	_ = cmd.MarkFlagRequired("tokenizer")
	return cmd
}

// loadTokenizer opens a Seam container's tokenizer, or any file
// tokenizer.Load understands.
func loadTokenizer(path string) (tokenizer.Tokenizer, error) {
	if _, err := os.Stat(filepath.Join(path, container.IndexFile)); err == nil {
		return container.Tokenizer(path)
	}
	return tokenizer.Load(path)
}
