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

// testTokenizers loads the two reference tokenizers once per test binary.
func testTokenizers(t testing.TB) map[string]*Tokenizer {
	t.Helper()
	loadOnce.Do(func() {
		loaded = map[string]*Tokenizer{}
		for _, name := range []string{"qwen3", "llama3", "llama2"} {
			tok, err := Load(filepath.Join("testdata", name))
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
