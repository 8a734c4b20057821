package stage

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/seamlm/seam/codec"
	"github.com/seamlm/seam/model"
)

// EvenRanges splits n layers into k contiguous ranges whose sizes differ by
// at most one: the default split.
func EvenRanges(n, k int) ([][2]int, error) {
	if k < 1 || k > n {
		return nil, fmt.Errorf("cannot split %d layers into %d stages (want 1..%d)", n, k, n)
	}
	out := make([][2]int, k)
	for i := range out {
		out[i] = [2]int{i * n / k, (i + 1) * n / k}
	}
	return out, nil
}

// Local is a set of stages running in this process on loopback.
type Local struct {
	Addrs   []string
	servers []*Server
}

// StartLocal starts one stage per range over the whole-model weights w, each
// on its own loopback listener. base supplies everything but the model; each
// stage gets the codecs of its own boundaries from codecs (which may be nil).
func StartLocal(w *model.Weights, ranges [][2]int, base Config, codecs map[int]*codec.Codec) (*Local, error) {
	l := &Local{}
	for i, r := range ranges {
		part := *w
		part.First, part.Last = r[0], r[1]
		m, err := model.New(&part)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("stage %d layers [%d, %d): %w", i+1, r[0], r[1], err)
		}
		cfg := base
		cfg.Model = m
		cfg.Name = fmt.Sprintf("local-%d", i+1)
		if len(codecs) > 0 {
			if err := UseCodecs(&cfg, codecs); err != nil {
				l.Close()
				return nil, err
			}
		}
		if cfg.Logger == nil {
			cfg.Logger = slog.Default()
		}
		srv, err := New(cfg)
		if err != nil {
			l.Close()
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			l.Close()
			return nil, err
		}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
				cfg.Logger.Error("local stage stopped", "session", 0, "stage", cfg.Name, "err", err)
			}
		}()
		l.servers = append(l.servers, srv)
		l.Addrs = append(l.Addrs, ln.Addr().String())
	}
	return l, nil
}

// Servers returns the running stages, in layer order.
func (l *Local) Servers() []*Server { return l.servers }

// Close stops every stage.
func (l *Local) Close() error {
	for _, s := range l.servers {
		s.Close()
	}
	return nil
}

// BalancedRanges splits the layers of w into k contiguous ranges of about
// equal compute per token: every layer counts its weights' elements, and
// the last range also the classifier's, which a stage that holds the head
// applies to every token it answers (on the stories110M shape it weighs as
// much as 3.5 layers). Each range holds at least one layer.
func BalancedRanges(w *model.Weights, k int) ([][2]int, error) {
	n := w.Config.NLayers
	if k < 1 || k > n {
		return nil, fmt.Errorf("cannot split %d layers into %d stages (want 1..%d)", n, k, n)
	}
	cost := make([]float64, n)
	var total float64
	for l := range n {
		for _, t := range w.Layers[l].TensorsOf(&w.Config) {
			cost[l] += float64(t.Rows) * float64(t.Cols)
		}
		total += cost[l]
	}
	head := float64(w.Output.Rows) * float64(w.Output.Cols)
	total += head
	out := make([][2]int, 0, k)
	first, acc := 0, 0.0
	for l := range n {
		acc += cost[l]
		left := k - len(out) - 1 // ranges still to make after this one
		// Close the range where the boundary comes nearest its share: when
		// the next layer would pass it by more than half its weight. Leave
		// a layer for each range still to come.
		next := 0.0
		if l+1 < n {
			next = cost[l+1]
		}
		if left > 0 && (acc+next/2 > total*float64(len(out)+1)/float64(k) || n-l-1 == left) {
			out = append(out, [2]int{first, l + 1})
			first = l + 1
		}
	}
	return append(out, [2]int{first, n}), nil
}
