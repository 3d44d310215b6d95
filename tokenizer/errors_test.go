package tokenizer

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyFile is a minimal byte-level BPE tokenizer.json: the 256 byte symbols,
// the merge "a b" -> "ab", and one added token.
func tinyFile() map[string]any {
	vocab := map[string]any{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	vocab["ab"] = 256
	return map[string]any{
		"added_tokens": []any{map[string]any{"id": 257, "content": "<x>", "special": true,
			"single_word": false, "lstrip": false, "rstrip": false, "normalized": false}},
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patternQwen2}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel"},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{"a b"},
			"dropout": nil, "continuing_subword_prefix": "", "end_of_word_suffix": "", "byte_fallback": false},
	}
}

func loadTiny(t *testing.T, f map[string]any) (*Tokenizer, error) {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadFile(p)
}

func TestTinyFile(t *testing.T) {
	tok, err := loadTiny(t, tinyFile())
	if err != nil {
		t.Fatal(err)
	}
	// "ab" merges, the added token is matched, other bytes are single tokens.
	got := tok.Encode("ab<x>ba")
	want := []int32{256, 257, 'b', 'a'}
	if len(got) != len(want) {
		t.Fatalf("Encode = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("Encode = %v, want %v", got, want)
		}
	}
	if tok.BOS() != -1 || tok.EOS() != -1 || tok.PAD() != -1 {
		t.Error("LoadFile reported special ids")
	}
	// Merges in the pair form load the same.
	f := tinyFile()
	f["model"].(map[string]any)["merges"] = []any{[]any{"a", "b"}}
	tok2, err := loadTiny(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if g := tok2.Encode("ab"); len(g) != 1 || g[0] != 256 {
		t.Errorf("pair-form merges: Encode(ab) = %v", g)
	}
}

// TestUnsupportedNamed checks that each unsupported part is an error naming it.
func TestUnsupportedNamed(t *testing.T) {
	set := func(path []string, v any) map[string]any {
		f := tinyFile()
		m := f
		for _, k := range path[:len(path)-1] {
			m = m[k].(map[string]any)
		}
		m[path[len(path)-1]] = v
		return f
	}
	seq := func(p ...any) map[string]any { return map[string]any{"type": "Sequence", "pretokenizers": p} }
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}
	split := func(kv map[string]any) map[string]any {
		s := map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patternLlama3}, "behavior": "Isolated", "invert": false}
		maps.Copy(s, kv)
		return s
	}
	added := func(flag string) map[string]any {
		a := map[string]any{"id": 257, "content": "<x>", "special": true, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false}
		a[flag] = true
		return set([]string{"added_tokens"}, []any{a})
	}
	for _, c := range []struct {
		f    map[string]any
		want string
	}{
		{set([]string{"pre_tokenizer"}, map[string]any{"type": "Whitespace"}), `pre_tokenizer.type "Whitespace" is not supported`},
		{set([]string{"pre_tokenizer"}, seq(map[string]any{"type": "Metaspace"}, bl)), `pre_tokenizer.type "Metaspace"`},
		{set([]string{"pre_tokenizer"}, seq(split(map[string]any{"pattern": map[string]any{"Regex": `\s+`}}), bl)), `Split regex "\\s+" is not supported`},
		{set([]string{"pre_tokenizer"}, seq(split(map[string]any{"invert": true}), bl)), "invert true"},
		{set([]string{"pre_tokenizer"}, seq(split(map[string]any{"behavior": "Contiguous"}), bl)), `behavior "Contiguous"`},
		{set([]string{"pre_tokenizer"}, seq(split(nil))), "no ByteLevel"},
		{set([]string{"pre_tokenizer"}, seq(bl, split(nil))), "ByteLevel before another"},
		{set([]string{"pre_tokenizer"}, map[string]any{"type": "ByteLevel", "add_prefix_space": true}), "add_prefix_space true"},
		{set([]string{"pre_tokenizer"}, map[string]any{"type": "ByteLevel", "use_regex": true}), "use_regex true"},
		{set([]string{"pre_tokenizer"}, nil), "pre_tokenizer is null"},
		{set([]string{"normalizer"}, map[string]any{"type": "NFKC"}), `normalizer.type "NFKC"`},
		{set([]string{"normalizer"}, map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "Lowercase"}}}), `normalizer.type "Lowercase"`},
		{set([]string{"decoder"}, map[string]any{"type": "Metaspace"}), `decoder.type "Metaspace"`},
		{set([]string{"decoder"}, nil), "decoder is null"},
		{set([]string{"post_processor"}, map[string]any{"type": "Mystery"}), `post_processor.type "Mystery"`},
		{set([]string{"model", "type"}, "WordPiece"), `model.type "WordPiece"`},
		{set([]string{"model", "dropout"}, 0.1), "model.dropout 0.1"},
		{set([]string{"model", "continuing_subword_prefix"}, "##"), "continuing_subword_prefix"},
		{set([]string{"model", "end_of_word_suffix"}, "</w>"), "end_of_word_suffix"},
		{set([]string{"model", "merges"}, []any{"a b c"}), "model.merges[0]"},
		{set([]string{"model", "merges"}, []any{"a zz"}), "not in the vocabulary"},
		{set([]string{"decoder"}, map[string]any{"type": "Sequence", "decoders": []any{map[string]any{"type": "Fuse"}}}), "decoder Sequence of 1 decoders"},
		{set([]string{"decoder"}, spDecoder(nil, map[string]any{"type": "ByteFallback"})), `decoder.decoders[3].type "ByteFallback"`},
		{set([]string{"decoder"}, spDecoder(map[string]any{"type": "Replace", "pattern": map[string]any{"String": "_"}, "content": " "}, nil)), "decoder.decoders[0]: only Replace"},
		{set([]string{"decoder"}, spDecoder(nil, map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 1})), "decoder.decoders[3]: only Strip"},
		{set([]string{"decoder"}, spDecoder(nil, nil)), `pre_tokenizer.type "Sequence" is not supported with the SentencePiece-style decoder`},
		{set([]string{"normalizer"}, map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " +"}, "content": "▁"}), "only a non-empty String pattern"},
		{added("lstrip"), "lstrip true"},
		{added("rstrip"), "rstrip true"},
		{added("single_word"), "single_word true"},
		{added("normalized"), "normalized true"},
	} {
		_, err := loadTiny(t, c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v; want one containing %q", err, c.want)
		}
	}
	// A vocabulary without every byte symbol is not byte-level.
	f := tinyFile()
	delete(f["model"].(map[string]any)["vocab"].(map[string]any), "Ā")
	if _, err := loadTiny(t, f); err == nil || !strings.Contains(err.Error(), "byte 0x00") {
		t.Errorf("missing byte symbol: error %v", err)
	}
}

// spDecoder is the Llama-2 decoder sequence with its Replace (index 0) or
// Strip (index 3) replaced when not nil.
func spDecoder(replace, strip map[string]any) map[string]any {
	if replace == nil {
		replace = map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "}
	}
	if strip == nil {
		strip = map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0}
	}
	return map[string]any{"type": "Sequence", "decoders": []any{replace, map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}, strip}}
}
