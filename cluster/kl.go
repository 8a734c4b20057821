package cluster

import (
	"fmt"
	"sort"
	"strings"

	"github.com/seamlm/seam/eval"
	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/wire"
)

// KLTable holds measured KL (mean nats per position against the whole
// model) by boundary layer and encoding: what Request.KL takes.
type KLTable map[int]map[wire.EncodingID]float64

// KLOptions configure MeasureKL.
type KLOptions struct {
	Tokens    int               // positions scored at each boundary (default 256)
	Seed      uint64            // for the sampled token stream (default 1)
	BOS, EOS  int               // the vocabulary's ids, to sample sequences
	Encodings []wire.EncodingID // default f16, q8, q5, q4
	Progress  func(boundary int)
}

// MeasureKL measures, teacher-forced against the whole model, what each
// encoding costs at every boundary, on tokens sampled from the model
// itself (eval.SampleTokens and eval.Compare). m must hold every layer.
// f32 is exact and is not measured.
func MeasureKL(m *model.Model, opt KLOptions) (KLTable, error) {
	if opt.Tokens <= 0 {
		opt.Tokens = 256
	}
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	if len(opt.Encodings) == 0 {
		opt.Encodings = []wire.EncodingID{wire.EncodingF16, wire.EncodingQ8, wire.EncodingQ5, wire.EncodingQ4}
	}
	var encs []wire.Encoding
	for _, id := range opt.Encodings {
		e, err := wire.Default.Lookup(id, 0)
		if err != nil {
			return nil, fmt.Errorf("measuring KL: %w", err)
		}
		encs = append(encs, e)
	}
	seqs, err := eval.SampleTokens(m, opt.BOS, opt.EOS, opt.Tokens, opt.Seed, 1, nil)
	if err != nil {
		return nil, fmt.Errorf("measuring KL: %w", err)
	}
	t := KLTable{}
	for b := 1; b < m.Config().NLayers; b++ {
		rep, err := eval.Compare(m, seqs, b, encs, nil)
		if err != nil {
			return nil, fmt.Errorf("measuring KL: %w", err)
		}
		t[b] = map[wire.EncodingID]float64{}
		for i, r := range rep.Results {
			t[b][opt.Encodings[i]] = r.KL
		}
		if opt.Progress != nil {
			opt.Progress(b)
		}
	}
	return t, nil
}

// String lists the table, one boundary a line.
func (t KLTable) String() string {
	var bs []int
	for b := range t {
		bs = append(bs, b)
	}
	sort.Ints(bs)
	var sb strings.Builder
	for _, b := range bs {
		var ids []int
		for id := range t[b] {
			ids = append(ids, int(id))
		}
		sort.Ints(ids)
		fmt.Fprintf(&sb, "boundary at layer %d:", b)
		for _, id := range ids {
			fmt.Fprintf(&sb, " %s %.4g", wire.EncodingID(id), t[b][wire.EncodingID(id)])
		}
		sb.WriteString("\n")
	}
	return sb.String()
}
