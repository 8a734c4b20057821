package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seamlm/seam/generate"
	"github.com/seamlm/seam/internal/testmodels"
	"github.com/seamlm/seam/model"
)

// A planned pool whose stage dies: a pool member the plan left out takes
// over the lost stage's layers (it has the memory for them), the session
// replays onto it, and every logit equals the whole model's. A spare that
// is too small is passed over, by name.
func TestPoolSpareReplacesLostStage(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	members := startPool(t, m, []int64{3 * mib, 3 * mib, 3 * mib, 1 * mib, 3 * mib})
	var planned []string
	var proxies []*faultProxy
	for _, a := range members[:3] {
		p := newFaultProxy(t, a)
		proxies = append(proxies, p)
		planned = append(planned, p.addr())
	}
	opts := Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second, Hang: 400 * time.Millisecond, Logger: quiet}
	po := poolRequest(t, m)
	po.Logger = quiet
	asm, err := Assemble(context.Background(), planned, opts, po)
	if err != nil {
		t.Fatal(err)
	}
	if len(asm.Addrs) != 3 {
		t.Fatalf("the plan uses %d of 3 members (%v); the test wants all three", len(asm.Addrs), asm.Addrs)
	}
	sup, err := Supervise(context.Background(), Singles(asm.Addrs), opts, SupervisorOptions{Poll: time.Hour, Logger: quiet,
		Spare: PoolSpares(members[3:], opts, po)})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	sess, err := sup.NewSession(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tokens := m.Tokenizer.Encode("Once upon a time, there was a little girl named Lily.", true, false)
	mod, _ := model.New(m.Weights)
	whole, _ := generate.NewLocal(mod)
	want, err := whole.Forward(context.Background(), tokens, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	half := len(tokens) / 2
	got, err := sess.Forward(context.Background(), tokens[:half], 0, true)
	if err != nil {
		t.Fatal(err)
	}
	mid := slicesIndex(planned, asm.Addrs[1])
	proxies[mid].kill()
	rest, err := sess.Forward(context.Background(), tokens[half:], half, true)
	if err != nil {
		t.Fatalf("after stage 2's member died, with a spare in the pool: %v", err)
	}
	testmodels.SameBits(t, "across the replacement by a spare", append(got, rest...), want)
	topo := sup.Topology()
	if topo.Stages[1].Addr != members[4] {
		t.Errorf("stage 2 is now %s, want the spare with the memory, %s (the 1 MiB member %s is too small)", topo.Stages[1].Addr, members[4], members[3])
	}
	if topo.Failovers != 1 {
		t.Errorf("%d failovers, want 1", topo.Failovers)
	}
	// Every spare used or too small: the next loss fails, naming why.
	proxies[slicesIndex(planned, asm.Addrs[2])].kill()
	_, err = sess.Forward(context.Background(), tokens[:1], len(tokens), false)
	if err == nil || !strings.Contains(err.Error(), asm.Addrs[2]) {
		t.Fatalf("with no spare left, a lost stage gave %v; want an error naming it (%s)", err, asm.Addrs[2])
	}
	t.Logf("with no spare left: %v", err)
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
