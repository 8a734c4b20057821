package cluster

import (
	"fmt"
	"slices"

	"github.com/seamlm/seam/wire"
)

// explain writes the best plan's reasons: one line per stage, boundary and
// unused member, then the prediction.
func (s *search) explain() {
	p, r := s.best, s.r
	for i, st := range p.Stages {
		p.Reasons = append(p.Reasons, fmt.Sprintf("stage %d → %s: layers [%d, %d) (%d; %.2f ms per layer per token decode, %.3f prefill); needs %s of %s free",
			i+1, st.Member.String(), st.First, st.Last, st.Last-st.First, ms(st.Member.Speed.DecodeLayer.Seconds()),
			ms(st.Member.Speed.PrefillLayer.Seconds()), GiB(st.Bytes), GiB(st.Member.Free)))
	}
	for i := range p.Boundaries {
		p.Reasons = append(p.Reasons, r.explainBoundary(p, i))
	}
	for _, m := range s.members {
		if slices.ContainsFunc(p.Stages, func(st Stage) bool { return st.Member.String() == m.String() }) {
			continue
		}
		with := s.bestWith[m.String()]
		if with == nil {
			p.Reasons = append(p.Reasons, fmt.Sprintf("%s unused: no plan that includes it fits (it offers %s; a stage needs %s for one layer)",
				m.String(), GiB(m.Free), GiB(r.stageBytes(1, false, false))))
			continue
		}
		p.Reasons = append(p.Reasons, fmt.Sprintf("%s unused: the best plan with it predicts %s; without it %s",
			m.String(), with.Predicted, p.Predicted))
	}
	p.Reasons = append(p.Reasons, "predicted: "+p.Predicted.String())
}

func ms(sec float64) float64 { return sec * 1e3 }

// explainBoundary says why boundary i has its encoding, against the most
// exact alternative (or the fastest one, when the most exact was kept).
func (r *Request) explainBoundary(p *Plan, i int) string {
	b := p.Boundaries[i]
	head := fmt.Sprintf("boundary %d → %s: %s → %s over %s", i+1, b.Encoding, b.From, b.To, b.Link)
	if b.Encoding != wire.EncodingF32 {
		head = fmt.Sprintf("boundary %d → %s (KL %.4g ≤ %g): %s → %s over %s", i+1, b.Encoding, b.KL, r.MaxKL, b.From, b.To, b.Link)
	}
	if ci, ok := r.Codecs[b.Layer]; ok && b.Encoding == wire.EncodingLowRank {
		step, prefill := codecCompute(ci)
		head += fmt.Sprintf(" (the codec's encode plus decode: %.1f µs a decode step, %.1f µs a prompt token, timed on the head)", step*1e6, prefill*1e6)
	}
	opts := r.options(b.Layer, &p.Stages[i+1].Member, &p.Stages[i].Member)
	if len(opts) == 1 {
		if r.MaxKL == 0 {
			return head + "; exact: --max-kl 0 allows only f32"
		}
		return head + fmt.Sprintf("; no other encoding has a measured KL within --max-kl %g here", r.MaxKL)
	}
	alt := opts[0] // most exact
	if alt.enc == b.Encoding {
		alt = opts[0]
		for _, o := range opts[1:] {
			if r.hopCost(b.Link, o) < r.hopCost(b.Link, alt) {
				alt = o
			}
		}
		if alt.enc == b.Encoding {
			return head + "; no other encoding within the budget is faster"
		}
		q := r.predictWith(p, i, alt)
		return head + fmt.Sprintf("; %s would save %.3f ms per token and %.1f ms of a %d-token prefill, under %.0f%% of the request: exact kept",
			alt.enc, ms((p.Predicted.Step-q.Step).Seconds()), ms((p.Predicted.Prompt-q.Prompt).Seconds()), r.Prompt, exactnessMargin*100)
	}
	q := r.predictWith(p, i, alt)
	return head + fmt.Sprintf("; %s would cap decode at %.1f tok/s and prefill at %.0f tok/s (chosen: %.1f and %.0f)",
		alt.enc, q.Decode, q.Prefill, p.Predicted.Decode, p.Predicted.Prefill)
}

// predictWith predicts p with boundary i's encoding replaced by o.
func (r *Request) predictWith(p *Plan, i int, o option) Prediction {
	q := *p
	q.Boundaries = slices.Clone(p.Boundaries)
	setEncoding(&q.Boundaries[i], o)
	return r.predict(&q)
}
