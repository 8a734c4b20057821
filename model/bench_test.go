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

// BenchmarkBatchStories110M times the layers of a batch of 16 tokens (a
// decode step of 16 sessions, or a prefill chunk) of the stories110M shape,
// and reports tokens/s: the compute ceiling of batched decode.
func BenchmarkBatchStories110M(b *testing.B) {
	cfg := synth.Stories110MConfig()
	w, err := synth.Weights(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.New(w)
	if err != nil {
		b.Fatal(err)
	}
	const n = 16
	s, _ := m.NewState(0, cfg.NLayers)
	x := make([]float32, n*cfg.Dim)
	pos := 0
	b.ResetTimer()
	for range b.N {
		if pos+n > cfg.SeqLen {
			s.Reset()
			pos = 0
		}
		for i := range n {
			m.Embed(i+1, x[i*cfg.Dim:(i+1)*cfg.Dim])
		}
		m.LayersBatch(s, x, pos, n)
		pos += n
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tok/s")
}
