// Package scheduler runs generation requests at the head of a model: it
// opens a session per request on an Engine (the whole model in this process,
// or a chain of pipeline stages), feeds the prompt, samples each next token,
// detects the end (a stop string, an end-of-generation token, the token
// budget), and streams complete UTF-8 text to a callback as it is produced.
// It knows requests and sampling, not sockets or HTTP.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/sample"
)

// Finish reasons, as OpenAI names them.
const (
	FinishStop   = "stop"   // a stop string or an end-of-generation token
	FinishLength = "length" // the token budget or the context is used up
)

// MaxTopLogprobs bounds the alternatives reported per token.
const MaxTopLogprobs = 20

// ErrInvalid marks a request the scheduler refuses before running it.
var ErrInvalid = errors.New("invalid request")

// ErrBusy marks a request refused before it ran for want of capacity now
// (the KV cache budget cannot hold its positions): retrying later may work.
var ErrBusy = errors.New("no capacity")

// reserver is a session that can take the KV cache a request needs before
// it starts (batch.Session), so that a budget refuses the request whole
// rather than cutting its answer short.
type reserver interface{ Reserve(positions int) error }

// Tokenizer is what the scheduler needs of a vocabulary: decoding and which
// ids end a generation. tokenizer.Tokenizer satisfies it.
type Tokenizer interface {
	Decode(prev, id int) string
	BOS() int
	IsEOG(id int) bool
}

// Observer receives timings for metrics. Its methods must be cheap and
// safe for concurrent use.
type Observer interface {
	// FirstToken is called once per request with the time from the start
	// of the prefill to the first generated token.
	FirstToken(d time.Duration)
	// NextToken is called for every later token with the time since the
	// previous one.
	NextToken(d time.Duration)
}

// Config sets up a Scheduler.
type Config struct {
	Engine     Engine
	Tokenizer  Tokenizer
	ContextLen int      // the model's context, in tokens
	Observer   Observer // may be nil
}

// Scheduler runs requests; it is safe for concurrent use. Each request has
// its own session on the engine.
type Scheduler struct {
	cfg Config
}

// New returns a scheduler.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Engine == nil || cfg.Tokenizer == nil || cfg.ContextLen < 1 {
		return nil, fmt.Errorf("scheduler: engine, tokenizer and a context length are required")
	}
	return &Scheduler{cfg: cfg}, nil
}

// ContextLen is the model's context length in tokens.
func (s *Scheduler) ContextLen() int { return s.cfg.ContextLen }

// Request is one generation.
type Request struct {
	Prompt      []int   // token ids, BOS included when the vocabulary wants it
	MaxTokens   int     // tokens to generate at most, >= 1
	Temperature float64 // 0 is greedy
	TopP        float64 // in (0, 1]
	Seed        *uint64 // nil: a random seed
	Stop        []string
	// Logprobs asks for each token's log-probability, and TopLogprobs for
	// that many most likely alternatives (0 .. MaxTopLogprobs).
	Logprobs    bool
	TopLogprobs int
}

// Token is one generated token, with its log-probability when requested.
type Token struct {
	ID      int
	Text    string // the raw decoded piece (possibly part of a UTF-8 character)
	Logprob float64
	Top     []Alternative
}

// Alternative is one of the most likely tokens at a position.
type Alternative struct {
	ID      int
	Text    string
	Logprob float64
}

// Chunk is text released while streaming, with the tokens it completes.
type Chunk struct {
	Text   string // valid UTF-8, never a byte of a stop string
	Tokens []Token
}

// Result describes a finished generation.
type Result struct {
	Text             string
	Tokens           []Token // every released token (with logprobs when requested)
	FinishReason     string
	PromptTokens     int
	CompletionTokens int // tokens generated, an end-of-generation token excepted
	TimeToFirstToken time.Duration
	Decode           time.Duration // from the first generated token to the last
}

// Run generates for req. emit, when not nil, receives text as it becomes
// releasable; an error from emit aborts the generation. On any error the
// Result holds what was released so far and the error says why it stopped:
// it is never a complete answer.
func (s *Scheduler) Run(ctx context.Context, req Request, emit func(Chunk) error) (Result, error) {
	res := Result{PromptTokens: len(req.Prompt)}
	if err := s.check(req); err != nil {
		return res, err
	}
	seed := rand.Uint64()
	if req.Seed != nil {
		seed = *req.Seed
	}
	smp, err := sample.New(req.Temperature, req.TopP, seed)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	sess, err := s.cfg.Engine.NewSession(ctx)
	if err != nil {
		return res, err
	}
	defer sess.Close()
	if r, ok := sess.(reserver); ok {
		if err := r.Reserve(len(req.Prompt) + req.MaxTokens); err != nil {
			return res, fmt.Errorf("%w: %d prompt tokens + %d to generate: %w", ErrBusy, len(req.Prompt), req.MaxTokens, err)
		}
	}
	g := &generation{s: s, req: req, sess: sess, smp: smp, res: &res, emit: emit,
		text: textStream{stops: req.Stop}}
	return res, g.run(ctx)
}

func (s *Scheduler) check(req Request) error {
	n := len(req.Prompt)
	switch {
	case n == 0:
		return fmt.Errorf("%w: the prompt is empty", ErrInvalid)
	case req.MaxTokens < 1:
		return fmt.Errorf("%w: max tokens %d, want at least 1", ErrInvalid, req.MaxTokens)
	case n > s.cfg.ContextLen || req.MaxTokens > s.cfg.ContextLen-n:
		return fmt.Errorf("%w: %d prompt tokens + %d to generate exceed the context of %d", ErrInvalid, n, req.MaxTokens, s.cfg.ContextLen)
	case req.TopLogprobs < 0 || req.TopLogprobs > MaxTopLogprobs:
		return fmt.Errorf("%w: top logprobs %d, want 0..%d", ErrInvalid, req.TopLogprobs, MaxTopLogprobs)
	}
	for _, st := range req.Stop {
		if st == "" {
			return fmt.Errorf("%w: an empty stop string", ErrInvalid)
		}
	}
	return nil
}

// generation is the state of one running request.
type generation struct {
	s    *Scheduler
	req  Request
	sess generate.Session
	smp  *sample.Sampler
	res  *Result
	emit func(Chunk) error
	text textStream
	// logits is the buffer of a LogitsSession's steps.
	logits []float32
}

func (g *generation) run(ctx context.Context) error {
	tok := g.s.cfg.Tokenizer
	obs := g.s.cfg.Observer
	t0 := time.Now()
	next, logits, err := g.step(ctx, g.req.Prompt, 0)
	if err != nil {
		return fmt.Errorf("prefill of %d tokens: %w", len(g.req.Prompt), err)
	}
	g.res.TimeToFirstToken = time.Since(t0)
	if obs != nil {
		obs.FirstToken(g.res.TimeToFirstToken)
	}
	tDecode, last := time.Now(), time.Now()
	prev := g.req.Prompt[len(g.req.Prompt)-1]
	for pos := len(g.req.Prompt); ; pos++ {
		if endsGeneration(tok, next) {
			return g.finish(FinishStop, tDecode, nil)
		}
		g.res.CompletionTokens++
		t := Token{ID: next, Text: tok.Decode(prev, next)}
		if g.req.Logprobs {
			g.logprobs(&t, prev, logits)
		}
		chunk, stopped := g.text.push(t.Text, t)
		if stopped {
			return g.finish(FinishStop, tDecode, &chunk)
		}
		if err := g.send(chunk); err != nil {
			return err
		}
		if g.res.CompletionTokens >= g.req.MaxTokens {
			return g.finish(FinishLength, tDecode, nil)
		}
		prev = next
		if next, logits, err = g.step(ctx, []int{next}, pos); err != nil {
			return fmt.Errorf("decode at position %d: %w", pos, err)
		}
		if obs != nil {
			obs.NextToken(time.Since(last))
		}
		last = time.Now()
	}
}

// finish releases the held text (the chunk a stop string cut, or
// everything still held) and records why generation ended.
func (g *generation) finish(reason string, tDecode time.Time, cut *Chunk) error {
	g.res.Decode = time.Since(tDecode)
	c := g.text.finish()
	if cut != nil {
		c = *cut
	}
	if err := g.send(c); err != nil {
		return err
	}
	g.res.FinishReason = reason
	return nil
}

func (g *generation) send(c Chunk) error {
	g.res.Text += c.Text
	g.res.Tokens = append(g.res.Tokens, c.Tokens...)
	if g.emit == nil || (c.Text == "" && len(c.Tokens) == 0) {
		return nil
	}
	return g.emit(c)
}

// step feeds tokens at pos and picks the next token. Greedy requests that
// need no logprobs let the session pick (a split model's last stage then
// sends one id instead of the logits), as seam run does.
func (g *generation) step(ctx context.Context, tokens []int, pos int) (int, []float32, error) {
	if as, ok := g.sess.(generate.ArgmaxSession); ok && g.smp.Greedy() && !g.req.Logprobs {
		id, err := as.ForwardArgmax(ctx, tokens, pos)
		return id, nil, err
	}
	if ls, ok := g.sess.(generate.LogitsSession); ok {
		// One buffer for the generation: the logits are used (sampled, their
		// logprobs taken) before the next step overwrites them.
		if len(g.logits) != ls.VocabSize() {
			g.logits = make([]float32, ls.VocabSize())
		}
		if err := ls.ForwardInto(ctx, tokens, pos, g.logits); err != nil {
			return 0, nil, err
		}
		return g.smp.Sample(g.logits), g.logits, nil
	}
	out, err := g.sess.Forward(ctx, tokens, pos, false)
	if err != nil {
		return 0, nil, err
	}
	logits := out[len(out)-1]
	return g.smp.Sample(logits), logits, nil
}

// endsGeneration reports whether id ends a generation: an end-of-generation
// token of the vocabulary (EOS, <|eot_id|>, ...), or BOS, as seam run stops.
func endsGeneration(tok Tokenizer, id int) bool {
	return (id == tok.BOS() && id >= 0) || tok.IsEOG(id)
}
