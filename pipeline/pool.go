package pipeline

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seamlm/seam/cluster"
	"github.com/seamlm/seam/link"
	"github.com/seamlm/seam/stage"
	"github.com/seamlm/seam/wire"
)

// PoolOptions configure Assemble.
type PoolOptions struct {
	// Request is the planning request's template: Shape, Sessions, MaxKL,
	// KL, Codecs, Prompt, Generate, Logits. Members and Links are filled in
	// from the pool.
	Request cluster.Request
	Measure link.MeasureOptions
	Logger  *slog.Logger
	// PlanOnly measures and plans but assigns nothing (seam plan --pool).
	PlanOnly bool
	// Record, when set, is a file in which Assemble records the chain it
	// assigns: the stages' addresses and ranges and each boundary's
	// encoding and KL. A later Assemble that finds the members already
	// assigned takes the boundary encodings from it. The members keep only
	// their ranges, so a reused chain without a record (or with one of
	// another plan) is f32 at every boundary: exact, but slower over a
	// link the plan chose a lossy encoding for.
	Record string
}

// Assembly is a pool made into a chain: the stage addresses in layer order
// and the encoding of each boundary, with the plan that chose them (nil
// when the members were already assigned and their ranges are reused).
type Assembly struct {
	Addrs     []string
	Encodings []wire.EncodingID // per boundary, len(Addrs)-1
	Plan      *cluster.Plan
	// Request is what the plan was made from: the members' descriptions
	// and the measured links (empty when an earlier plan was reused).
	Request cluster.Request
	// Spare, set by the caller (PoolSpares over the members the chain
	// leaves out), replaces a stage that dies (SupervisorOptions.Spare).
	Spare SpareFunc
}

// member is one pool member's connection during assembly.
type member struct {
	*stageConn
	desc    wire.Description
	hello   wire.Hello // the member's HelloAck
	display string     // its name in the plan: its own, or its address if not unique
}

// Assemble makes a chain from the pool members at addrs: it connects to
// each, and if none holds layers yet, it asks each for its description,
// measures every link (head to member with Probe frames; member to member
// by asking the member to), plans, and assigns each planned member its
// range. If members already hold ranges (assigned by an earlier head),
// those are reused when they tile the model, and refused otherwise. The
// connections are closed before it returns; dial the chain with Dial or
// Supervise.
func Assemble(ctx context.Context, addrs []string, opts Options, po PoolOptions) (*Assembly, error) {
	if len(addrs) == 0 {
		return nil, errors.New("the pool is empty")
	}
	if po.Logger == nil {
		po.Logger = slog.Default()
	}
	c := newChain(poolDefaults(opts), po.Logger)
	var ms []*member
	defer func() {
		for _, m := range ms {
			m.conn.Close()
		}
	}()
	assigned := 0
	for i, addr := range addrs {
		m, err := connectMember(ctx, c, i, addr)
		if err != nil {
			return nil, fmt.Errorf("pool member %s: %w", addr, err)
		}
		sc := m.stageConn
		if m.display == "" || slices.ContainsFunc(ms, func(o *member) bool { return o.display == m.display }) || m.display == cluster.HeadName {
			m.display = addr
		}
		ms = append(ms, m)
		if sc.layers.Start != sc.layers.End {
			assigned++
		}
	}
	if assigned > 0 {
		// An earlier head planned this pool: reuse the members that hold
		// layers if they make a whole chain (a plan may leave members out).
		var held []*member
		for _, m := range ms {
			if m.layers.Start != m.layers.End {
				held = append(held, m)
			}
		}
		return reuse(c, held, po)
	}
	for _, m := range ms {
		if m.hello.Generation < wire.PoolGeneration {
			return nil, fmt.Errorf("pool member %s (%s) speaks protocol generation %d; pool members need generation %d (upgrade it)", m.addr, m.hello.Name, m.hello.Generation, wire.PoolGeneration)
		}
	}
	req := po.Request
	req.Links = cluster.Links{}
	req.Members = nil
	for _, m := range ms {
		if err := describe(ctx, c, m); err != nil {
			return nil, err
		}
		req.Members = append(req.Members, cluster.Member{Name: m.display, Addr: m.addr, Free: int64(m.desc.Free),
			Speed:     cluster.Speed{DecodeLayer: time.Duration(m.desc.DecodeNanos), PrefillLayer: time.Duration(m.desc.PrefillNanos), Head: time.Duration(m.desc.HeadNanos)},
			Encodings: m.hello.Encodings, Codecs: m.hello.Codecs})
	}
	for _, m := range ms {
		m.conn.SetDeadline(time.Now().Add(c.opts.Timeout))
		fig, err := link.Measure(ctx, &stage.FrameProber{Framer: m.fr}, po.Measure)
		m.conn.SetDeadline(time.Time{})
		if err != nil {
			return nil, fmt.Errorf("measuring the link to pool member %s: %w", m.addr, err)
		}
		l := cluster.Link{RTT: fig.RTT, Mbps: fig.Mbps}
		req.Links.Set(cluster.HeadName, m.display, l)
		po.Logger.Info("measured link", "session", 0, "stage", "head", "from", cluster.HeadName, "to", m.display, "link", l.String())
	}
	for i, a := range ms {
		for _, b := range ms[i+1:] {
			l, err := measureBetween(c, a, b)
			if err != nil {
				return nil, err
			}
			req.Links.Set(a.display, b.display, l)
			po.Logger.Info("measured link", "session", 0, "stage", "head", "from", a.display, "to", b.display, "link", l.String())
		}
	}
	plan, err := cluster.MakePlan(req)
	if err != nil {
		return nil, err
	}
	for _, line := range plan.Reasons {
		po.Logger.Info("plan: "+line, "session", 0, "stage", "head")
	}
	asm := &Assembly{Plan: plan, Request: req}
	if po.PlanOnly {
		for _, st := range plan.Stages {
			asm.Addrs = append(asm.Addrs, st.Member.Addr)
		}
		for _, b := range plan.Boundaries {
			asm.Encodings = append(asm.Encodings, b.Encoding)
		}
		return asm, nil
	}
	for i, st := range plan.Stages {
		m := ms[slices.IndexFunc(ms, func(m *member) bool { return m.display == st.Member.Name })]
		a := wire.Assignment{Layers: wire.LayerRange{Start: uint32(st.First), End: uint32(st.Last)}, MaxSessions: uint32(max(req.Sessions, 1))}
		if req.Sessions <= 0 {
			a.MaxSessions = 4 // the planner's default budget
		}
		if err := assign(c, m, a); err != nil {
			return nil, err
		}
		asm.Addrs = append(asm.Addrs, m.addr)
		if i > 0 {
			asm.Encodings = append(asm.Encodings, plan.Boundaries[i-1].Encoding)
		}
	}
	if po.Record != "" {
		if err := writeRecord(po.Record, newRecord(c.opts.Identity, asm.Addrs, plan)); err != nil {
			po.Logger.Warn("could not record the plan: a later head will reuse the ranges with f32 at every boundary", "session", 0, "stage", "head", "record", po.Record, "err", err)
		}
	}
	return asm, nil
}

// reuse takes members that already hold ranges, in layer order, with the
// boundary encodings of the plan that assigned them when po.Record holds
// it (and the encoding still suits the budget and the members), f32 where
// not.
func reuse(c *Chain, ms []*member, po PoolOptions) (*Assembly, error) {
	sorted := slices.Clone(ms)
	slices.SortFunc(sorted, func(a, b *member) int { return int(a.layers.Start) - int(b.layers.Start) })
	var scs []*stageConn
	asm := &Assembly{}
	for i, m := range sorted {
		m.index = i
		scs = append(scs, m.stageConn)
		asm.Addrs = append(asm.Addrs, m.addr)
	}
	if err := checkTiling(scs, c.opts.Config.NLayers); err != nil {
		return nil, fmt.Errorf("pool members already hold layers from an earlier plan, but they do not make a chain (restart them to plan the pool anew): %w", err)
	}
	encs, why := recordedEncodings(c, sorted, po)
	asm.Encodings = encs
	var names []string
	for _, e := range encs {
		names = append(names, e.String())
	}
	level := slog.LevelInfo
	if why != "" && po.Request.MaxKL > 0 {
		level = slog.LevelWarn // a budget was given, and the plan's lossy choices may be lost
	}
	po.Logger.Log(context.Background(), level, "pool members already hold layers from an earlier plan; reusing them", "session", 0, "stage", "head",
		"stages", strings.Join(asm.Addrs, ","), "encodings", strings.Join(names, ","), "f32_because", why)
	return asm, nil
}

// recordedEncodings are the encodings of the boundaries of the chain ms
// (in layer order): the recorded plan's, where it is this chain's and each
// recorded encoding is within the budget and decodable; f32 elsewhere,
// with the reason.
func recordedEncodings(c *Chain, ms []*member, po PoolOptions) ([]wire.EncodingID, string) {
	encs := make([]wire.EncodingID, len(ms)-1)
	for i := range encs {
		encs[i] = wire.EncodingF32
	}
	if len(encs) == 0 {
		return encs, ""
	}
	if po.Record == "" {
		return encs, "no plan record is kept (PoolOptions.Record)"
	}
	rec, err := readRecord(po.Record)
	if err != nil {
		return encs, fmt.Sprintf("no record of the plan's encodings: %v", err)
	}
	if why := rec.describes(c.opts.Identity, ms); why != "" {
		return encs, fmt.Sprintf("the record %s is of another plan (%s)", po.Record, why)
	}
	var skipped []string
	for i, b := range rec.Boundaries {
		e := wire.EncodingID(b.Encoding)
		down, up := ms[i+1], ms[i]
		layer := down.layers.Start
		switch {
		case e == wire.EncodingF32:
		case !(b.KL <= po.Request.MaxKL):
			skipped = append(skipped, fmt.Sprintf("boundary %d: %s's KL %.4g is over --max-kl %g", i+1, e, b.KL, po.Request.MaxKL))
		case !slices.Contains(down.hello.Encodings, e):
			skipped = append(skipped, fmt.Sprintf("boundary %d: %s does not decode %s", i+1, down.addr, e))
		case e == wire.EncodingLowRank && !sameCodec(layer, c.opts.Codecs, up.hello.Codecs, down.hello.Codecs):
			skipped = append(skipped, fmt.Sprintf("boundary %d: the head and both stages do not hold the same codec for layer %d", i+1, layer))
		default:
			encs[i] = e
		}
	}
	return encs, strings.Join(skipped, "; ")
}

// sameCodec: every list holds a codec for boundary layer b, the same one.
func sameCodec(b uint32, lists ...[]wire.CodecDigest) bool {
	var first wire.CodecDigest
	for i, l := range lists {
		j := slices.IndexFunc(l, func(d wire.CodecDigest) bool { return d.Boundary == b })
		if j < 0 || (i > 0 && l[j] != first) {
			return false
		}
		first = l[j]
	}
	return true
}

// chainRecord is what PoolOptions.Record holds: the chain a head assigned.
type chainRecord struct {
	Model      string           `json:"model"` // identity, hex
	Stages     []recordStage    `json:"stages"`
	Boundaries []recordBoundary `json:"boundaries"`
}

type recordStage struct {
	Addr  string `json:"addr"`
	First int    `json:"first"`
	Last  int    `json:"last"`
}

type recordBoundary struct {
	Encoding uint8   `json:"encoding"`
	Name     string  `json:"name"` // for people reading the file
	KL       float64 `json:"kl"`   // measured at the boundary when planned
}

func newRecord(id wire.Digest, addrs []string, p *cluster.Plan) *chainRecord {
	r := &chainRecord{Model: hex.EncodeToString(id[:])}
	for i, st := range p.Stages {
		r.Stages = append(r.Stages, recordStage{Addr: addrs[i], First: st.First, Last: st.Last})
	}
	for _, b := range p.Boundaries {
		r.Boundaries = append(r.Boundaries, recordBoundary{Encoding: uint8(b.Encoding), Name: b.Encoding.String(), KL: b.KL})
	}
	return r
}

// describes says why the record is not of the chain ms of model id ("" if it is).
func (r *chainRecord) describes(id wire.Digest, ms []*member) string {
	if r.Model != hex.EncodeToString(id[:]) {
		return "another model"
	}
	if len(r.Stages) != len(ms) || len(r.Boundaries) != len(ms)-1 {
		return fmt.Sprintf("%d stages, this chain has %d", len(r.Stages), len(ms))
	}
	for i, st := range r.Stages {
		m := ms[i]
		if st.Addr != m.addr || st.First != int(m.layers.Start) || st.Last != int(m.layers.End) {
			return fmt.Sprintf("stage %d was %s [%d, %d), now %s %v", i+1, st.Addr, st.First, st.Last, m.addr, m.layers)
		}
	}
	return ""
}

const maxRecord = 1 << 20

func readRecord(path string) (*chainRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r chainRecord
	dec := json.NewDecoder(io.LimitReader(f, maxRecord))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// writeRecord replaces the file at path with r, atomically.
func writeRecord(path string, r *chainRecord) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".plan-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// roundTrip writes one request on a member's connection and reads its
// answer, which must be of the same kind and request id.
func roundTrip(c *Chain, m *member, kind wire.Kind, write func(fr *wire.Framer, req uint64) error) (*wire.Frame, error) {
	req, _ := c.expect()
	m.conn.SetDeadline(time.Now().Add(c.opts.Timeout))
	defer m.conn.SetDeadline(time.Time{})
	if err := write(m.fr, req); err != nil {
		return nil, fmt.Errorf("pool member %s: %w", m.addr, err)
	}
	f, err := m.fr.ReadFrame()
	if err != nil {
		return nil, fmt.Errorf("pool member %s: %w", m.addr, err)
	}
	if f.Kind == wire.KindError {
		re, rerr := f.RemoteError()
		if rerr != nil {
			return nil, rerr
		}
		return nil, fmt.Errorf("pool member %s: %w", m.addr, re)
	}
	if f.Kind != kind || f.Request != req {
		return nil, fmt.Errorf("pool member %s answered %v request %d with %v request %d: %w", m.addr, kind, req, f.Kind, f.Request, wire.ErrMalformed)
	}
	return f, nil
}

func describe(ctx context.Context, c *Chain, m *member) error {
	f, err := roundTrip(c, m, wire.KindDescribe, func(fr *wire.Framer, req uint64) error { return fr.WriteDescribe(req, nil) })
	if err != nil {
		return err
	}
	if m.desc, err = f.Description(); err != nil {
		return fmt.Errorf("pool member %s: %w", m.addr, err)
	}
	return nil
}

func measureBetween(c *Chain, a, b *member) (cluster.Link, error) {
	f, err := roundTrip(c, a, wire.KindMeasure, func(fr *wire.Framer, req uint64) error { return fr.WriteMeasure(req, b.addr) })
	if err != nil {
		return cluster.Link{}, fmt.Errorf("measuring the link from %s to %s: %w", a.addr, b.addr, err)
	}
	r, err := f.LinkReport()
	if err != nil {
		return cluster.Link{}, fmt.Errorf("pool member %s: %w", a.addr, err)
	}
	return cluster.Link{RTT: time.Duration(r.RTTNanos), Mbps: float64(r.BitsPerSecond) / 1e6}, nil
}

func assign(c *Chain, m *member, a wire.Assignment) error {
	f, err := roundTrip(c, m, wire.KindAssign, func(fr *wire.Framer, req uint64) error { return fr.WriteAssign(req, &a) })
	if err != nil {
		return fmt.Errorf("assigning layers %v: %w", a.Layers, err)
	}
	got, err := f.Assignment()
	if err != nil || got != a {
		return fmt.Errorf("pool member %s acknowledged assignment %+v with %+v (%v): %w", m.addr, a, got, err, wire.ErrMalformed)
	}
	return nil
}

// poolDefaults fills in what Dial defaults.
func poolDefaults(o Options) Options {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Registry == nil {
		o.Registry = wire.Default
	}
	if o.Encoding == wire.EncodingNone {
		o.Encoding = wire.EncodingF32
	}
	return o
}

// connectMember dials a pool member and runs the handshake as a head,
// keeping the member's HelloAck (its range, encodings and codecs).
func connectMember(ctx context.Context, c *Chain, i int, addr string) (*member, error) {
	d := net.Dialer{Timeout: c.opts.Timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if c.opts.Auth != nil {
		if conn, _, err = c.opts.Auth.Client(ctx, conn, addr); err != nil {
			return nil, err
		}
	}
	w := net.Conn(conn)
	if c.opts.Link.RateMbps > 0 || c.opts.Link.Latency > 0 {
		if w, err = link.Wrap(conn, c.opts.Link); err != nil {
			conn.Close()
			return nil, err
		}
	}
	sc := &stageConn{index: i, addr: addr, conn: w, fr: wire.NewFramer(w, conn)}
	sc.fr.SetRegistry(c.opts.Registry)
	cfg := c.opts.Config
	h := wire.Hello{
		Generation: wire.MaxGeneration, MinGeneration: wire.MinGeneration, MaxGeneration: wire.MaxGeneration,
		Model: c.opts.Identity, Width: uint32(cfg.Dim), Vocab: uint32(cfg.VocabSize),
		Encodings: c.opts.Registry.IDs(), Encoding: wire.EncodingF32, Codecs: c.opts.Codecs, Name: "head",
	}
	fail := func(err error) (*member, error) { w.Close(); return nil, err }
	if err := sc.fr.WriteHello(wire.KindHello, &h); err != nil {
		return fail(err)
	}
	w.SetReadDeadline(time.Now().Add(c.opts.Timeout))
	defer w.SetReadDeadline(time.Time{})
	f, err := sc.fr.ReadFrame()
	if err != nil {
		return fail(fmt.Errorf("handshake: %w", err))
	}
	if f.Kind == wire.KindError {
		re, err := f.RemoteError()
		if err == nil {
			err = fmt.Errorf("refused the connection: %w", re)
		}
		return fail(err)
	}
	if f.Kind != wire.KindHelloAck {
		return fail(fmt.Errorf("answered the Hello with %v: %w", f.Kind, wire.ErrMalformed))
	}
	ack, err := f.Hello()
	if err != nil {
		return fail(err)
	}
	agreed, err := wire.CheckHelloAck(&h, &ack)
	if err != nil {
		return fail(err)
	}
	sc.fr.Pin(agreed)
	sc.layers, sc.name = ack.Layers, ack.Name
	return &member{stageConn: sc, hello: ack, display: ack.Name}, nil
}
