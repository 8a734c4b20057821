package generate

import (
	"context"
	"fmt"
	"io"
	"strings"
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

// Generate encodes the prompt (with BOS first when the vocabulary's rule,
// tok.AddBOS, says so), feeds it, and samples until an end-of-generation
// token (tok.IsEOG, or BOS, which llama2.c's run.c also stops at) or the step
// limit, writing text to out as it is produced: complete UTF-8 only, a
// character split across tokens written once whole. On error nothing more
// is written after the failure, and the error is returned.
func Generate(ctx context.Context, s Session, tok tokenizer.Tokenizer, contextLen int, prompt string, opts Options, out io.Writer) (Stats, error) {
	var st Stats
	ids := tok.Encode(prompt, tok.AddBOS(), false)
	st.PromptTokens = len(ids)
	if len(ids) == 0 {
		return st, fmt.Errorf("prompt encodes to no tokens and the vocabulary adds no BOS: nothing to condition on")
	}
	if len(ids) > contextLen {
		return st, fmt.Errorf("prompt is %d tokens (BOS included when the vocabulary adds one), longer than the context of %d", len(ids), contextLen)
	}
	steps := min(opts.Steps, contextLen)
	if steps < len(ids) {
		return st, &StepsError{Steps: opts.Steps, PromptTokens: len(ids)}
	}
	text := tokenizer.NewStreamDecoder(tok)
	for _, id := range ids {
		piece := text.Next(id)
		if opts.EchoPrompt {
			if _, err := io.WriteString(out, printable(piece)); err != nil {
				return st, err
			}
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
	for pos := len(ids); ; pos++ {
		switch {
		case next == tok.BOS() && next >= 0:
			st.StopReason = "bos"
		case tok.IsEOG(next):
			st.StopReason = "eos"
		}
		if st.StopReason != "" {
			break
		}
		if _, err := io.WriteString(out, printable(text.Next(next))); err != nil {
			return st, err
		}
		st.GeneratedTokens++
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
	if _, err := io.WriteString(out, printable(text.Flush())); err != nil {
		return st, err
	}
	return st, nil
}

// StepsError refuses a step budget that ends inside the prompt: nothing
// would be generated.
type StepsError struct{ Steps, PromptTokens int }

func (e *StepsError) Error() string {
	return fmt.Sprintf("the prompt alone is %d tokens (BOS included, when the vocabulary adds one) and steps count its positions, so %d steps generate nothing: give at least %d",
		e.PromptTokens, e.Steps, e.PromptTokens)
}

// samplingStep feeds tokens and picks the next one: on the stage that holds
// the logits when the session can and sampling is greedy, else here.
func samplingStep(s Session, smp *sample.Sampler) func(context.Context, []int, int) (int, error) {
	if as, ok := s.(ArgmaxSession); ok && smp.Greedy() {
		return as.ForwardArgmax
	}
	if ls, ok := s.(LogitsSession); ok {
		logits := make([]float32, ls.VocabSize()) // one buffer for every step
		return func(ctx context.Context, tokens []int, pos int) (int, error) {
			if err := ls.ForwardInto(ctx, tokens, pos, logits); err != nil {
				return 0, err
			}
			return smp.Sample(logits), nil
		}
	}
	return func(ctx context.Context, tokens []int, pos int) (int, error) {
		logits, err := s.Forward(ctx, tokens, pos, false)
		if err != nil {
			return 0, err
		}
		return smp.Sample(logits[len(logits)-1]), nil
	}
}

// printable drops ASCII control characters (other than white space) from
// decoded text, as llama2.c drops such byte pieces, so that a model cannot
// emit terminal control sequences.
func printable(text string) string {
	if strings.IndexFunc(text, isControlChar) < 0 {
		return text
	}
	return strings.Map(func(r rune) rune {
		if isControlChar(r) {
			return -1
		}
		return r
	}, text)
}

func isControlChar(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t' && r != '\r') || r == 0x7f
}
