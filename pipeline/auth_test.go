package pipeline

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/auth"
	"github.com/seamlm/seam/loader"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// waitFor returns the log once it holds every string, or after 5 s: the
// refusing side logs after its peer may already have read the refusal.
func (l *logBuf) waitFor(subs ...string) string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := l.String()
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(s, sub)
		}
		if all || time.Now().After(deadline) {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type node struct {
	key ed25519.PrivateKey
	log *logBuf
}

func newNodeKey(t *testing.T) node {
	k, err := auth.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return node{key: k, log: &logBuf{}}
}

// cfg is n's authentication trusting the given nodes (insecure if n has no key).
func (n node) cfg(t *testing.T, trusted ...node) *auth.Config {
	var fps []string
	for _, o := range trusted {
		fps = append(fps, auth.Public(o.key))
	}
	tr, err := auth.NewTrust(fps...)
	if err != nil {
		t.Fatal(err)
	}
	return &auth.Config{Key: n.key, Trust: tr, Logger: slog.New(slog.NewTextHandler(n.log, nil)), HandshakeTimeout: 5 * time.Second}
}

// startStages serves m split in two, each stage with its own authentication.
func startStages(t *testing.T, m *loader.Model, auths [2]*auth.Config, logs [2]*logBuf) []string {
	t.Helper()
	id, _ := m.Identity()
	var addrs []string
	for i, r := range [][2]int{{0, 2}, {2, m.Weights.Config.NLayers}} {
		part := *m.Weights
		part.First, part.Last = r[0], r[1]
		mod, err := model.New(&part)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := stage.New(stage.Config{Model: mod, Identity: id, Name: []string{"s1", "s2"}[i], Timeout: 5 * time.Second,
			Auth: auths[i], Logger: slog.New(slog.NewTextHandler(logs[i], nil))})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// Every connection of a chain is authenticated in both directions: head to
// first stage and stage to stage. Each refusal is a test of its own
// direction, and the refused key's fingerprint is in the error or the log.
func TestChainAuthentication(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	h, s1, s2 := newNodeKey(t), newNodeKey(t), newNodeKey(t)
	all := []node{h, s1, s2}
	dial := func(head *auth.Config, a1, a2 *auth.Config) ([2]*logBuf, error) {
		logs := [2]*logBuf{{}, {}}
		addrs := startStages(t, m, [2]*auth.Config{a1, a2}, logs)
		c, err := Dial(context.Background(), addrs, Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second, Auth: head})
		if err == nil {
			s, serr := c.NewSession(context.Background())
			if serr == nil {
				_, serr = s.Forward(context.Background(), m.Tokenizer.Encode("Once", true, false), 0, false)
			}
			c.Close()
			err = serr
		}
		return logs, err
	}
	fp := func(n node) string { return auth.Public(n.key) }

	t.Run("all trusted", func(t *testing.T) {
		if _, err := dial(h.cfg(t, all...), s1.cfg(t, all...), s2.cfg(t, all...)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("stage refuses head", func(t *testing.T) {
		_, err := dial(h.cfg(t, all...), s1.cfg(t, s1, s2), s2.cfg(t, all...))
		if err == nil || !strings.Contains(err.Error(), "refused this node's key "+fp(h)) {
			t.Fatalf("err %v, want the head told its key was refused", err)
		}
		if log := s1.log.waitFor("refused an untrusted key", fp(h)); !strings.Contains(log, "refused an untrusted key") || !strings.Contains(log, fp(h)) {
			t.Fatalf("stage 1 did not log the head's fingerprint:\n%s", log)
		}
	})
	t.Run("head refuses stage", func(t *testing.T) {
		_, err := dial(h.cfg(t, h, s2), s1.cfg(t, all...), s2.cfg(t, all...))
		if err == nil || !strings.Contains(err.Error(), "peer key "+fp(s1)+" is not in the trust file") {
			t.Fatalf("err %v, want stage 1's key refused by the head", err)
		}
	})
	t.Run("downstream refuses upstream", func(t *testing.T) {
		_, err := dial(h.cfg(t, all...), s1.cfg(t, all...), s2.cfg(t, h, s2))
		if err == nil || !strings.Contains(err.Error(), "refused this node's key "+fp(s1)) {
			t.Fatalf("err %v, want stage 1 told stage 2 refused its key", err)
		}
		if log := s2.log.waitFor(fp(s1)); !strings.Contains(log, fp(s1)) {
			t.Fatalf("stage 2 did not log stage 1's fingerprint:\n%s", log)
		}
	})
	t.Run("upstream refuses downstream", func(t *testing.T) {
		_, err := dial(h.cfg(t, all...), s1.cfg(t, h, s1), s2.cfg(t, all...))
		if err == nil || !strings.Contains(err.Error(), "peer key "+fp(s2)+" is not in the trust file") {
			t.Fatalf("err %v, want stage 2's key refused by stage 1", err)
		}
	})
}

// Plaintext is refused unless both ends are insecure.
func TestChainPlaintextRefused(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	k := newNodeKey(t)
	secure := func() *auth.Config { return k.cfg(t, k) }
	insecure := func() *auth.Config { return &auth.Config{Insecure: true} }
	for _, c := range []struct {
		name       string
		head, st   func() *auth.Config
		wantErrSub string
	}{
		{"plaintext head, TLS stages", insecure, secure, "requires TLS"},
		{"TLS head, plaintext stages", secure, insecure, "answered in plaintext"},
		{"both insecure", insecure, insecure, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			addrs := startStages(t, m, [2]*auth.Config{c.st(), c.st()}, [2]*logBuf{{}, {}})
			ch, err := Dial(context.Background(), addrs, Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second, Auth: c.head()})
			if c.wantErrSub == "" {
				if err != nil {
					t.Fatal(err)
				}
				ch.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErrSub) {
				t.Fatalf("err %v, want %q", err, c.wantErrSub)
			}
		})
	}
}

// A stage routed to a stage of the other kind is refused by it: the head
// holds both connections itself (it would refuse the mismatched one
// first), so here it connects to stage 1 alone and routes it to stage 2,
// as Dial does.
func TestStageToStagePlaintextRefused(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	k := newNodeKey(t)
	secure := func() *auth.Config { return k.cfg(t, k) }
	insecure := func() *auth.Config { return &auth.Config{Insecure: true} }
	for _, c := range []struct {
		name       string
		s1, s2     func() *auth.Config
		wantErrSub string
	}{
		{"TLS stage to plaintext stage", secure, insecure, "answered in plaintext"},
		{"plaintext stage to TLS stage", insecure, secure, "requires TLS"},
		{"both TLS", secure, secure, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := [2]*logBuf{{}, {}}
			addrs := startStages(t, m, [2]*auth.Config{c.s1(), c.s2()}, logs)
			ch := newChain(poolDefaults(Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second, Auth: c.s1()}), quiet)
			sc, err := ch.connect(context.Background(), 0, addrs[0])
			if err != nil {
				t.Fatal(err)
			}
			ch.stages = []*stageConn{sc, {index: 1, addr: addrs[1], layers: wire.LayerRange{Start: 2, End: uint32(m.Weights.Config.NLayers)}}}
			defer sc.conn.Close()
			go ch.read(sc)
			err = ch.route(context.Background())
			if c.wantErrSub == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErrSub) || !strings.Contains(err.Error(), "routing to stage 2") {
				t.Fatalf("err %v, want %q when routing to stage 2", err, c.wantErrSub)
			}
			t.Log(err)
		})
	}
}

// A pool with a plaintext member and a TLS one is refused, whichever kind
// the head is, naming the member of the other kind.
func TestPoolPlaintextRefused(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	k := newNodeKey(t)
	secure := k.cfg(t, k)
	insecure := &auth.Config{Insecure: true}
	var addrs []string
	for i, a := range []*auth.Config{secure, insecure} {
		open := func(first, last int) (*stage.Part, error) { return nil, errors.New("not assigned in this test") }
		addrs = append(addrs, listenPoolMember(t, stage.PoolConfig{
			Base:     stage.Config{Name: []string{"tls", "plain"}[i], Timeout: 5 * time.Second, Auth: a, Logger: quiet},
			Identity: id, Model: m.Weights.Config, Open: open,
			Describe: wire.Description{Free: 8 << 20, DecodeNanos: 20_000, PrefillNanos: 10_000, HeadNanos: 30_000},
		}))
	}
	for _, c := range []struct {
		name string
		head *auth.Config
		addr string
		want string
	}{
		{"TLS head", secure, addrs[1], "answered in plaintext"},
		{"plaintext head", insecure, addrs[0], "requires TLS"},
	} {
		_, err := Assemble(context.Background(), addrs, Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second, Auth: c.head}, poolRequest(t, m))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "pool member "+c.addr) {
			t.Errorf("%s: %v, want %q naming pool member %s", c.name, err, c.want, c.addr)
		}
	}
}

// A replica that accepts a connection and drops it before TLS completes
// (a stage killed mid-handshake) is moved past like one that refuses the
// connection: the supervisor dials the next replica. CI once saw a
// failover give up on exactly this.
func TestDialMovesPastAReplicaThatDropsTLS(t *testing.T) {
	m := openStories(t)
	id, _ := m.Identity()
	h, s1, s2 := newNodeKey(t), newNodeKey(t), newNodeKey(t)
	all := []node{h, s1, s2}
	addrs := startStages(t, m, [2]*auth.Config{s1.cfg(t, all...), s2.cfg(t, all...)}, [2]*logBuf{{}, {}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Read(make([]byte, 1))       // the ClientHello has begun
			c.(*net.TCPConn).SetLinger(0) // a reset, as from a killed process
			c.Close()
		}
	}()
	dead := ln.Addr().String()
	opts := Options{Identity: id, Config: m.Weights.Config, Timeout: 5 * time.Second, Auth: h.cfg(t, all...)}

	// Without a replica, the error is a DialError naming the address once.
	_, err = Dial(context.Background(), []string{dead, addrs[1]}, opts)
	var de *DialError
	if !errors.As(err, &de) || de.Index != 0 || strings.Contains(err.Error(), dead+": "+dead) {
		t.Fatalf("err %v, want a DialError for stage 1 naming %s once", err, dead)
	}
	if !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("err %v, want the reset of the TLS handshake", err)
	}

	sup, err := Supervise(context.Background(), [][]string{{dead, addrs[0]}, {addrs[1]}}, opts, SupervisorOptions{Poll: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatalf("the supervisor did not move past %s to its replica %s: %v", dead, addrs[0], err)
	}
	defer sup.Close()
	if got := sup.Topology().Stages[0].Addr; got != addrs[0] {
		t.Errorf("stage 1 is %s, want the replica %s", got, addrs[0])
	}
}
