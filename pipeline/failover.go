package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/seamlm/seam/wire"
)

// ParsePositions reads a --stages list: positions separated by commas, in
// layer order, each one address or replicas separated by '|'
// ("a:1,b1:2|b2:2,c:3"). Every address must be host:port.
func ParsePositions(list string) ([][]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("no stage addresses: want host:port,host:port (replicas of one stage as host:port|host:port)")
	}
	var out [][]string
	for i, pos := range strings.Split(list, ",") {
		var reps []string
		for j, addr := range strings.Split(pos, "|") {
			addr = strings.TrimSpace(addr)
			if addr == "" {
				return nil, fmt.Errorf("stage %d, replica %d has no address (a stray ',' or '|'?)", i+1, j+1)
			}
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return nil, fmt.Errorf("stage %d, replica %d address %q: want host:port (%v)", i+1, j+1, addr, err)
			}
			if slices.Contains(reps, addr) {
				return nil, fmt.Errorf("stage %d lists %s twice", i+1, addr)
			}
			reps = append(reps, addr)
		}
		out = append(out, reps)
	}
	return out, nil
}

// Singles makes positions of one address each.
func Singles(addrs []string) [][]string {
	out := make([][]string, len(addrs))
	for i, a := range addrs {
		out[i] = []string{a}
	}
	return out
}

// replicaTries counts, per position, the replicas one failover has moved
// past, so that it gives up once each has been tried.
type replicaTries map[int]int

// current is the address in use at each position.
func (s *Supervisor) current() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.positions))
	for i, p := range s.positions {
		out[i] = p[s.active[i]]
	}
	return out
}

// rotate moves position i to its next replica, or to a spare when every
// replica has been tried in this failover; false when neither is left.
func (s *Supervisor) rotate(ctx context.Context, i int, tried replicaTries, why error) bool {
	if i < 0 || i >= len(s.positions) {
		return false
	}
	if tried[i] >= s.replicas(i)-1 {
		if !s.spare(ctx, i, why) {
			return false
		}
		tried[i]++
		return true
	}
	tried[i]++
	s.mu.Lock()
	from := s.positions[i][s.active[i]]
	s.active[i] = (s.active[i] + 1) % len(s.positions[i])
	to := s.positions[i][s.active[i]]
	s.mu.Unlock()
	s.log.Warn("switching to a replica", "session", 0, "stage", i+1, "from", from, "to", to, "because", why.Error())
	return true
}

// replicas is how many addresses position i has now.
func (s *Supervisor) replicas(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.positions[i])
}

// dial connects a chain over the current replicas, moving a position that
// cannot be reached to its next replica until one of each answers. The
// caller holds failMu.
func (s *Supervisor) dial(ctx context.Context, tried replicaTries) (*Chain, error) {
	for {
		c, err := Dial(ctx, s.current(), s.opts)
		if err == nil {
			s.readopt(c)
			return c, nil
		}
		var de *DialError
		if ctx.Err() == nil && errors.As(err, &de) && s.rotate(ctx, de.Index, tried, err) {
			continue
		}
		s.down(err)
		return nil, err
	}
}

// recover replaces the chain old (nil: none is up) that failed with cause:
// it retires old, moves the position that cause names (a hang, a lost
// connection) to its next replica, and dials. When another caller has
// already replaced old, it returns that chain.
func (s *Supervisor) recover(ctx context.Context, old *Chain, cause error) (*Chain, error) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	s.mu.Lock()
	cur, closed := s.chain, s.closed
	s.mu.Unlock()
	if closed {
		return nil, errors.New("the head is shutting down")
	}
	if cur != nil && cur != old && cur.Err() == nil {
		return cur, nil
	}
	if cur != nil {
		s.lose(cur, cur.Err())
	}
	tried := replicaTries{}
	if i, ok := culprit(cause); ok {
		s.rotate(ctx, i, tried, cause)
	}
	return s.dial(ctx, tried)
}

// failover is recover for a session of old: it gives up at once, with
// cause, when the position that failed has no other replica, so that the
// request fails fast naming the stage rather than waiting on a re-dial of
// the stage that just failed.
func (s *Supervisor) failover(ctx context.Context, old *Chain, cause error) (*Chain, error) {
	if i, ok := culprit(cause); ok && s.replicas(i) < 2 && s.sopts.Spare == nil {
		return nil, cause
	}
	c, err := s.recover(ctx, old, cause)
	if err != nil {
		if cause == nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w; no replica could take over: %w", cause, err)
	}
	return c, nil
}

// culprit is the position a chain failure names, when it names one: a
// stage that hung, or whose connection the head lost.
func culprit(err error) (int, bool) {
	var he *HangError
	var le *LostError
	switch {
	case errors.As(err, &he):
		return he.Index, true
	case errors.As(err, &le):
		return le.Index, true
	}
	return -1, false
}

// replayChunk is the most tokens one replayed frame carries: below any
// stage's prefill cap, and long enough that a context replays in a few
// frames.
const replayChunk = 256

// moveTo opens this session again on chain c and replays its tokens, so
// that every stage of c holds the KV cache the session had. Replayed
// frames go out back to back and are answered in order (the stages run a
// session's frames in the order they arrive). The batch is bit-identical
// to the tokens' original frames: a stage's layers give the same values
// however the positions are grouped (model.TestBatchIsBitIdentical).
func (s *Session) moveTo(ctx context.Context, c *Chain) error {
	ns, err := c.NewSession(ctx)
	if err != nil {
		return err
	}
	old := s.id
	s.chain, s.id = c, ns.id
	var waits []chan event
	var reqs []uint64
	chunk := min(replayChunk, c.maxPrefill)
	for at := 0; at < len(s.hist); at += chunk {
		ids := s.hist[at:min(at+chunk, len(s.hist))]
		kind := wire.KindDecode
		if len(ids) > 1 {
			kind = wire.KindPrefill
		}
		req, ch := c.expect()
		m := wire.Meta{Session: s.id, Request: req, Start: uint32(at)}
		if err := c.send(c.stages[0], func(fr *wire.Framer) error { return fr.WriteTokenIDs(kind, wire.FlagGreedy, m, ids) }); err != nil {
			return err
		}
		waits, reqs = append(waits, ch), append(reqs, req)
	}
	for i, ch := range waits {
		if _, err := c.wait(ctx, reqs[i], ch); err != nil {
			return fmt.Errorf("replaying %d tokens: %w", len(s.hist), err)
		}
	}
	c.log.Info("session failed over", "session", s.id, "stage", "head", "was_session", old, "replayed_tokens", len(s.hist), "stages", strings.Join(c.Stages(), "; "))
	return nil
}

// failOver moves the session to the chain that replaces its failed one.
func (s *Session) failOver(ctx context.Context, cause error) error {
	t0 := time.Now()
	c, err := s.sup.failover(ctx, s.chain, cause)
	if err != nil {
		return err
	}
	if err := s.moveTo(ctx, c); err != nil {
		return fmt.Errorf("%w; replaying the session on the replacement chain failed: %w", cause, err)
	}
	s.sup.failovers.Add(1)
	s.sup.log.Warn("failover", "session", s.id, "stage", "head", "cause", cause.Error(), "replayed_tokens", len(s.hist), "took", time.Since(t0).String())
	return nil
}

// canFailOver: err failed the session's chain (not just this request, and
// not the caller's cancellation), and the supervisor has replicas.
func (s *Session) canFailOver(ctx context.Context, err error) bool {
	return err != nil && s.sup != nil && s.sup.replicated && ctx.Err() == nil && s.chain.Err() != nil
}

// remember records tokens sent at pos, after their reply: what a failover
// replays. A request at pos rewinds the session there.
func (s *Session) remember(tokens []uint32, pos int) {
	if s.sup == nil || !s.sup.replicated {
		return
	}
	s.hist = append(s.hist[:min(pos, len(s.hist))], tokens...)
}

// maxFailovers bounds the failovers of one request: one per spare replica.
func (s *Supervisor) maxFailovers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.positions {
		n += len(p) - 1
	}
	if s.sopts.Spare != nil {
		n += len(s.positions) // a spare may take each position once
	}
	return n
}
