package chat

import (
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
)

// BenchmarkRender measures a full Render (the prompt plus the marked
// rendering for Literal spans) of a four-message conversation.
func BenchmarkRender(b *testing.B) {
	for _, fam := range []string{testmodels.Llama3, testmodels.Qwen3} {
		tmpl, err := Load(testmodels.TokenizerDir(b, fam))
		if err != nil {
			b.Fatal(err)
		}
		msgs := []Message{{"system", "You are helpful."}, {"user", "Hi there"}, {"assistant", "<think>\nhm\n</think>\n\nHello!"}, {"user", "Tell me a joke."}}
		b.Run(fam, func(b *testing.B) {
			for b.Loop() {
				if _, err := tmpl.Render(msgs, Options{AddGenerationPrompt: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fam+"/text-only", func(b *testing.B) {
			vars := tmpl.variables(Options{AddGenerationPrompt: true})
			for b.Loop() {
				if _, err := tmpl.execute(msgs, vars); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
