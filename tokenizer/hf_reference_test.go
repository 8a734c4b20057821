package tokenizer

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seamlm/seam/internal/testmodels"
	"golang.org/x/text/unicode/norm"
)

var families = []string{testmodels.Llama3, testmodels.Qwen3, testmodels.Llama2}

// hfCache holds each family's tokenizer.json, loaded once for all tests.
var hfCache struct {
	sync.Mutex
	m map[string]*BPE
}

func loadHFFamily(t testing.TB, family string) *BPE {
	t.Helper()
	dir := testmodels.TokenizerDir(t, family)
	hfCache.Lock()
	defer hfCache.Unlock()
	if tok, ok := hfCache.m[family]; ok {
		return tok
	}
	tok, err := LoadHF(dir)
	if err != nil {
		t.Fatalf("LoadHF(%s): %v", dir, err)
	}
	if hfCache.m == nil {
		hfCache.m = map[string]*BPE{}
	}
	hfCache.m[family] = tok
	return tok
}

type refRequest struct {
	Dir              string    `json:"dir"`
	Texts            []string  `json:"texts,omitempty"`
	AddSpecialTokens bool      `json:"add_special_tokens"`
	TextsSpecial     []string  `json:"texts_special,omitempty"`
	Decode           [][]int   `json:"decode,omitempty"`
	Bench            *benchReq `json:"bench,omitempty"`
}

type benchReq struct {
	Text   string `json:"text"`
	Rounds int    `json:"rounds"`
}

func tokDir(t testing.TB, family string) string { return testmodels.TokenizerDir(t, family) }

type refResponse struct {
	IDs        [][]int  `json:"ids"`
	IDsSpecial [][]int  `json:"ids_special"`
	Decoded    []string `json:"decoded"`
	Bench      *struct {
		Bytes   int       `json:"bytes"`
		Seconds []float64 `json:"seconds"`
	} `json:"bench"`
}

func runRef(t testing.TB, req refRequest) refResponse {
	t.Helper()
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	out := testmodels.RunNode(t, 5*time.Minute, in, "tokenize.mjs")
	var resp refResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("reference output: %v", err)
	}
	return resp
}

// TestHFMatchesReference encodes the corpus with each family's
// tokenizer.json and compares ids with @lenml/tokenizers (transformers.js),
// then decodes the reference's ids and compares text, and checks the round
// trip.
func TestHFMatchesReference(t *testing.T) {
	texts := corpus()
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			tok := loadHFFamily(t, fam)
			dir := testmodels.TokenizerDir(t, fam)
			special := texts[:20]
			ref := runRef(t, refRequest{Dir: dir, Texts: texts, TextsSpecial: special})
			// The file's BOS/EOS rules: Encode with AddBOS/AddEOS equals
			// encode(text, add_special_tokens=True).
			for i, s := range special {
				if got := tok.Encode(s, tok.AddBOS(), tok.AddEOS()); !slices.Equal(got, ref.IDsSpecial[i]) {
					t.Errorf("Encode(%q, AddBOS %v, AddEOS %v) = %v, reference with special tokens %v", s, tok.AddBOS(), tok.AddEOS(), got, ref.IDsSpecial[i])
				}
			}
			var decodeIDs [][]int
			bad := 0
			for i, s := range texts {
				got := tok.Encode(s, false, false)
				if !slices.Equal(got, ref.IDs[i]) {
					bad++
					if bad <= 10 {
						t.Errorf("Encode(%q):\n  seam %v\n  ref  %v", s, got, ref.IDs[i])
					}
				}
				decodeIDs = append(decodeIDs, ref.IDs[i])
			}
			if bad > 0 {
				t.Errorf("%d of %d strings differ", bad, len(texts))
			}
			// Prefixes of the ids of text with multi-byte characters cut
			// characters in the middle: decoding them tests the
			// replacement of ill-formed UTF-8.
			cut := 0
			for i, s := range texts {
				ids := ref.IDs[i]
				if len(ids) < 2 || utf8.RuneCountInString(s) == len(s) {
					continue
				}
				for k := 1; k < len(ids) && cut < 400; k += 1 + k/4 {
					decodeIDs = append(decodeIDs, ids[:k])
					cut++
				}
			}
			dec := runRef(t, refRequest{Dir: dir, Decode: decodeIDs})
			for i, ids := range decodeIDs {
				if got := ValidText(tok.DecodeAll(ids)); got != dec.Decoded[i] {
					t.Errorf("ValidText(DecodeAll(%v)) = %q, reference %q", ids, got, dec.Decoded[i])
				}
			}
			for _, s := range texts {
				want := s
				if tok.nfc {
					want = norm.NFC.String(s)
				}
				lit := tok.EncodeWith(s, EncodeOptions{Literal: []Span{{0, len(s)}}})
				if got := tok.DecodeAll(lit); got != want {
					t.Errorf("DecodeAll(EncodeWith(%q, all literal)) = %q", s, got)
				}
			}
			t.Logf("%d strings, ids identical to the reference: %d", len(texts), len(texts)-bad)
		})
	}
}
