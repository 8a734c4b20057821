package cluster

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/seamlm/seam/wire"
)

// File is a cluster description, as `seam up` and `seam plan` read it
// (TOML). Paths are relative to the file's directory.
//
//	model = "stories.seam"      # the head's copy (tokenizer, identity, codecs)
//	tokenizer = "tok.bin"       # for a llama2.c checkpoint only
//	key = "head.key"            # this node's key (seam keygen)
//	trust = "cluster.trust"     # fingerprints of every member
//	listen = "127.0.0.1:8080"   # where the API listens
//	max_kl = 0.0                # per-boundary quality budget (0: exact f32)
//
//	[[host]]
//	name = "desktop"
//	addr = "10.0.0.2:7070"
//
// For planning without a running pool, hosts may carry their figures
// (memory, decode_ms, prefill_ms, head_ms) and [[link]] entries give the
// links (a, b, mbps, rtt_ms; "head" names the head).
type File struct {
	Path      string     `toml:"-"`
	Model     string     `toml:"model"`
	Tokenizer string     `toml:"tokenizer"`
	MeasureKL int        `toml:"measure_kl"`
	Key       string     `toml:"key"`
	Trust     string     `toml:"trust"`
	Insecure  bool       `toml:"insecure"`
	Listen    string     `toml:"listen"`
	MaxKL     float64    `toml:"max_kl"`
	Sessions  int        `toml:"sessions"`
	Prompt    int        `toml:"prompt"`
	Generate  int        `toml:"generate"`
	Hosts     []Host     `toml:"host"`
	Links     []FileLink `toml:"link"`
}

// Host is one pool member in a cluster file.
type Host struct {
	Name string `toml:"name"`
	Addr string `toml:"addr"`
	// Offline figures: what the member would report at handshake.
	Memory    string  `toml:"memory"` // e.g. "8GiB"
	DecodeMS  float64 `toml:"decode_ms"`
	PrefillMS float64 `toml:"prefill_ms"`
	HeadMS    float64 `toml:"head_ms"`
}

// FileLink is a link's figures in a cluster file.
type FileLink struct {
	A     string  `toml:"a"`
	B     string  `toml:"b"`
	Mbps  float64 `toml:"mbps"`
	RTTms float64 `toml:"rtt_ms"`
}

const maxClusterFile = 1 << 20

// ReadFile reads and checks a cluster file. Unknown keys are errors, so a
// misspelt setting is never silently ignored.
func ReadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxClusterFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxClusterFile {
		return nil, fmt.Errorf("%s: over %d bytes; not a cluster file", path, maxClusterFile)
	}
	return ParseFile(data, path)
}

// ParseFile parses a cluster file's contents; path is for messages and
// relative paths.
func ParseFile(data []byte, path string) (*File, error) {
	f := &File{Path: path}
	md, err := toml.Decode(string(data), f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		var keys []string
		for _, k := range und {
			keys = append(keys, k.String())
		}
		return nil, fmt.Errorf("%s: unknown keys %s (known: model, tokenizer, key, trust, insecure, listen, max_kl, measure_kl, sessions, prompt, generate, [[host]] name, addr, memory, decode_ms, prefill_ms, head_ms, [[link]] a, b, mbps, rtt_ms)", path, strings.Join(keys, ", "))
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&f.Model, &f.Tokenizer, &f.Key, &f.Trust} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return f, nil
}

func (f *File) check() error {
	var errs []error
	if f.Model == "" {
		errs = append(errs, errors.New("model is not set"))
	}
	if len(f.Hosts) == 0 {
		errs = append(errs, errors.New("no [[host]] entries"))
	}
	if f.Insecure && (f.Key != "" || f.Trust != "") {
		errs = append(errs, errors.New("insecure = true with a key or trust file: give one or the other"))
	}
	if !(f.MaxKL >= 0) || math.IsInf(f.MaxKL, 0) {
		errs = append(errs, fmt.Errorf("max_kl %v: want a finite number >= 0", f.MaxKL))
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"sessions", f.Sessions}, {"prompt", f.Prompt}, {"generate", f.Generate}, {"measure_kl", f.MeasureKL}} {
		if v.n < 0 || v.n > 1<<20 {
			errs = append(errs, fmt.Errorf("%s %d: want 0 (default) to %d", v.name, v.n, 1<<20))
		}
	}
	names := map[string]bool{}
	for i, h := range f.Hosts {
		switch {
		case h.Name == "" || h.Name == HeadName:
			errs = append(errs, fmt.Errorf("host %d: name %q: want a name other than %q", i+1, h.Name, HeadName))
		case names[h.Name]:
			errs = append(errs, fmt.Errorf("host %d: name %q is used twice", i+1, h.Name))
		}
		names[h.Name] = true
		if h.Memory != "" {
			if _, err := ParseSize(h.Memory); err != nil {
				errs = append(errs, fmt.Errorf("host %s: memory: %w", h.Name, err))
			}
		}
		for _, v := range []float64{h.DecodeMS, h.PrefillMS, h.HeadMS} {
			if !(v >= 0) || v > 60000 {
				errs = append(errs, fmt.Errorf("host %s: timing %v ms: want 0..60000", h.Name, v))
			}
		}
	}
	for i, l := range f.Links {
		if (!names[l.A] && l.A != HeadName) || (!names[l.B] && l.B != HeadName) || l.A == l.B {
			errs = append(errs, fmt.Errorf("link %d joins %q and %q: want two different hosts (or %q)", i+1, l.A, l.B, HeadName))
		}
		lk := Link{RTT: time.Duration(l.RTTms * float64(time.Millisecond)), Mbps: l.Mbps}
		if err := lk.Validate(); err != nil || !(l.RTTms >= 0) {
			errs = append(errs, fmt.Errorf("link %s-%s: rtt_ms %v, mbps %v: %v", l.A, l.B, l.RTTms, l.Mbps, err))
		}
	}
	return errors.Join(errs...)
}

// Offline reports whether the file describes every host and link, so that
// a plan can be made without contacting the pool; if not, it says what is
// missing.
func (f *File) Offline() error {
	var missing []string
	for _, h := range f.Hosts {
		if h.Memory == "" || h.DecodeMS == 0 || h.PrefillMS == 0 || h.HeadMS == 0 {
			missing = append(missing, "host "+h.Name+" (memory, decode_ms, prefill_ms, head_ms)")
		}
	}
	ls := f.links()
	nodes := []string{HeadName}
	for _, h := range f.Hosts {
		nodes = append(nodes, h.Name)
	}
	for i, a := range nodes {
		for _, b := range nodes[i+1:] {
			if _, err := ls.Get(a, b); err != nil {
				missing = append(missing, "link "+a+"-"+b)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%s does not give %s", f.Path, strings.Join(missing, ", "))
	}
	return nil
}

func (f *File) links() Links {
	ls := Links{}
	for _, l := range f.Links {
		ls.Set(l.A, l.B, Link{RTT: time.Duration(l.RTTms * float64(time.Millisecond)), Mbps: l.Mbps})
	}
	return ls
}

// Request makes a planning request from the file's own figures (see
// Offline), for a model of the given shape.
func (f *File) Request(shape Shape) (Request, error) {
	if err := f.Offline(); err != nil {
		return Request{}, err
	}
	r := Request{Shape: shape, Links: f.links(), Sessions: f.Sessions, MaxKL: f.MaxKL, Prompt: f.Prompt, Generate: f.Generate}
	for _, h := range f.Hosts {
		mem, _ := ParseSize(h.Memory)
		ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
		r.Members = append(r.Members, Member{Name: h.Name, Addr: h.Addr, Free: mem,
			Speed:     Speed{DecodeLayer: ms(h.DecodeMS), PrefillLayer: ms(h.PrefillMS), Head: ms(h.HeadMS)},
			Encodings: wire.Default.IDs()})
	}
	return r, nil
}

// ParseSize reads a byte size: a number of bytes, or a number with a unit
// (KiB, MiB, GiB, TiB, or KB, MB, GB, TB in powers of 1000).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0) || v*mult > 1<<62 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with a unit such as GiB", s)
	}
	return int64(v * mult), nil
}
