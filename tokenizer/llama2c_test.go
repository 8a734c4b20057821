package tokenizer

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seamlm/seam/internal/testmodels"
)

// llama2cCases were obtained by running llama2.c's own encode() (run.c at
// karpathy/llama2.c 350e04f, compiled with -DTESTING and a small driver that
// called build_tokenizer(tok512.bin, 512) then encode(text, bos=0, eos=0))
// on exactly these strings. Nothing in this package produced them.
var llama2cCases = []struct {
	text string
	ids  []int
}{
	{"Once upon a time", []int{403, 407, 261, 378}},
	{"", []int{}},
	{"café 日本", []int{280, 412, 431, 485, 410, 233, 154, 168, 233, 159, 175}},
	{"emoji 🦙 party 🎉", []int{344, 423, 414, 449, 417, 410, 243, 162, 169, 156, 282, 295, 413, 422, 410, 243, 162, 145, 140}},
	{"line one\nline two\n\nend", []int{278, 271, 411, 353, 411, 13, 421, 271, 411, 259, 424, 414, 13, 13, 367}},
	{"multiple   spaces  here ", []int{284, 425, 421, 413, 417, 427, 305, 410, 410, 262, 427, 412, 331, 419, 410, 281, 276, 410}},
	{"digits 0123456789 and 3.14159", []int{279, 333, 275, 419, 410, 477, 475, 479, 472, 484, 480, 490, 491, 487, 483, 269, 410, 472, 426, 475, 484, 475, 480, 483}},
	{"Lily's mom said, \"Lily, let's go to the park.\"", []int{317, 439, 419, 357, 336, 432, 313, 438, 310, 432, 278, 316, 439, 419, 298, 414, 267, 265, 282, 295, 433, 426, 436}},
	{" leading space", []int{410, 278, 411, 380, 299, 262, 427, 412, 331}},
	{"\ttab\tand ™ and hair\u200aspace", []int{410, 12, 413, 412, 430, 12, 412, 264, 410, 507, 269, 300, 315, 511, 419, 427, 412, 331}},
	{"<s> not a control </s>", []int{410, 504, 419, 505, 297, 309, 261, 280, 289, 413, 420, 414, 421, 410, 504, 492, 419, 505}},
	{"Zoë naïve façade — “quotes”", []int{410, 469, 414, 198, 174, 297, 412, 198, 178, 360, 272, 412, 198, 170, 380, 411, 410, 481, 410, 465, 456, 425, 309, 406, 466}},
	{"ab\xffcd", []int{261, 430, 258, 429, 418}},
	{"Once upon a time, there was a little girl named Lily. She loved to play outside in the park.", []int{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426}},
}

func loadTok512(t testing.TB) *SentencePiece {
	t.Helper()
	tok, err := LoadLlama2c(testmodels.Path(t, testmodels.Tok512), 512)
	if err != nil {
		t.Fatalf("LoadLlama2c: %v", err)
	}
	return tok
}

func TestTok512MatchesLlama2c(t *testing.T) {
	tok := loadTok512(t)
	if tok.VocabSize() != 512 || tok.BOS() != 1 || tok.EOS() != 2 {
		t.Fatalf("VocabSize/BOS/EOS = %d/%d/%d, want 512/1/2", tok.VocabSize(), tok.BOS(), tok.EOS())
	}
	for _, c := range llama2cCases {
		if got := tok.Encode(c.text, false, false); !slices.Equal(got, c.ids) {
			t.Errorf("Encode(%q) = %v, llama2.c gives %v", c.text, got, c.ids)
		}
		if got := tok.DecodeAll(c.ids); got != c.text {
			t.Errorf("DecodeAll(llama2.c ids of %q) = %q", c.text, got)
		}
	}
	// llama2.c with bos=1, eos=1 (same driver).
	if got := tok.Encode("Once upon a time", true, true); !slices.Equal(got, []int{1, 403, 407, 261, 378, 2}) {
		t.Errorf("Encode with BOS/EOS = %v, llama2.c gives [1 403 407 261 378 2]", got)
	}
	if got := tok.Encode("", true, true); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("Encode(\"\") with BOS/EOS = %v, llama2.c gives [1 2]", got)
	}
}

func TestTok512PiecesAndDecode(t *testing.T) {
	tok := loadTok512(t)
	// Values read from the file with a hex dump: id 403 is " Once" (score
	// -144), 410 is " ", 13 is <0x0A>, 1 is "\n<s>\n" in the file.
	if got := tok.Piece(403); got != " Once" {
		t.Errorf("Piece(403) = %q", got)
	}
	if got := tok.Score(403); got != -144 {
		t.Errorf("Score(403) = %v, want -144", got)
	}
	if got := tok.Piece(1); got != "<s>" {
		t.Errorf("Piece(1) = %q, want the trimmed \"<s>\"", got)
	}
	if got := tok.Decode(1, 403); got != "Once" {
		t.Errorf("Decode(BOS, 403) = %q, want \"Once\"", got)
	}
	if got := tok.Decode(403, 407); got != " upon" {
		t.Errorf("Decode(403, 407) = %q, want \" upon\"", got)
	}
	if got := tok.Decode(5, 13); got != "\n" {
		t.Errorf("Decode(byte piece 13) = %q, want newline", got)
	}
	types := tok.Vocab().Types
	if types[0] != TypeUnknown || types[1] != TypeControl || types[2] != TypeControl || types[3] != TypeByte || types[258] != TypeByte || types[259] != TypeNormal {
		t.Errorf("inferred types of ids 0,1,2,3,258,259 = %v %v %v %v %v %v", types[0], types[1], types[2], types[3], types[258], types[259])
	}
}

// TestTok512MatchesReference runs the naive llama2.c transcription, fed from
// an independent read of the raw file, against Encode on random strings.
func TestTok512MatchesReference(t *testing.T) {
	path := testmodels.Path(t, testmodels.Tok512)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pieces, scores, err := readRawLlama2c(data, 512)
	if err != nil {
		t.Fatal(err)
	}
	ref := newRefVocab(pieces, scores)
	tok := loadTok512(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 3000 {
		s := randomText(rng, 30)
		bos, eos := i%2 == 0, i%5 == 0
		got, want := tok.Encode(s, bos, eos), refEncode(ref, s, bos, eos)
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, reference %v", s, got, want)
		}
		if back := tok.DecodeAll(got); back != s {
			t.Fatalf("DecodeAll(Encode(%q)) = %q", s, back)
		}
	}
}

func TestLoadLlama2cWrongSizes(t *testing.T) {
	path := testmodels.Path(t, testmodels.Tok512)
	_, err := LoadLlama2c(path, 511)
	if err == nil || !strings.Contains(err.Error(), "trailing bytes after token 510") || !strings.Contains(err.Error(), path) {
		t.Errorf("vocabSize 511: error = %v, want trailing bytes after token 510 naming the file", err)
	}
	_, err = LoadLlama2c(path, 513)
	if err == nil || !strings.Contains(err.Error(), "token 512 of 513") {
		t.Errorf("vocabSize 513: error = %v, want it to name token 512", err)
	}
	// A checkpoint passed as a tokenizer is refused before being read whole.
	model := testmodels.Path(t, testmodels.Stories260K)
	if _, err := LoadLlama2c(model, 512); err == nil || !strings.Contains(err.Error(), model) {
		t.Errorf("checkpoint as tokenizer: error = %v", err)
	}
	if _, err := LoadLlama2c(filepath.Join(t.TempDir(), "missing.bin"), 512); err == nil {
		t.Error("missing file: no error")
	}
}

func TestParseLlama2cErrors(t *testing.T) {
	pieces := []string{"<unk>", "\n<s>\n", "\n</s>\n", " ", "a"}
	scores := []float32{0, 0, 0, -1, -2}
	good := buildLlama2cFile(6, pieces, scores)
	if tok, err := ParseLlama2c(good, "t.bin", 5); err != nil || tok.Piece(2) != "</s>" {
		t.Fatalf("good file: %v", err)
	}
	nan := buildLlama2cFile(6, pieces, []float32{0, 0, 0, float32(math.NaN()), 0})
	long := buildLlama2cFile(5, pieces, scores) // "\n</s>\n" is 6 bytes
	negLen := slices.Clone(good)
	copy(negLen[4+4:], []byte{0xff, 0xff, 0xff, 0xff}) // token 0's length = -1
	cases := []struct {
		name string
		data []byte
		n    int
		want string
	}{
		{"short header", good[:3], 5, "too short"},
		{"negative max", buildLlama2cFile(-1, pieces, scores), 5, "max_token_length -1"},
		{"tiny vocab", good, 2, "vocabulary size 2"},
		{"fewer tokens", good, 6, "token 5 of 6"},
		{"trailing", append(slices.Clone(good), 1, 2, 3), 5, "3 trailing bytes after token 4"},
		{"more tokens", good, 4, "trailing bytes after token 3"},
		{"cut record", good[:len(good)-1], 5, "token 4 of 5: length 1 at offset"},
		{"cut header", good[:len(good)-6], 5, "token 4 of 5: file ends"},
		{"too long", long, 5, "token 2 of 5: length 6 outside [0, max_token_length 5]"},
		{"negative length", negLen, 5, "token 0 of 5: length -1"},
		{"nan", nan, 5, "token 3 of 5: score NaN"},
	}
	for _, c := range cases {
		_, err := ParseLlama2c(c.data, "t.bin", c.n)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "t.bin: ") {
			t.Errorf("%s: error = %v, want \"t.bin: ...%s...\"", c.name, err, c.want)
		}
	}
}

func FuzzParseLlama2c(f *testing.F) {
	pieces := []string{"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "<0x41>", "▁b"}
	f.Add(buildLlama2cFile(6, pieces, []float32{0, 0, 0, -1, -2, 0, -3}), uint16(7))
	f.Add(buildLlama2cFile(1, []string{"", "", ""}, []float32{0, 0, 0}), uint16(3))
	f.Add([]byte{}, uint16(0))
	if data, err := os.ReadFile(filepath.Join(testmodels.Root(), "..", "shared", "models", testmodels.Tok512)); err == nil {
		f.Add(data, uint16(512))
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint16) {
		tok, err := ParseLlama2c(data, "fuzz.bin", int(n))
		if err != nil {
			return
		}
		if tok.VocabSize() != int(n) {
			t.Fatalf("VocabSize %d, want %d", tok.VocabSize(), n)
		}
		for _, id := range tok.Encode("Once upon a time é\xff", true, true) {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
	})
}

// FuzzEncode checks the round trip, the BOS/EOS framing and, for short
// inputs, agreement with the naive reference, on tok512.bin when present and
// on a synthetic vocabulary otherwise.
func FuzzEncode(f *testing.F) {
	for _, c := range llama2cCases {
		f.Add(c.text)
	}
	f.Add("\xe6\x97")
	f.Add("<0x41> ▁x")
	var pieces []string
	var scores []float32
	data, err := os.ReadFile(filepath.Join(testmodels.Root(), "..", "shared", "models", testmodels.Tok512))
	if err == nil {
		pieces, scores, err = readRawLlama2c(data, 512)
	}
	if err != nil {
		pieces, scores = syntheticRaw(rand.New(rand.NewPCG(5, 6)), 100)
	}
	tok, err := New(Vocab{Pieces: pieces, Scores: scores, BOS: 1, EOS: 2})
	if err != nil {
		f.Fatal(err)
	}
	ref := newRefVocab(pieces, scores)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, false, false)
		if back := tok.DecodeAll(ids); back != s {
			t.Fatalf("DecodeAll(Encode(%q)) = %q", s, back)
		}
		framed := tok.Encode(s, true, true)
		if !slices.Equal(framed, append(append([]int{1}, ids...), 2)) {
			t.Fatalf("Encode(%q, bos, eos) = %v, want BOS %v EOS", s, framed, ids)
		}
		if len(s) <= 300 {
			if want := refEncode(ref, s, false, false); !slices.Equal(ids, want) {
				t.Fatalf("Encode(%q) = %v, reference %v", s, ids, want)
			}
		}
	})
}

func BenchmarkEncodeTok512(b *testing.B) {
	tok := loadTok512(b)
	var sb strings.Builder
	for sb.Len() < 100_000 {
		sb.WriteString(llama2cCases[len(llama2cCases)-1].text)
		sb.WriteString(" Lily's mom said, \"Lily, let's go to the park.\"\n")
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, true, false)
	}
}
