package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/wire"
)

// SpareFunc finds a stage to take over layers whose stage failed and
// has no replica left, and returns its address (SupervisorOptions.Spare).
type SpareFunc func(ctx context.Context, layers wire.LayerRange) (string, error)

// PoolSpares is a SpareFunc over the pool members at addrs that a plan
// left out: it assigns the lost stage's layers to the first of them that
// holds none yet and offers the memory they need (cluster.Request's
// StageBytes, with po.Request's sessions), and uses each member once.
// Members already assigned keep their ranges (a member is assigned once),
// so a spare must be a member the plan did not use.
func PoolSpares(addrs []string, opts Options, po PoolOptions) SpareFunc {
	var mu sync.Mutex
	used := map[string]bool{}
	return func(ctx context.Context, layers wire.LayerRange) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		need := po.Request.StageBytes(int(layers.Start), int(layers.End))
		var refusals []string
		for _, addr := range addrs {
			if used[addr] {
				continue
			}
			err := assignSpare(ctx, addr, opts, po, layers, need)
			if err == nil {
				used[addr] = true
				return addr, nil
			}
			refusals = append(refusals, fmt.Sprintf("%s: %v", addr, err))
		}
		if len(refusals) == 0 {
			return "", errors.New("no spare pool member is left")
		}
		return "", fmt.Errorf("no spare pool member can take layers %v (%s needed): %s", layers, cluster.GiB(need), strings.Join(refusals, "; "))
	}
}

// assignSpare assigns layers to the pool member at addr if it holds none
// and offers need bytes.
func assignSpare(ctx context.Context, addr string, opts Options, po PoolOptions, layers wire.LayerRange, need int64) error {
	c := newChain(poolDefaults(opts), po.Logger)
	m, err := connectMember(ctx, c, 0, addr)
	if err != nil {
		return err
	}
	defer m.conn.Close()
	if m.layers.Start != m.layers.End {
		return fmt.Errorf("already serves layers %v", m.layers)
	}
	if m.hello.Generation < wire.PoolGeneration {
		return fmt.Errorf("speaks protocol generation %d, without pool frames", m.hello.Generation)
	}
	if err := describe(ctx, c, m); err != nil {
		return err
	}
	if free := int64(m.desc.Free); free < need {
		return fmt.Errorf("offers %s", cluster.GiB(free))
	}
	sessions := uint32(po.Request.Sessions)
	if sessions == 0 {
		sessions = 4 // the planner's default budget, as Assemble assigns
	}
	return assign(c, m, wire.Assignment{Layers: layers, MaxSessions: sessions})
}

// spare asks SupervisorOptions.Spare for a stage to take position i's
// layers, and makes it the position's replica in use.
func (s *Supervisor) spare(ctx context.Context, i int, why error) bool {
	if s.sopts.Spare == nil {
		return false
	}
	s.mu.Lock()
	var layers wire.LayerRange
	if i < len(s.status) {
		layers = wire.LayerRange{Start: uint32(s.status[i].First), End: uint32(s.status[i].Last)}
	}
	s.mu.Unlock()
	if layers.Start == layers.End {
		return false
	}
	addr, err := s.sopts.Spare(ctx, layers)
	if err != nil {
		s.log.Warn("no spare can replace the stage", "session", 0, "stage", i+1, "layers", layers, "because", why.Error(), "err", err)
		return false
	}
	s.mu.Lock()
	s.positions[i] = append(s.positions[i], addr)
	s.active[i] = len(s.positions[i]) - 1
	s.mu.Unlock()
	s.log.Warn("a spare pool member takes over the stage", "session", 0, "stage", i+1, "layers", layers, "spare", addr, "because", why.Error())
	return true
}
