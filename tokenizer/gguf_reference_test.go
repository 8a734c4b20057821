package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seamlm/seam/gguf"
	"github.com/seamlm/seam/internal/testmodels"
	"golang.org/x/text/unicode/norm"
)

// writeVocabGGUF writes a GGUF file that holds v and the hyper-parameters of
// a one-layer llama model but no tensors: enough for llama.cpp to load its
// vocabulary (vocab_only) and for Seam's GGUF reader.
func writeVocabGGUF(t testing.TB, v *GGUFVocab, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := gguf.NewWriter(f, 3)
	if err != nil {
		t.Fatal(err)
	}
	kvs := []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"},
		{"general.name", "seam vocabulary test"},
		{"llama.context_length", uint32(4096)},
		{"llama.embedding_length", uint32(64)},
		{"llama.block_count", uint32(1)},
		{"llama.feed_forward_length", uint32(128)},
		{"llama.attention.head_count", uint32(4)},
		{"llama.attention.head_count_kv", uint32(4)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.dimension_count", uint32(16)},
		{"llama.vocab_size", uint32(len(v.Tokens))},
	}
	for _, kv := range kvs {
		if err := w.Add(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.AddTo(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// ggufCache holds, per family, the GGUF file written from its
// tokenizer.json and Seam's tokenizer loaded from it.
var ggufCache struct {
	sync.Mutex
	dir  string
	path map[string]string
	tok  map[string]Tokenizer
}

func loadGGUFFamily(t testing.TB, family string) (string, Tokenizer) {
	t.Helper()
	dir := testmodels.TokenizerDir(t, family)
	ggufCache.Lock()
	defer ggufCache.Unlock()
	if tok, ok := ggufCache.tok[family]; ok {
		return ggufCache.path[family], tok
	}
	if ggufCache.dir == "" {
		d, err := os.MkdirTemp("", "seam-tok-gguf-")
		if err != nil {
			t.Fatal(err)
		}
		ggufCache.dir = d
		ggufCache.path, ggufCache.tok = map[string]string{}, map[string]Tokenizer{}
	}
	v, err := ReadHFVocab(dir)
	if err != nil {
		t.Fatalf("ReadHFVocab(%s): %v", dir, err)
	}
	path := filepath.Join(ggufCache.dir, family+".gguf")
	writeVocabGGUF(t, v, path)
	tok, err := LoadGGUF(path)
	if err != nil {
		t.Fatalf("LoadGGUF(%s): %v", path, err)
	}
	ggufCache.path[family], ggufCache.tok[family] = path, tok
	return path, tok
}

func TestMain(m *testing.M) {
	code := m.Run()
	if ggufCache.dir != "" {
		os.RemoveAll(ggufCache.dir)
	}
	os.Exit(code)
}

type llamaRequest struct {
	Model      string    `json:"model"`
	Texts      []string  `json:"texts,omitempty"`
	Special    bool      `json:"special"`
	TextsPlain []string  `json:"texts_plain,omitempty"`
	Detokenize [][]int   `json:"detokenize,omitempty"`
	Bench      *benchReq `json:"bench,omitempty"`
}

type llamaResponse struct {
	IDs      [][]int  `json:"ids"`
	IDsPlain [][]int  `json:"ids_plain"`
	Text     []string `json:"text"`
	Bench    *struct {
		Bytes   int       `json:"bytes"`
		Seconds []float64 `json:"seconds"`
	} `json:"bench"`
}

func runLlama(t testing.TB, req llamaRequest) llamaResponse {
	t.Helper()
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	out := testmodels.RunNode(t, 5*time.Minute, in, "tokenize-llamacpp.mjs")
	var resp llamaResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("llama.cpp reference output: %v\n%s", err, out)
	}
	return resp
}

// TestGGUFMatchesLlamaCpp writes each family's vocabulary to a GGUF file
// (ReadHFVocab, GGUFVocab.AddTo), loads it back with Seam's GGUF reader and
// with llama.cpp, and compares the ids of the corpus with special tokens
// parsed (llama.cpp's parse_special, Seam's Encode). Decoding is compared for
// qwen3 and llama2; llama.cpp's llama-bpe detokenizer removes spaces before
// punctuation (clean_spaces), which Seam does not do, so that text is not
// comparable for llama3.
func TestGGUFMatchesLlamaCpp(t *testing.T) {
	texts := corpus()
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			path, tok := loadGGUFFamily(t, fam)
			var seam [][]int
			for _, s := range texts {
				seam = append(seam, tok.Encode(s, false, false))
			}
			req := llamaRequest{Model: path, Texts: texts, Special: true, TextsPlain: texts}
			if fam != testmodels.Llama3 {
				req.Detokenize = seam
			}
			ref := runLlama(t, req)
			bad := 0
			for i, s := range texts {
				if !slices.Equal(seam[i], ref.IDs[i]) {
					bad++
					if bad <= 10 {
						t.Errorf("Encode(%q):\n  seam      %v\n  llama.cpp %v", s, seam[i], ref.IDs[i])
					}
				}
			}
			badPlain := 0
			for i, s := range texts {
				got := tok.EncodeWith(s, EncodeOptions{Literal: []Span{{0, len(s)}}})
				if !slices.Equal(got, ref.IDsPlain[i]) {
					badPlain++
					if badPlain <= 10 {
						t.Errorf("EncodeWith(%q, all literal):\n  seam      %v\n  llama.cpp %v (parse_special false)", s, got, ref.IDsPlain[i])
					}
				}
			}
			for i, want := range ref.Text {
				ids := seam[i]
				if fam == testmodels.Llama2 && len(ids) > 0 && tok.(*SentencePiece).Type(ids[0]) == TypeControl {
					continue // llama.cpp keeps the space after a leading control token; Seam drops it as at the start of text
				}
				if got := ValidText(tok.DecodeAll(ids)); got != want {
					t.Errorf("DecodeAll(ids of %q) = %q, llama.cpp %q", texts[i], got, want)
				}
			}
			t.Logf("%d strings, ids identical to llama.cpp: %d with special tokens parsed, %d as literal text", len(texts), len(texts)-bad, len(texts)-badPlain)

			// The converter: llama.cpp reading the GGUF that ReadHFVocab
			// wrote must give the ids that Hugging Face (@lenml) gives from
			// the tokenizer.json itself, independently of Seam's tokenizers.
			// Two rules make the engines differ by design, so those strings
			// are left out (and counted): where the tokenizer.json normalises
			// to NFC (Qwen) and llama.cpp does not, only NFC-stable strings
			// compare; and llama.cpp makes every token spelled like an
			// end-of-generation marker a control token whatever its type in
			// the file (llama-vocab.cpp, special_eog_ids), so text containing
			// such a token, plain vocabulary in the tokenizer.json (Qwen's
			// "</s>"), is split differently.
			hfTok := loadHFFamily(t, fam)
			promoted := promotedTokens(tok.(typedTokenizer), hfTok)
			for _, p := range promoted {
				if !eogTexts[p] {
					t.Errorf("llama.cpp reads %q as a control token although the tokenizer.json has it as plain vocabulary, and it is not one of the end-of-generation texts llama.cpp promotes", p)
				}
			}
			var same []string
			var cppIDs [][]int
			notNFC, withPromoted := 0, 0
			for i, s := range texts {
				switch {
				case hfTok.nfc && norm.NFC.String(s) != s:
					notNFC++
				case slices.ContainsFunc(promoted, func(p string) bool { return strings.Contains(s, p) }):
					withPromoted++
				default:
					same = append(same, s)
					cppIDs = append(cppIDs, ref.IDs[i])
				}
			}
			if len(same) < len(texts)*9/10 { // measured: 664, 639 and 664 of 664
				t.Errorf("only %d of %d strings left to compare", len(same), len(texts))
			}
			hf := runRef(t, refRequest{Dir: testmodels.TokenizerDir(t, fam), Texts: same})
			badConv := 0
			for i, s := range same {
				if !slices.Equal(cppIDs[i], hf.IDs[i]) {
					badConv++
					if badConv <= 10 {
						t.Errorf("%q:\n  llama.cpp (GGUF from ReadHFVocab) %v\n  @lenml (tokenizer.json)         %v", s, cppIDs[i], hf.IDs[i])
					}
				}
			}
			if badConv > 0 {
				t.Errorf("%d of %d strings: llama.cpp on the converted GGUF differs from @lenml on the tokenizer.json", badConv, len(same))
			}
			t.Logf("llama.cpp on the converted GGUF gives @lenml's ids for %d of %d strings compared; left out: %d not NFC-stable, %d containing a token llama.cpp promotes to control %q",
				len(same)-badConv, len(same), notNFC, withPromoted, promoted)
		})
	}
}

type typedTokenizer interface {
	Type(id int) int32
	Piece(id int) string
}

// promotedTokens lists the texts of the tokens that gguf (llama.cpp's rules)
// treats as control tokens while hf (the tokenizer.json) has them as plain
// vocabulary, neither special nor added.
func promotedTokens(gguf typedTokenizer, hf *BPE) []string {
	var out []string
	for id := range hf.size {
		if gguf.Type(id) == TypeControl && hf.Type(id) != TypeControl && hf.Type(id) != TypeUserDefined {
			out = append(out, gguf.Piece(id))
		}
	}
	return out
}
