package model_test

import (
	"testing"

	"github.com/seamlm/seam/model"
	"github.com/seamlm/seam/synth"
)

// BenchmarkDecodeStories110M times one decode step (one token through every
// layer and the classifier) of a random-weight f32 model shaped like
// llama2.c's stories110M, and reports tokens/s and the weight bytes streamed
// per second. Building the 440 MB of weights takes several seconds first.
func BenchmarkDecodeStories110M(b *testing.B) {
	cfg := synth.Stories110MConfig()
	w, err := synth.Weights(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.New(w)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := m.NewState(0, cfg.NLayers)
	x := make([]float32, cfg.Dim)
	logits := make([]float32, cfg.VocabSize)
	var bytes int
	for _, l := range w.Layers {
		for _, t := range l.Tensors() {
			bytes += len(t.Data)
		}
	}
	bytes += len(w.Output.Data)
	const warm = 8 // positions run before timing starts
	pos := 0
	step := func() {
		if pos == cfg.SeqLen {
			s.Reset()
			pos = 0
		}
		m.Embed(pos%cfg.VocabSize, x)
		m.Layers(s, x, pos)
		m.Head(x, logits)
		pos++
	}
	for range warm {
		step()
	}
	b.ResetTimer()
	for range b.N {
		step()
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "tok/s")
	b.ReportMetric(float64(bytes)*float64(b.N)/sec/1e9, "GB/s")
}
