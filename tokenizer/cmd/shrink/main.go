// Command shrink cuts a byte-level BPE tokenizer (Hugging Face
// tokenizer.json) down to the tokens a corpus needs, so that the corpus
// tokenizes to exactly the same token strings as with the full tokenizer
// while the vocabulary, and with it a model's embedding and LM head, is a
// few thousand rows instead of 151,936. It writes the wordprob testbed's
// tokenizer (docs/results/transfer/TESTBED.md): the real Qwen3 BPE reduced
// to what the wordprob task's text uses.
//
//	go run ./tokenizer/cmd/shrink                       # rewrites assets/wordprob-qwen3's tokenizer files
//	go run ./tokenizer/cmd/shrink --out DIR --per-level 500
//
// What is kept:
//
//   - the 256 byte-level symbols, so any text still encodes (each byte
//     falls back to its own token) and decode(encode(x)) == x;
//   - every token the full tokenizer produces on the corpus;
//   - every intermediate token BPE forms on the way to one of those (for a
//     kept token t, BPE run on t's symbols alone reaches t through the same
//     merges as in context), recursively;
//   - every added token (Qwen3's 26: <|endoftext|>, <|im_start|>,
//     <|im_end|>, <think>, </think>, ...), so the chat template's markup is
//     one token each, as in the full tokenizer;
//   - every merge whose two parts and result are all kept, in the original
//     rank order.
//
// Why that reproduces the full tokenizer on the corpus: on a word of the
// corpus, every state the full BPE passes through holds kept tokens only,
// the merge it applies (the lowest-ranked applicable one) is kept, and any
// kept merge applicable there is a full merge too, of no lower rank; so the
// reduced BPE applies the same merge, and stops where the full one stops.
// The normalizer, pre-tokenizer, post-processor and decoder are copied
// unchanged. Ids are renumbered 0..N-1 in the original order (the byte
// symbols keep 0..255), added tokens after the model's vocabulary.
// tokenizer_config.json is copied with its added_tokens_decoder renumbered
// (the chat template and the special token names are unchanged).
//
// The corpus (--per-level problems of each wordprob type and level, plus
// --corpus files): each problem's prompt rendered with Qwen3's template
// (enable_thinking false and true), ChatML and no template, its solution
// (a random solution path), and the whole conversation with the solution
// and <|im_end|>.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/tokenizer"
)

// DefaultOut is where the wordprob testbed's model directory lives.
const DefaultOut = "assets/wordprob-qwen3"

// DefaultPerLevel and DefaultSeed make the committed tokenizer.
const (
	DefaultPerLevel = 300
	DefaultSeed     = 1
)

func main() {
	from := flag.String("from", "tokenizer/testdata/qwen3", "the full tokenizer's directory (tokenizer.json or tokenizer.json.gz, tokenizer_config.json)")
	out := flag.String("out", DefaultOut, "directory to write tokenizer.json and tokenizer_config.json into (created)")
	perLevel := flag.Int("per-level", DefaultPerLevel, "wordprob problems per (type, level) in the corpus")
	seed := flag.Uint64("seed", DefaultSeed, "seed of the corpus' problems")
	var extra []string
	flag.Func("corpus", "a text file whose whole text joins the corpus (repeatable)", func(s string) error {
		extra = append(extra, s)
		return nil
	})
	flag.Parse()
	texts, err := WordProbCorpus(*from, *perLevel, *seed)
	if err != nil {
		fail(err)
	}
	for _, f := range extra {
		b, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		texts = append(texts, string(b))
	}
	res, err := Shrink(*from, texts)
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "tokenizer.json"), res.TokenizerJSON, 0o644); err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "tokenizer_config.json"), res.ConfigJSON, 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("%s: %d tokens (%d in the model's vocabulary: 256 bytes, %d seen in %d texts, %d formed on the way; %d added), %d merges\n",
		*out, res.Vocab, res.ModelVocab, res.Seen, len(texts), res.Intermediate, res.Added, res.Merges)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "shrink:", err)
	os.Exit(1)
}

// WordProbCorpus is the wordprob task's text: perLevel problems of each
// type and level (drawn with seed), each as its prompt under Qwen3's
// template with thinking off and on, ChatML and none, its solution, and the
// whole conversation ending in <|im_end|>. fullDir is the tokenizer the
// templated task is built with.
func WordProbCorpus(fullDir string, perLevel int, seed uint64) ([]string, error) {
	variants := []map[string]any{
		{"tokenizer": fullDir},
		{"tokenizer": fullDir, "enable_thinking": true},
		{"tokenizer": fullDir, "chat_template": "chatml"},
		{"tokenizer": fullDir, "chat_template": "none"},
	}
	var texts []string
	for vi, v := range variants {
		probs, err := WordProbProblems(v, perLevel, seed+uint64(vi))
		if err != nil {
			return nil, err
		}
		for _, p := range probs {
			texts = append(texts, p.Prompt, p.Solution, p.Prompt+p.Solution+"<|im_end|>\n")
		}
	}
	return texts, nil
}

// WordProbProblems draws training problems (random solution paths) from
// the wordprob task of every type and level, configured with extra keys,
// until it has n of each (type, level), and returns those.
func WordProbProblems(extra map[string]any, n int, seed uint64) ([]core.Problem, error) {
	m := map[string]any{"name": "wordprob", "train_max_level": tasks.MaxWordProbLevel, "eval_n": 24, "eval_hard_n": 0}
	for k, v := range extra {
		m[k] = v
	}
	task, err := tasks.New(core.NewParams("task", m))
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x736872696e6b))
	count := map[string]int{}
	need := len(tasks.WordProbTypes) * (tasks.MaxWordProbLevel - tasks.MinWordProbLevel + 1)
	var out []core.Problem
	for full := 0; full < need; {
		for _, p := range task.SampleTrain(rng, 64) {
			k := strings.Join(strings.Split(p.ID, "/")[1:3], "/") // type/Llevel
			if count[k] < n {
				out = append(out, p)
				if count[k]++; count[k] == n {
					full++
				}
			}
		}
	}
	return out, nil
}

// Result is a reduced tokenizer: its files and counts.
type Result struct {
	TokenizerJSON, ConfigJSON []byte
	Vocab                     int // all ids: the model's vocabulary and the added tokens
	ModelVocab                int // the BPE model's vocabulary
	Seen                      int // model tokens the corpus tokenizes to, bytes excluded
	Intermediate              int // tokens kept only as steps to others
	Added                     int
	Merges                    int
}

// fullFile is the part of tokenizer.json Shrink reads.
type fullFile struct {
	AddedTokens []map[string]any `json:"added_tokens"`
	Model       struct {
		Type   string            `json:"type"`
		Vocab  map[string]int32  `json:"vocab"`
		Merges []json.RawMessage `json:"merges"`
	} `json:"model"`
}

// Shrink reduces the byte-level BPE tokenizer in fullDir to the tokens
// texts need (see the package comment).
func Shrink(fullDir string, texts []string) (*Result, error) {
	tok, err := tokenizer.Load(fullDir)
	if err != nil {
		return nil, err
	}
	raw, _, err := tokenizer.ReadJSON(filepath.Join(fullDir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %v", err)
	}
	var full fullFile
	if err := json.Unmarshal(raw, &full); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %v", err)
	}
	if full.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model.type %q, want BPE", full.Model.Type)
	}
	var modelFields map[string]json.RawMessage
	if err := json.Unmarshal(top["model"], &modelFields); err != nil {
		return nil, err
	}
	for _, k := range []string{"ignore_merges", "byte_fallback"} {
		if v, ok := modelFields[k]; ok && string(v) != "false" {
			return nil, fmt.Errorf("tokenizer.json: model.%s %s is not supported", k, v)
		}
	}
	merges := make([][2]string, len(full.Model.Merges))
	rank := map[[2]string]int{}
	for i, m := range full.Model.Merges {
		var pair [2]string
		var s string
		if json.Unmarshal(m, &pair) != nil {
			if err := json.Unmarshal(m, &s); err != nil {
				return nil, fmt.Errorf("model.merges[%d]: %v", i, err)
			}
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return nil, fmt.Errorf("model.merges[%d] %q: not \"a b\"", i, s)
			}
			pair = [2]string{a, b}
		}
		merges[i] = pair
		if _, dup := rank[pair]; !dup {
			rank[pair] = i
		}
	}
	vocab := full.Model.Vocab
	addedIDs := map[int32]bool{}
	for _, a := range full.AddedTokens {
		addedIDs[int32(a["id"].(float64))] = true
	}

	keep := map[string]bool{}
	for _, r := range byteLevelAlphabet() {
		if _, ok := vocab[string(r)]; !ok {
			return nil, fmt.Errorf("tokenizer.json: the vocabulary lacks the byte-level symbol %q: not a byte-level BPE", string(r))
		}
		keep[string(r)] = true
	}
	seen := map[string]bool{}
	for _, text := range texts {
		for _, id := range tok.Encode(text) {
			if addedIDs[id] {
				continue
			}
			s, ok := tok.IDToToken(id)
			if !ok {
				return nil, fmt.Errorf("id %d has no token", id)
			}
			seen[s] = true
		}
	}
	nSeen := 0
	formed := map[string]bool{}
	for s := range seen {
		if !keep[s] {
			nSeen++
		}
		steps, err := bpeSteps(s, rank)
		if err != nil {
			return nil, err
		}
		for _, st := range steps {
			formed[st] = true
		}
	}
	nInter := 0
	for s := range formed {
		if !seen[s] && !keep[s] {
			nInter++
		}
		keep[s] = true
	}
	for s := range seen {
		keep[s] = true
	}

	// Renumber in the original order.
	kept := make([]string, 0, len(keep))
	for s := range keep {
		if _, ok := vocab[s]; !ok {
			return nil, fmt.Errorf("token %q is not in the vocabulary", s)
		}
		kept = append(kept, s)
	}
	slices.SortFunc(kept, func(a, b string) int { return int(vocab[a]) - int(vocab[b]) })
	newID := map[string]int{}
	for i, s := range kept {
		newID[s] = i
	}
	var keptMerges [][2]string
	for _, m := range merges {
		if keep[m[0]] && keep[m[1]] && keep[m[0]+m[1]] {
			keptMerges = append(keptMerges, m)
		}
	}
	added := slices.Clone(full.AddedTokens)
	slices.SortFunc(added, func(a, b map[string]any) int { return int(a["id"].(float64)) - int(b["id"].(float64)) })
	addedNew := map[string]int{} // old id (decimal) -> new id
	for i, a := range added {
		c := map[string]any{}
		for k, v := range a {
			c[k] = v
		}
		old := int(a["id"].(float64))
		c["id"] = len(kept) + i
		addedNew[strconv.Itoa(old)] = len(kept) + i
		added[i] = c
	}

	// tokenizer.json, in Hugging Face's key order, vocab in id order.
	var b bytes.Buffer
	b.WriteString("{\n")
	order := []string{"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model"}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range top {
			if !yield(k) {
				return
			}
		}
	}) {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	first := true
	field := func(k string, v []byte) {
		if !first {
			b.WriteString(",\n")
		}
		first = false
		kb, _ := marshal(k)
		b.WriteString("  ")
		b.Write(kb)
		b.WriteString(": ")
		b.Write(v)
	}
	for _, k := range order {
		v, ok := top[k]
		if !ok {
			continue
		}
		switch k {
		case "added_tokens":
			var ab bytes.Buffer
			ab.WriteString("[")
			for i, a := range added {
				if i > 0 {
					ab.WriteString(",")
				}
				ab.WriteString("\n    ")
				ab.Write(orderedObject(a, []string{"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"}))
			}
			ab.WriteString("\n  ]")
			field(k, ab.Bytes())
		case "model":
			field(k, writeModel(modelFields, kept, keptMerges))
		default:
			var compact bytes.Buffer
			if err := json.Compact(&compact, v); err != nil {
				return nil, err
			}
			field(k, compact.Bytes())
		}
	}
	b.WriteString("\n}\n")

	cfg, err := renumberConfig(fullDir, addedNew)
	if err != nil {
		return nil, err
	}
	return &Result{TokenizerJSON: b.Bytes(), ConfigJSON: cfg, Vocab: len(kept) + len(added), ModelVocab: len(kept),
		Seen: nSeen, Intermediate: nInter, Added: len(added), Merges: len(keptMerges)}, nil
}

// bpeSteps runs BPE on the symbols (runes) of token t alone and returns
// every token it forms, t last; an error when it does not end at t.
func bpeSteps(t string, rank map[[2]string]int) ([]string, error) {
	var syms []string
	for _, r := range t {
		syms = append(syms, string(r))
	}
	var formed []string
	for len(syms) > 1 {
		best, at := -1, -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := rank[[2]string{syms[i], syms[i+1]}]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		m := syms[at] + syms[at+1]
		formed = append(formed, m)
		syms = append(syms[:at+1], syms[at+2:]...)
		syms[at] = m
	}
	if len(syms) != 1 || syms[0] != t {
		return nil, fmt.Errorf("BPE on %q alone ends at %q, not the token", t, syms)
	}
	return formed, nil
}

// writeModel is the model object: the original's fields in their order
// (type, dropout, unk_token, ...), vocab and merges replaced.
func writeModel(fields map[string]json.RawMessage, kept []string, merges [][2]string) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	order := []string{"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges"}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(order, k) && k != "vocab" && k != "merges" {
			order = append(order, k)
		}
	}
	for _, k := range order {
		if v, ok := fields[k]; ok {
			kb, _ := marshal(k)
			fmt.Fprintf(&b, "\n    %s: %s,", kb, v)
		}
	}
	b.WriteString("\n    \"vocab\": {")
	for i, s := range kept {
		if i > 0 {
			b.WriteString(",")
		}
		sb, _ := marshal(s)
		fmt.Fprintf(&b, "\n      %s: %d", sb, i)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, m := range merges {
		if i > 0 {
			b.WriteString(",")
		}
		mb, _ := marshal(m)
		b.WriteString("\n      ")
		b.Write(mb)
	}
	b.WriteString("\n    ]\n  }")
	return b.Bytes()
}

// orderedObject writes m with keys in order first, then the rest sorted.
func orderedObject(m map[string]any, order []string) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	keys := slices.Clone(order)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	n := 0
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		if n > 0 {
			b.WriteString(", ")
		}
		n++
		kb, _ := marshal(k)
		vb, _ := marshal(v)
		b.Write(kb)
		b.WriteString(": ")
		b.Write(vb)
	}
	b.WriteString("}")
	return b.Bytes()
}

// renumberConfig is fullDir/tokenizer_config.json with the keys of
// added_tokens_decoder (old ids) mapped through ids; every other field is
// kept, in its order.
func renumberConfig(fullDir string, ids map[string]int) ([]byte, error) {
	path := filepath.Join(fullDir, "tokenizer_config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Walk the top-level object in order, rewriting added_tokens_decoder.
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("%s: not a JSON object", path)
	}
	var b bytes.Buffer
	b.WriteString("{")
	n := 0
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		k := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if k == "added_tokens_decoder" {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(v, &m); err != nil {
				return nil, fmt.Errorf("%s: added_tokens_decoder: %v", path, err)
			}
			olds := slices.Collect(func(yield func(string) bool) {
				for k := range m {
					if !yield(k) {
						return
					}
				}
			})
			slices.SortFunc(olds, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
			var ab bytes.Buffer
			ab.WriteString("{")
			for i, old := range olds {
				id, ok := ids[old]
				if !ok {
					return nil, fmt.Errorf("%s: added_tokens_decoder names id %s, which tokenizer.json's added_tokens lacks", path, old)
				}
				if i > 0 {
					ab.WriteString(",")
				}
				var c bytes.Buffer
				if err := json.Compact(&c, m[old]); err != nil {
					return nil, err
				}
				fmt.Fprintf(&ab, "\n    \"%d\": %s", id, c.Bytes())
			}
			ab.WriteString("\n  }")
			v = ab.Bytes()
		} else {
			var c bytes.Buffer
			if err := json.Compact(&c, v); err != nil {
				return nil, err
			}
			v = c.Bytes()
		}
		if n > 0 {
			b.WriteString(",")
		}
		n++
		kb, _ := marshal(k)
		fmt.Fprintf(&b, "\n  %s: %s", kb, v)
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

// byteLevelAlphabet is GPT-2's byte-to-rune table: the rune that stands
// for each byte in a byte-level vocabulary.
func byteLevelAlphabet() [256]rune {
	var t [256]rune
	next := rune(0x100)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = next
			next++
		}
	}
	return t
}

// marshal is json.Marshal without HTML escaping ("<|im_end|>", not
// "\u003c|im_end|\u003e"), as Hugging Face writes its files.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
