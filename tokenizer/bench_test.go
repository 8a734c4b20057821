package tokenizer

import (
	"slices"
	"testing"
)

// BenchmarkEncodeVsReference tokenizes about 1 MB of mixed text with each
// family's tokenizer.json, in Seam (b.Loop) and in @lenml/tokenizers
// (reported as lenml-MB/s: node timed before and after Seam's loop, each
// time 3 rounds after a discarded warm-up; Seam also discards one warm-up
// encode), and checks that both give the same ids.
func BenchmarkEncodeVsReference(b *testing.B) {
	text := benchText()
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			tok := loadHFFamily(b, fam)
			measured := true // b.Loop runs the body once
			var ref []float64
			nodeRun := func() {
				if !measured {
					return
				}
				resp := runRef(b, refRequest{Dir: tokDir(b, fam), Bench: &benchReq{Text: text, Rounds: 3}})
				ref = append(ref, resp.Bench.Seconds...)
			}
			nodeRun()
			ids := tok.Encode(text, false, false) // warm-up (fills the word cache), discarded
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for b.Loop() {
				ids = tok.Encode(text, false, false)
			}
			b.StopTimer()
			nodeRun()
			if measured {
				resp := runRef(b, refRequest{Dir: tokDir(b, fam), Texts: []string{text}})
				if !slices.Equal(ids, resp.IDs[0]) {
					b.Fatalf("ids of the 1 MB text differ from the reference")
				}
				var sum float64
				for _, s := range ref {
					sum += s
				}
				b.ReportMetric(float64(len(text))/1e6/(sum/float64(len(ref))), "lenml-MB/s")
				b.ReportMetric(float64(len(ids)), "tokens")
			}
		})
	}
}

// BenchmarkEncode1MB tokenizes about 1 MB of mixed text with each family's
// tokenizer.json (Seam alone, no reference).
func BenchmarkEncode1MB(b *testing.B) {
	text := benchText()
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			tok := loadHFFamily(b, fam)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tok.Encode(text, false, false)
			}
		})
	}
}

// BenchmarkEncodeGGUFVsLlamaCpp tokenizes the same 1 MB with the GGUF files
// written from each family, in Seam and in llama.cpp (reported as
// llamacpp-MB/s: timed before and after Seam's loop, 3 rounds each after a
// discarded warm-up; special tokens not parsed on either side, the text has
// none).
func BenchmarkEncodeGGUFVsLlamaCpp(b *testing.B) {
	text := benchText()
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			path, tok := loadGGUFFamily(b, fam)
			var ref []float64
			nodeRun := func() {
				resp := runLlama(b, llamaRequest{Model: path, Bench: &benchReq{Text: text, Rounds: 3}})
				ref = append(ref, resp.Bench.Seconds...)
			}
			nodeRun()
			lit := EncodeOptions{Literal: []Span{{0, len(text)}}}
			ids := tok.EncodeWith(text, lit) // warm-up, discarded
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for b.Loop() {
				ids = tok.EncodeWith(text, lit)
			}
			b.StopTimer()
			nodeRun()
			resp := runLlama(b, llamaRequest{TextsPlain: []string{text}, Model: path})
			if !slices.Equal(ids, resp.IDsPlain[0]) {
				b.Fatalf("ids of the 1 MB text differ from llama.cpp")
			}
			var sum float64
			for _, s := range ref {
				sum += s
			}
			b.ReportMetric(float64(len(text))/1e6/(sum/float64(len(ref))), "llamacpp-MB/s")
		})
	}
}
