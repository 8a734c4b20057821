//go:build linux

// Package netns builds a small network of Linux network namespaces for
// tests: one namespace per node, a veth pair per link, and a token-bucket
// (tbf) bandwidth limit on each end of a link. Latency is not shaped here
// (netem is not available on every machine): processes add it themselves
// with Seam's link emulation (--link-latency-ms).
//
// Everything is named after a prefix holding the creating process's id, so
// that leftovers of a crashed run can be recognised and removed (Sweep) and
// a test can check that nothing of its own is left (Leftovers). It needs
// root (CAP_NET_ADMIN) and the ip and tc commands.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Prefixes of everything this package creates: namespaces are
// "seamtb-PID-N-NODE", veth ends "smtPIDxSa" / "smtPIDxSb" with S counting
// this process's links (at most 15 bytes, the kernel's limit).
const (
	nsPrefix   = "seamtb-"
	vethPrefix = "smt"
)

// Link joins two nodes.
type Link struct {
	A, B string
	// Mbps limits each direction with tbf; 0 leaves the link unshaped.
	Mbps float64
}

// Testbed is a set of namespaces joined by links.
type Testbed struct {
	id    string // PID and a counter, unique on this machine while we live
	nodes map[string]string
	order []string             // node names as given
	hosts map[string]string    // node -> its host address
	addrs map[[2]string]string // (from, to) -> to's address on their link
	veths []string

	mu    sync.Mutex
	procs []*exec.Cmd
}

var counter struct {
	sync.Mutex
	n     int // testbeds made by this process
	links int // veth pairs made by this process
}

// Available reports why a testbed cannot be made here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	for _, c := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%s not found (apt-get install iproute2)", c)
		}
	}
	return nil
}

// New creates one namespace per node and the links between them. Each
// link gets its own /24 in 198.18.0.0/15 (reserved for benchmarks); the A
// end is .1, the B end .2. On error everything made so far is removed.
//
// It first sweeps away what the testbeds of dead processes left (Sweep): a
// test binary killed by a timeout or a signal never runs its cleanups, and
// the next run removes what it made.
func New(nodes []string, links []Link) (tb *Testbed, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if err := Sweep(); err != nil {
		return nil, fmt.Errorf("removing what a dead run's testbed left behind: %w", err)
	}
	if len(links) > 250 || len(nodes) > 250 {
		return nil, fmt.Errorf("%d nodes and %d links: at most 250 of each", len(nodes), len(links))
	}
	counter.Lock()
	counter.n++
	tb = &Testbed{id: fmt.Sprintf("%d-%d", os.Getpid(), counter.n), nodes: map[string]string{}, addrs: map[[2]string]string{}, hosts: map[string]string{}}
	counter.Unlock()
	defer func() {
		if err != nil {
			tb.Close()
			tb = nil
		}
	}()
	for _, n := range nodes {
		if n == "" || strings.ContainsAny(n, "/ \t") || tb.nodes[n] != "" {
			return nil, fmt.Errorf("node name %q: empty, repeated or with a slash or space", n)
		}
		ns := nsPrefix + tb.id + "-" + n
		if err := run("ip", "netns", "add", ns); err != nil {
			return nil, err
		}
		tb.nodes[n] = ns
		tb.order = append(tb.order, n)
		tb.hosts[n] = fmt.Sprintf("198.19.0.%d", len(tb.order))
		if err := run("ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return nil, err
		}
		if err := run("ip", "-n", ns, "addr", "add", tb.hosts[n]+"/32", "dev", "lo"); err != nil {
			return nil, err
		}
	}

	for i, l := range links {
		if err := tb.link(i, l); err != nil {
			return nil, err
		}
	}
	return tb, nil
}

func (tb *Testbed) link(i int, l Link) error {
	nsA, okA := tb.nodes[l.A]
	nsB, okB := tb.nodes[l.B]
	if !okA || !okB || l.A == l.B {
		return fmt.Errorf("link %d joins %q and %q: want two different nodes", i, l.A, l.B)
	}
	if l.Mbps < 0 {
		return fmt.Errorf("link %s-%s: rate %v Mbit/s", l.A, l.B, l.Mbps)
	}
	counter.Lock()
	counter.links++
	seq := counter.links
	counter.Unlock()
	pid := strconv.Itoa(os.Getpid())
	va, vb := fmt.Sprintf("%s%sx%da", vethPrefix, pid, seq), fmt.Sprintf("%s%sx%db", vethPrefix, pid, seq)
	if len(va) > 15 {
		return fmt.Errorf("interface name %s is over 15 bytes", va)
	}
	if err := run("ip", "link", "add", va, "type", "veth", "peer", "name", vb); err != nil {
		return err
	}
	tb.veths = append(tb.veths, va)
	addrA, addrB := fmt.Sprintf("198.18.%d.1", i), fmt.Sprintf("198.18.%d.2", i)
	for _, e := range []struct{ dev, ns, addr string }{{va, nsA, addrA}, {vb, nsB, addrB}} {
		steps := [][]string{
			{"ip", "link", "set", e.dev, "netns", e.ns},
			{"ip", "-n", e.ns, "addr", "add", e.addr + "/24", "dev", e.dev},
			{"ip", "-n", e.ns, "link", "set", e.dev, "up"},
		}
		if l.Mbps > 0 && l.Mbps < 200 {
			// No segmentation offload on slow links: tbf then sees
			// MTU-sized packets and its burst can be small, so the rate
			// holds at short time scales too. On fast links the packet
			// rate would cost more CPU than the machine has.
			steps = append(steps, []string{"ip", "-n", e.ns, "link", "set", e.dev, "gso_max_size", "1500"})
		}
		if l.Mbps > 0 {
			steps = append(steps, []string{"tc", "-n", e.ns, "qdisc", "add", "dev", e.dev, "root", "tbf",
				"rate", fmt.Sprintf("%dkbit", int(l.Mbps*1000)), "burst", strconv.Itoa(burst(l.Mbps)), "latency", "400ms"})
		}
		for _, s := range steps {
			if err := run(s...); err != nil {
				return err
			}
		}
	}
	tb.addrs[[2]string{l.A, l.B}] = addrB
	tb.addrs[[2]string{l.B, l.A}] = addrA
	// Each node's host address is reached over the direct link to it.
	if err := run("ip", "-n", nsA, "route", "add", tb.hosts[l.B]+"/32", "via", addrB, "src", addrA); err != nil {
		return err
	}
	return run("ip", "-n", nsB, "route", "add", tb.hosts[l.A]+"/32", "via", addrA, "src", addrB)
}

// Host is node's host address (in 198.19.0.0/24, on its loopback): the
// address every node with a direct link to it reaches it by, over that
// link. Give it to programs that pass addresses on to others (a head
// routing stage to stage), since a link address is reachable only from
// the other end of that link.
func (tb *Testbed) Host(node string) string { return tb.hosts[node] }

// burst is the token bucket's depth in bytes: 1 ms at the rate, at least
// a few packets; on fast links (with segmentation offload) at least two
// 64 KiB segments.
func burst(mbps float64) int {
	if mbps >= 200 {
		return max(int(mbps*1e6/8/500), 2*65536+2*1514)
	}
	return max(int(mbps*1e6/8/1000), 8*1514)
}

// Addr is node to's address on its link with node from.
func (tb *Testbed) Addr(from, to string) (string, error) {
	a, ok := tb.addrs[[2]string{from, to}]
	if !ok {
		return "", fmt.Errorf("no link between %s and %s", from, to)
	}
	return a, nil
}

// Namespace is the name of node's namespace.
func (tb *Testbed) Namespace(node string) string { return tb.nodes[node] }

// Command returns a command that runs inside node's namespace. Start it
// with Start so that Close stops it.
func (tb *Testbed) Command(ctx context.Context, node, name string, args ...string) *exec.Cmd {
	ns := tb.nodes[node]
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Start starts cmd and registers it to be killed by Close.
func (tb *Testbed) Start(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	tb.mu.Lock()
	tb.procs = append(tb.procs, cmd)
	tb.mu.Unlock()
	return nil
}

// Do runs f on a thread inside node's namespace: sockets f creates (Listen,
// Dial with an IP address) live there. f must not start goroutines that
// create sockets.
func (tb *Testbed) Do(node string, f func() error) error {
	ns, ok := tb.nodes[node]
	if !ok {
		return fmt.Errorf("no node %q", node)
	}
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		return err
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering %s: %w", ns, err)
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays in the wrong namespace: keep it locked, so it
		// exits with this goroutine instead of serving others.
		return fmt.Errorf("leaving %s: %w", ns, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Listen listens on addr inside node's namespace.
func (tb *Testbed) Listen(node, addr string) (net.Listener, error) {
	var ln net.Listener
	err := tb.Do(node, func() (err error) { ln, err = net.Listen("tcp", addr); return })
	return ln, err
}

// Dial connects from inside node's namespace.
func (tb *Testbed) Dial(node, addr string) (net.Conn, error) {
	var c net.Conn
	err := tb.Do(node, func() (err error) { c, err = net.DialTimeout("tcp", addr, 5*time.Second); return })
	return c, err
}

// Close kills the processes started with Start and removes every
// namespace and interface. It reports what could not be removed.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	procs := tb.procs
	tb.procs = nil
	tb.mu.Unlock()
	for _, p := range procs {
		if p.Process != nil {
			syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			p.Wait()
		}
	}
	var errs []error
	for _, ns := range tb.nodes {
		if err := run("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	// A veth pair dies with either end's namespace; one whose ends were
	// never moved is still in this namespace.
	for _, v := range tb.veths {
		if exists(v) {
			if err := run("ip", "link", "del", v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	tb.nodes = map[string]string{}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if left := tb.leftovers(); len(left) > 0 {
		return fmt.Errorf("left behind after Close: %s", strings.Join(left, ", "))
	}
	return nil
}

func exists(dev string) bool {
	return exec.Command("ip", "link", "show", "dev", dev).Run() == nil
}

// leftovers lists this testbed's namespaces, interfaces and qdiscs still present.
func (tb *Testbed) leftovers() []string {
	ours := func(s string) bool {
		return strings.Contains(s, nsPrefix+tb.id+"-") || strings.Contains(s, vethPrefix+strconv.Itoa(os.Getpid())+"x")
	}
	var out []string
	for _, s := range listAll() {
		if ours(s) {
			out = append(out, s)
		}
	}
	return out
}

// Leftovers lists every namespace, interface and qdisc in this (root)
// namespace that a testbed made, from any run.
func Leftovers() []string {
	var out []string
	for _, s := range listAll() {
		if strings.Contains(s, nsPrefix) || strings.Contains(s, vethPrefix) && isOurVeth(s) {
			out = append(out, s)
		}
	}
	return out
}

// isOurVeth matches "smt<digits>x<digits>[ab]" inside a listing line.
func isOurVeth(line string) bool {
	for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == ':' || r == '@' }) {
		rest, ok := strings.CutPrefix(f, vethPrefix)
		if !ok {
			continue
		}
		pid, tail, ok := strings.Cut(rest, "x")
		if !ok || pid == "" || strings.Trim(pid, "0123456789") != "" || len(tail) < 2 {
			continue
		}
		if strings.Trim(tail[:len(tail)-1], "0123456789") == "" && (tail[len(tail)-1] == 'a' || tail[len(tail)-1] == 'b') {
			return true
		}
	}
	return false
}

// listAll lists namespaces, root interfaces and root qdiscs, one per entry.
func listAll() []string {
	var out []string
	if b, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				out = append(out, "namespace "+f[0])
			}
		}
	}
	if b, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				out = append(out, "interface "+l)
			}
		}
	}
	if b, err := exec.Command("tc", "qdisc", "show").Output(); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				out = append(out, "qdisc "+l)
			}
		}
	}
	return out
}

// Sweep removes what testbeds of processes no longer running left behind
// (a crashed or killed test). It leaves running tests' testbeds alone.
func Sweep() error {
	var errs []error
	if b, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
				continue
			}
			pid, _, _ := strings.Cut(strings.TrimPrefix(f[0], nsPrefix), "-")
			if alive(pid) {
				continue
			}
			if err := run("ip", "netns", "del", f[0]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if b, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if !isOurVeth(name) {
				continue
			}
			pid, _, _ := strings.Cut(strings.TrimPrefix(name, vethPrefix), "x")
			if !alive(pid) && exists(name) {
				if err := run("ip", "link", "del", name); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

func alive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	if n == os.Getpid() {
		return true
	}
	// EPERM: the process exists but is not ours to signal.
	err = syscall.Kill(n, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func run(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
