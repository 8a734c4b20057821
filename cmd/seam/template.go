package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/seamlm/seam/chat"
	"github.com/seamlm/seam/tokenizer"
	"github.com/spf13/cobra"
)

func newTemplateCmd() *cobra.Command {
	var tokPath, msgPath string
	var asJSON, noGen bool
	cmd := &cobra.Command{
		Use:   "template --tokenizer PATH --messages FILE.json [--json]",
		Short: "Render a conversation with a model's chat template",
		Long: `Template renders a conversation into the prompt text the model expects, with
the model's own Jinja chat template, and prints it.

PATH is a GGUF file (tokenizer.chat_template), a tokenizer_config.json
(chat_template), a tokenizer.json (the tokenizer_config.json beside it), or a
folder holding them (chat_template.jinja there takes precedence). A model
without a template gets Seam's plain fallback format (see docs/chat.md).

FILE.json holds an array of {"role": ..., "content": ...} objects, or an
object {"messages": [...]}; "-" reads standard input. The template sees
messages, bos_token, eos_token and add_generation_prompt (true unless
--no-generation-prompt).

--json also tokenizes the prompt with the model's tokenizer (the GGUF's
vocabulary, or tokenizer.json), adding no BOS or EOS: control tokens the
template wrote are parsed as control tokens, while text that a message's
content spells as one (for example <|im_start|>) stays text. "literal" lists
the byte ranges of the prompt that came from message content.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			msgs, err := readMessages(msgPath, cmd.InOrStdin())
			if err != nil {
				return err
			}
			tmpl, err := chat.Load(tokPath)
			if err != nil {
				return err
			}
			r, err := tmpl.Render(msgs, chat.Options{AddGenerationPrompt: !noGen})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !asJSON {
				_, err := io.WriteString(out, r.Text)
				return err
			}
			tok, err := tokenizer.Load(tokenizerPath(tokPath))
			if err != nil {
				return err
			}
			ids := tok.EncodeWith(r.Text, tokenizer.EncodeOptions{Literal: r.Literal})
			return writeTemplateJSON(out, tmpl, r, ids)
		},
	}
	cmd.Flags().StringVar(&tokPath, "tokenizer", "", "GGUF, tokenizer_config.json, tokenizer.json or folder holding the chat template (required)")
	cmd.Flags().StringVar(&msgPath, "messages", "", `JSON file with the conversation, "-" for standard input (required)`)
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"text": ..., "ids": [...], "literal": [[start, end], ...], "template": "model"|"fallback"}`)
	cmd.Flags().BoolVar(&noGen, "no-generation-prompt", false, "do not end with the opening of an assistant turn (add_generation_prompt=false)")
	cmd.MarkFlagRequired("tokenizer")
	cmd.MarkFlagRequired("messages")
	return cmd
}

func readMessages(path string, stdin io.Reader) ([]chat.Message, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 2*chat.MaxContentBytes))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	msgs, err := chat.ParseMessages(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return msgs, nil
}

// tokenizerPath maps a tokenizer_config.json to its folder, where
// tokenizer.Load finds tokenizer.json.
func tokenizerPath(p string) string {
	if filepath.Base(p) == chat.ConfigFile {
		return filepath.Dir(p)
	}
	return p
}

func writeTemplateJSON(w io.Writer, tmpl *chat.Template, r chat.Rendered, ids []int) error {
	lit := make([][2]int, len(r.Literal))
	for i, s := range r.Literal {
		lit[i] = [2]int{s.Start, s.End}
	}
	kind := "model"
	if !tmpl.HasTemplate() {
		kind = "fallback"
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(struct {
		Text     string   `json:"text"`
		IDs      []int    `json:"ids"`
		Literal  [][2]int `json:"literal"`
		Template string   `json:"template"`
	}{r.Text, ids, lit, kind})
}
