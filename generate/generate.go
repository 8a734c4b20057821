package generate

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/seamlm/seam/sample"
	"github.com/seamlm/seam/tokenizer"
)

// Options control a generation.
type Options struct {
	// Steps is the total number of positions, prompt included, as in
	// llama2.c's -n: generation stops once position Steps is reached. It is
	// clamped to the context length.
	Steps   int
	Sampler *sample.Sampler
	// EchoPrompt writes the prompt's text before the continuation.
	EchoPrompt bool
}

// Stats describe a finished generation.
type Stats struct {
	PromptTokens    int
	GeneratedTokens int
	Prefill         time.Duration
	Decode          time.Duration
	StopReason      string // "length", "eos", "bos" or "context"
}

// Generate encodes BOS + prompt, feeds it, and samples until a stop token or
// the step limit, writing text to out as it is produced. On error nothing
// more is written after the failure, and the error is returned.
func Generate(ctx context.Context, s Session, tok *tokenizer.Tokenizer, contextLen int, prompt string, opts Options, out io.Writer) (Stats, error) {
	var st Stats
	ids := tok.Encode(prompt, true, false)
	st.PromptTokens = len(ids)
	if len(ids) > contextLen {
		return st, fmt.Errorf("prompt is %d tokens (with BOS), longer than the context of %d", len(ids), contextLen)
	}
	steps := min(opts.Steps, contextLen)
	if steps < len(ids) {
		return st, &StepsError{Steps: opts.Steps, PromptTokens: len(ids)}
	}
	if opts.EchoPrompt {
		if err := writePieces(out, tok, ids); err != nil {
			return st, err
		}
	}
	step := samplingStep(s, opts.Sampler)
	t0 := time.Now()
	next, err := step(ctx, ids, 0)
	if err != nil {
		return st, fmt.Errorf("prefill of %d tokens: %w", len(ids), err)
	}
	st.Prefill = time.Since(t0)
	t0 = time.Now()
	prev := ids[len(ids)-1]
	for pos := len(ids); ; pos++ {
		switch {
		case next == tok.BOS():
			st.StopReason = "bos"
		case next == tok.EOS():
			st.StopReason = "eos"
		}
		if st.StopReason != "" {
			break
		}
		if _, err := io.WriteString(out, printable(tok.Decode(prev, next))); err != nil {
			return st, err
		}
		st.GeneratedTokens++
		prev = next
		// The token just printed sits at position pos; feeding it is only
		// worth it while pos is inside the step budget (llama2.c's -n).
		if pos >= steps {
			st.StopReason = "length"
			if steps == contextLen {
				st.StopReason = "context"
			}
			break
		}
		if next, err = step(ctx, []int{next}, pos); err != nil {
			return st, fmt.Errorf("decode at position %d: %w", pos, err)
		}
	}
	st.Decode = time.Since(t0)
	return st, nil
}

// StepsError refuses a step budget that ends inside the prompt: nothing
// would be generated.
type StepsError struct{ Steps, PromptTokens int }

func (e *StepsError) Error() string {
	return fmt.Sprintf("the prompt alone is %d tokens (BOS included) and steps count its positions, so %d steps generate nothing: give at least %d",
		e.PromptTokens, e.Steps, e.PromptTokens)
}

// samplingStep feeds tokens and picks the next one: on the stage that holds
// the logits when the session can and sampling is greedy, else here.
func samplingStep(s Session, smp *sample.Sampler) func(context.Context, []int, int) (int, error) {
	if as, ok := s.(ArgmaxSession); ok && smp.Greedy() {
		return as.ForwardArgmax
	}
	return func(ctx context.Context, tokens []int, pos int) (int, error) {
		logits, err := s.Forward(ctx, tokens, pos, false)
		if err != nil {
			return 0, err
		}
		return smp.Sample(logits[len(logits)-1]), nil
	}
}

func writePieces(out io.Writer, tok *tokenizer.Tokenizer, ids []int) error {
	for i := 1; i < len(ids); i++ {
		if _, err := io.WriteString(out, printable(tok.Decode(ids[i-1], ids[i]))); err != nil {
			return err
		}
	}
	return nil
}

// printable drops a piece that is a lone ASCII control byte (other than
// whitespace), as llama2.c does, so that raw byte tokens cannot emit terminal
// control sequences. Bytes of multi-byte UTF-8 characters pass through.
func printable(piece string) string {
	if len(piece) == 1 {
		c := piece[0]
		if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7f {
			return ""
		}
	}
	return piece
}
