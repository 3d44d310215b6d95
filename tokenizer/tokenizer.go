// Package tokenizer reads a Hugging Face tokenizer.json and encodes and decodes
// text exactly as the reference implementation does, in pure Go.
//
// Supported: byte-level BPE models (Qwen2, Qwen2.5, Qwen3, Llama-3 and files
// built the same way) with the NFC normalizer, Split pre-tokenizers whose
// regex is one of the recognised patterns, the ByteLevel pre-tokenizer and
// decoder, and added tokens matched inside the text. Anything else in the
// file is an error that names it; see docs/tokenizer.md.
//
// A model directory may ship the file gzip-compressed as tokenizer.json.gz:
// Load and LoadFile read it when tokenizer.json itself is absent (the plain
// file wins when both are there).
package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text to token ids and decodes ids to text. It is safe for
// concurrent use.
type Tokenizer struct {
	model     *bpe
	byteLevel bool       // ByteLevel pre-tokenizer and decoder; else SentencePiece-style
	norms     []normStep // the normalizer, in order
	nfc       bool       // norms include NFC
	splits    []splitStep
	added     addedMatcher
	idToToken []string // token text by id, "" for unused ids
	tokenToID map[string]int32
	idBytes   [][]byte // decoded bytes by id (SentencePiece-style: the text with '▁' as ' ')
	spByte    []int16  // SentencePiece-style: the byte of a "<0xXX>" token, else -1
	spStrip   int      // SentencePiece-style: leading spaces the decoder strips
	bos       int32
	eos       int32
	pad       int32
}

// normStep is one normalizer: NFC, Prepend(a) or Replace(a -> b).
type normStep struct {
	kind byte
	a, b string
}

const (
	normNFC byte = iota
	normPrepend
	normReplace
)

// splitStep is one Split pre-tokenizer.
type splitStep struct {
	maxDigits int    // recognised regex: digit run length; 0 for a literal
	literal   string // literal String pattern
	behavior  string
}

// Load reads dir/tokenizer.json (or, when that is absent,
// dir/tokenizer.json.gz) and, when present, dir/tokenizer_config.json for
// the BOS, EOS and PAD tokens.
func Load(dir string) (*Tokenizer, error) {
	t, err := LoadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	b, err := os.ReadFile(cfgPath)
	if os.IsNotExist(err) {
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %v", cfgPath, err)
	}
	for _, s := range []struct {
		key string
		dst *int32
	}{{"bos_token", &t.bos}, {"eos_token", &t.eos}, {"pad_token", &t.pad}} {
		raw, ok := cfg[s.key]
		if !ok {
			continue
		}
		var name string
		var obj struct {
			Content string `json:"content"`
		}
		switch {
		case string(raw) == "null":
			continue
		case json.Unmarshal(raw, &name) == nil:
		case json.Unmarshal(raw, &obj) == nil:
			name = obj.Content
		default:
			return nil, fmt.Errorf("%s: %s is neither a string nor a token object", cfgPath, s.key)
		}
		id, ok := t.TokenToID(name)
		if !ok {
			return nil, fmt.Errorf("%s: %s %q is not in the vocabulary", cfgPath, s.key, name)
		}
		*s.dst = id
	}
	return t, nil
}

// LoadFile reads a tokenizer.json. A path ending in .gz is gunzipped, and
// when path does not exist but path+".gz" does, that is read instead. The
// special ids (BOS, EOS, PAD) are absent: they are named in
// tokenizer_config.json, which Load reads.
func LoadFile(path string) (*Tokenizer, error) {
	b, path, err := ReadJSON(path)
	if err != nil {
		return nil, err // a missing file names path, the plain tokenizer.json
	}
	t, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ReadJSON returns the bytes of the tokenizer.json at path as LoadFile
// finds them (gunzipped from path, or from path+".gz" when path does not
// exist) and the file they came from; a missing file is an error naming
// path. cde-run export writes them out plain.
func ReadJSON(path string) ([]byte, string, error) {
	b, err := readFile(path)
	if errors.Is(err, os.ErrNotExist) && !strings.HasSuffix(path, ".gz") {
		if _, gzErr := os.Stat(path + ".gz"); gzErr == nil {
			path += ".gz"
			b, err = readFile(path)
		}
	}
	return b, path, err
}

// CopyFiles writes dst/tokenizer.json and dst/tokenizer_config.json from
// the tokenizer directory src, tokenizer.json plain (read as ReadJSON
// finds it, gunzipped when src has only tokenizer.json.gz), as Hugging
// Face model directories hold it.
func CopyFiles(dst, src string) error {
	tok, _, err := ReadJSON(filepath.Join(src, "tokenizer.json"))
	if err != nil {
		return err
	}
	cfg, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dst, "tokenizer.json"), tok, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "tokenizer_config.json"), cfg, 0o644)
}

// maxGunzipped bounds a tokenizer.json.gz's decompressed size, far above
// real tokenizers (tens of MB), so a corrupt or hostile file fails instead
// of filling memory.
const maxGunzipped = 1 << 30

// readFile reads path, gunzipping it when its name ends in .gz.
func readFile(path string) ([]byte, error) {
	if !strings.HasSuffix(path, ".gz") {
		return os.ReadFile(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, maxGunzipped+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxGunzipped {
		return nil, fmt.Errorf("%s: decompresses to over %d MiB: refused", path, maxGunzipped>>20)
	}
	return b, nil
}

// component is the common shape of a tokenizer.json component.
type component map[string]json.RawMessage

func (c component) typ() string {
	var s string
	_ = json.Unmarshal(c["type"], &s)
	return s
}

// str reads a string field; absent and null are "".
func (c component) str(key string) string {
	var s string
	_ = json.Unmarshal(c[key], &s)
	return s
}

// flag reads a boolean field; absent and null are false.
func (c component) flag(key string) bool {
	var v bool
	_ = json.Unmarshal(c[key], &v)
	return v
}

// isNull reports whether key is absent or null.
func (c component) isNull(key string) bool {
	raw, ok := c[key]
	return !ok || string(bytes.TrimSpace(raw)) == "null"
}

type fileJSON struct {
	AddedTokens   []addedToken `json:"added_tokens"`
	Normalizer    component    `json:"normalizer"`
	PreTokenizer  component    `json:"pre_tokenizer"`
	PostProcessor component    `json:"post_processor"`
	Decoder       component    `json:"decoder"`
	Model         component    `json:"model"`
}

type addedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

func unsupported(what, typ string) error {
	return fmt.Errorf("%s %q is not supported", what, typ)
}

func parse(b []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	t := &Tokenizer{bos: -1, eos: -1, pad: -1}
	if err := t.parseDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if err := t.parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := t.parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := parsePostProcessor(f.PostProcessor, "post_processor"); err != nil {
		return nil, err
	}
	if err := t.parseModel(f.Model); err != nil {
		return nil, err
	}
	if err := t.parseAdded(f.AddedTokens); err != nil {
		return nil, err
	}
	t.idBytes = make([][]byte, len(t.idToToken))
	if !t.byteLevel {
		t.spByte = make([]int16, len(t.idToToken))
	}
	for id, tok := range t.idToToken {
		if !t.byteLevel {
			t.spByte[id] = -1
			if b, ok := parseByteToken(tok); ok {
				t.spByte[id] = int16(b)
			}
			t.idBytes[id] = []byte(strings.ReplaceAll(tok, "▁", " "))
			continue
		}
		if raw, ok := byteLevelDecode(tok); ok {
			t.idBytes[id] = raw
		} else {
			t.idBytes[id] = []byte(tok)
		}
	}
	return t, nil
}

// parseByteToken recognises a "<0xXX>" byte-fallback token.
func parseByteToken(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range []byte(tok[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			b = b<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			b = b<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return b, true
}

// parseDecoder accepts ByteLevel, or the SentencePiece-style sequence
// Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", start, 0) of Llama-2.
func (t *Tokenizer) parseDecoder(c component) error {
	if c == nil {
		return fmt.Errorf("decoder is null; only ByteLevel and the SentencePiece-style sequence are supported")
	}
	switch typ := c.typ(); typ {
	case "ByteLevel":
		t.byteLevel = true
		return nil
	case "Sequence":
	default:
		return unsupported("decoder.type", typ)
	}
	var list []component
	if err := json.Unmarshal(c["decoders"], &list); err != nil {
		return fmt.Errorf("decoder.decoders: %v", err)
	}
	want := []string{"Replace", "ByteFallback", "Fuse", "Strip"}
	if len(list) != len(want) {
		return fmt.Errorf("decoder Sequence of %d decoders is not supported (only Replace, ByteFallback, Fuse, Strip)", len(list))
	}
	for i, d := range list {
		if d.typ() != want[i] {
			return fmt.Errorf("decoder.decoders[%d].type %q is not supported (only the sequence Replace, ByteFallback, Fuse, Strip)", i, d.typ())
		}
	}
	var pat struct{ String *string }
	_ = json.Unmarshal(list[0]["pattern"], &pat)
	if pat.String == nil || *pat.String != "▁" || list[0].str("content") != " " {
		return fmt.Errorf("decoder.decoders[0]: only Replace of the String \"▁\" by \" \" is supported")
	}
	var start, stop int
	if list[3].str("content") != " " || json.Unmarshal(list[3]["start"], &start) != nil || json.Unmarshal(list[3]["stop"], &stop) != nil || stop != 0 || start < 0 {
		return fmt.Errorf("decoder.decoders[3]: only Strip of \" \" at the start is supported")
	}
	t.spStrip = start
	return nil
}

func (t *Tokenizer) parseNormalizer(c component) error {
	if c == nil {
		return nil
	}
	list := []component{c}
	if c.typ() == "Sequence" {
		list = nil
		if err := json.Unmarshal(c["normalizers"], &list); err != nil {
			return fmt.Errorf("normalizer.normalizers: %v", err)
		}
	}
	for _, n := range list {
		switch typ := n.typ(); typ {
		case "NFC":
			t.nfc = true
			t.norms = append(t.norms, normStep{kind: normNFC})
		case "Prepend":
			t.norms = append(t.norms, normStep{kind: normPrepend, a: n.str("prepend")})
		case "Replace":
			var pat struct{ String *string }
			_ = json.Unmarshal(n["pattern"], &pat)
			if pat.String == nil || *pat.String == "" {
				return fmt.Errorf("normalizer Replace: only a non-empty String pattern is supported, not %s", n["pattern"])
			}
			t.norms = append(t.norms, normStep{kind: normReplace, a: *pat.String, b: n.str("content")})
		default:
			return unsupported("normalizer.type", typ)
		}
	}
	return nil
}

func (t *Tokenizer) parsePreTokenizer(c component) error {
	if !t.byteLevel {
		if c != nil {
			return fmt.Errorf("pre_tokenizer.type %q is not supported with the SentencePiece-style decoder (only null)", c.typ())
		}
		return nil
	}
	if c == nil {
		return fmt.Errorf("pre_tokenizer is null; a ByteLevel pre-tokenizer is required with the ByteLevel decoder")
	}
	list := []component{c}
	if c.typ() == "Sequence" {
		list = nil
		if err := json.Unmarshal(c["pretokenizers"], &list); err != nil {
			return fmt.Errorf("pre_tokenizer.pretokenizers: %v", err)
		}
	}
	for i, p := range list {
		switch typ := p.typ(); typ {
		case "Split":
			s, err := parseSplit(p)
			if err != nil {
				return err
			}
			t.splits = append(t.splits, s)
		case "ByteLevel":
			if i != len(list)-1 {
				return fmt.Errorf("pre_tokenizer: ByteLevel before another pre-tokenizer is not supported")
			}
			if p.flag("add_prefix_space") {
				return fmt.Errorf("pre_tokenizer: ByteLevel add_prefix_space true is not supported")
			}
			if p.flag("use_regex") {
				return fmt.Errorf("pre_tokenizer: ByteLevel use_regex true is not supported")
			}
			return nil
		default:
			return unsupported("pre_tokenizer.type", typ)
		}
	}
	return fmt.Errorf("pre_tokenizer: no ByteLevel pre-tokenizer; only byte-level BPE is supported")
}

func parseSplit(p component) (splitStep, error) {
	var s splitStep
	var pat struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	}
	if err := json.Unmarshal(p["pattern"], &pat); err != nil {
		return s, fmt.Errorf("pre_tokenizer Split pattern: %v", err)
	}
	switch {
	case pat.Regex != nil:
		d, ok := knownPatterns[*pat.Regex]
		if !ok {
			return s, fmt.Errorf("pre_tokenizer Split regex %q is not supported (the recognised patterns are those of Qwen2/Qwen3 and Llama-3)", *pat.Regex)
		}
		s.maxDigits = d
	case pat.String != nil && *pat.String != "":
		s.literal = *pat.String
	default:
		return s, fmt.Errorf("pre_tokenizer Split has no pattern")
	}
	if p.flag("invert") {
		return s, fmt.Errorf("pre_tokenizer Split invert true is not supported")
	}
	s.behavior = p.str("behavior")
	switch s.behavior {
	case "Isolated", "Removed", "MergedWithPrevious", "MergedWithNext":
	default:
		return s, unsupported("pre_tokenizer Split behavior", s.behavior)
	}
	return s, nil
}

// parsePostProcessor accepts the post-processors that only add special tokens
// or adjust offsets: Encode adds no special tokens and returns no offsets, so
// they leave its ids unchanged.
func parsePostProcessor(c component, where string) error {
	if c == nil {
		return nil
	}
	switch typ := c.typ(); typ {
	case "ByteLevel", "TemplateProcessing", "BertProcessing", "RobertaProcessing":
		return nil
	case "Sequence":
		var list []component
		if err := json.Unmarshal(c["processors"], &list); err != nil {
			return fmt.Errorf("%s.processors: %v", where, err)
		}
		for _, p := range list {
			if err := parsePostProcessor(p, where); err != nil {
				return err
			}
		}
		return nil
	default:
		return unsupported(where+".type", typ)
	}
}

func (t *Tokenizer) parseModel(c component) error {
	if c == nil {
		return fmt.Errorf("model is missing")
	}
	if typ := c.typ(); typ != "BPE" {
		return unsupported("model.type", typ)
	}
	if !c.isNull("dropout") {
		var d float64
		if err := json.Unmarshal(c["dropout"], &d); err != nil || d != 0 {
			return fmt.Errorf("model.dropout %s is not supported", c["dropout"])
		}
	}
	if s := c.str("continuing_subword_prefix"); s != "" {
		return fmt.Errorf("model.continuing_subword_prefix %q is not supported", s)
	}
	if s := c.str("end_of_word_suffix"); s != "" {
		return fmt.Errorf("model.end_of_word_suffix %q is not supported", s)
	}
	// byte_fallback, unk_token and fuse_unk only act on a symbol missing
	// from the vocabulary; a byte-level vocabulary has every byte (checked
	// below), so they never act.
	var vocab map[string]int32
	if err := json.Unmarshal(c["vocab"], &vocab); err != nil {
		return fmt.Errorf("model.vocab: %v", err)
	}
	m := &bpe{rawVocab: make(map[string]int32, len(vocab)), merges: map[uint64]merge{},
		ignoreMerges: c.flag("ignore_merges"), cache: map[string][]int32{}, unk: -1}
	t.tokenToID = make(map[string]int32, len(vocab))
	maxID := int32(-1)
	for tok, id := range vocab {
		if id < 0 {
			return fmt.Errorf("model.vocab: %q has negative id %d", tok, id)
		}
		t.tokenToID[tok] = id
		maxID = max(maxID, id)
		if raw, ok := byteLevelDecode(tok); ok {
			m.rawVocab[string(raw)] = id
		}
	}
	t.idToToken = make([]string, maxID+1)
	for tok, id := range vocab {
		t.idToToken[id] = tok
	}
	if t.byteLevel {
		for b := 0; b < 256; b++ {
			id, ok := vocab[string(byteToRune[b])]
			if !ok {
				return fmt.Errorf("model.vocab lacks the byte-level symbol %q for byte 0x%02x", string(byteToRune[b]), b)
			}
			m.byteID[b] = id
		}
	} else {
		m.charLevel = true
		m.vocab = vocab
		m.byteFallback = c.flag("byte_fallback")
		m.fuseUnk = c.flag("fuse_unk")
		for b := 0; b < 256; b++ {
			m.byteToken[b] = -1
			if id, ok := vocab[byteTokenName(byte(b))]; ok {
				m.byteToken[b] = id
			}
		}
		if u := c.str("unk_token"); u != "" {
			id, ok := vocab[u]
			if !ok {
				return fmt.Errorf("model.unk_token %q is not in the vocabulary", u)
			}
			m.unk = id
		}
	}
	pairs, err := parseMerges(c["merges"])
	if err != nil {
		return err
	}
	for rank, p := range pairs {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		ab, okAB := vocab[p[0]+p[1]]
		if !okA || !okB || !okAB {
			return fmt.Errorf("model.merges[%d] %q %q: a token is not in the vocabulary", rank, p[0], p[1])
		}
		k := pairKey(a, b)
		if _, dup := m.merges[k]; !dup {
			m.merges[k] = merge{rank: int32(rank), id: ab}
		}
	}
	t.model = m
	return nil
}

// parseMerges reads merges as "a b" strings or as ["a", "b"] pairs.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("model.merges: %v", err)
	}
	out := make([][2]string, len(list))
	for i, r := range list {
		var s string
		if json.Unmarshal(r, &s) == nil {
			parts := strings.Split(s, " ")
			if len(parts) != 2 {
				return nil, fmt.Errorf("model.merges[%d] %q is not two tokens separated by one space", i, s)
			}
			out[i] = [2]string{parts[0], parts[1]}
			continue
		}
		var p []string
		if err := json.Unmarshal(r, &p); err != nil || len(p) != 2 {
			return nil, fmt.Errorf("model.merges[%d] is neither \"a b\" nor [\"a\", \"b\"]", i)
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}

func (t *Tokenizer) parseAdded(list []addedToken) error {
	for _, a := range list {
		where := fmt.Sprintf("added_tokens %q", a.Content)
		switch {
		case a.Content == "":
			return fmt.Errorf("added_tokens: empty content for id %d", a.ID)
		case a.ID < 0:
			return fmt.Errorf("%s: negative id %d", where, a.ID)
		case a.SingleWord:
			return fmt.Errorf("%s: single_word true is not supported", where)
		case a.LStrip:
			return fmt.Errorf("%s: lstrip true is not supported", where)
		case a.RStrip:
			return fmt.Errorf("%s: rstrip true is not supported", where)
		case a.Normalized:
			return fmt.Errorf("%s: normalized true is not supported", where)
		}
		for int(a.ID) >= len(t.idToToken) {
			t.idToToken = append(t.idToToken, "")
		}
		t.idToToken[a.ID] = a.Content
		t.tokenToID[a.Content] = a.ID
		t.added.add(a.Content, a.ID)
	}
	t.added.finish()
	return nil
}

// addedMatcher finds added tokens in text, leftmost first and longest first
// at one position.
type addedMatcher struct {
	first  [256]bool
	byByte [256][]addedEntry
}

type addedEntry struct {
	content string
	id      int32
}

func (m *addedMatcher) add(content string, id int32) {
	c := content[0]
	m.first[c] = true
	m.byByte[c] = append(m.byByte[c], addedEntry{content, id})
}

func (m *addedMatcher) finish() {
	for i := range m.byByte {
		slices.SortStableFunc(m.byByte[i], func(a, b addedEntry) int { return len(b.content) - len(a.content) })
	}
}

// find returns the start, end and id of the first added token in s at or
// after from, or start -1.
func (m *addedMatcher) find(s string, from int) (start, end int, id int32) {
	for i := from; i < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		for _, e := range m.byByte[s[i]] {
			if strings.HasPrefix(s[i:], e.content) {
				return i, i + len(e.content), e.id
			}
		}
	}
	return -1, -1, 0
}

// Encode returns the token ids of text. No special tokens are added; the text
// of an added or special token inside text maps to that token.
func (t *Tokenizer) Encode(text string) []int32 {
	ids := make([]int32, 0, len(text)/3+1)
	pos := 0
	for pos < len(text) {
		start, end, id := t.added.find(text, pos)
		if start < 0 {
			ids = t.encodeSegment(ids, text[pos:])
			break
		}
		ids = t.encodeSegment(ids, text[pos:start])
		ids = append(ids, id)
		pos = end
	}
	return ids
}

// encodeSegment encodes text that holds no added token.
func (t *Tokenizer) encodeSegment(ids []int32, s string) []int32 {
	if s == "" {
		return ids
	}
	for _, st := range t.norms {
		switch st.kind {
		case normNFC:
			if !norm.NFC.IsNormalString(s) {
				s = norm.NFC.String(s)
			}
		case normPrepend:
			s = st.a + s
		case normReplace:
			s = strings.ReplaceAll(s, st.a, st.b)
		}
	}
	t.pretokenize(s, 0, func(word string) { ids = t.model.encodeWord(ids, word) })
	return ids
}

// pretokenize applies the Split steps from step on, calling f with each
// non-empty piece.
func (t *Tokenizer) pretokenize(s string, step int, f func(string)) {
	if s == "" {
		return
	}
	if step == len(t.splits) {
		f(s)
		return
	}
	sp := t.splits[step]
	var matches [][2]int
	if sp.maxDigits > 0 {
		start := 0
		scanSplit(s, sp.maxDigits, func(end int) {
			matches = append(matches, [2]int{start, end})
			start = end
		})
	} else {
		for i := 0; i < len(s); {
			j := strings.Index(s[i:], sp.literal)
			if j < 0 {
				break
			}
			matches = append(matches, [2]int{i + j, i + j + len(sp.literal)})
			i += j + len(sp.literal)
		}
	}
	next := func(piece string) { t.pretokenize(piece, step+1, f) }
	prev := 0
	switch sp.behavior {
	case "Isolated", "Removed":
		for _, m := range matches {
			next(s[prev:m[0]])
			if sp.behavior == "Isolated" {
				next(s[m[0]:m[1]])
			}
			prev = m[1]
		}
		next(s[prev:])
	case "MergedWithPrevious":
		for _, m := range matches {
			next(s[prev:m[1]])
			prev = m[1]
		}
		next(s[prev:])
	case "MergedWithNext":
		for _, m := range matches {
			next(s[prev:m[0]])
			prev = m[0]
		}
		next(s[prev:])
	}
}

// DecodeBytes returns the bytes that ids stand for; ids outside the
// vocabulary are skipped, as the reference does.
func (t *Tokenizer) DecodeBytes(ids []int32) []byte {
	if !t.byteLevel {
		return []byte(t.decodeSP(ids, false))
	}
	n := 0
	for _, id := range ids {
		if id >= 0 && int(id) < len(t.idBytes) {
			n += len(t.idBytes[id])
		}
	}
	out := make([]byte, 0, n)
	for _, id := range ids {
		if id >= 0 && int(id) < len(t.idBytes) {
			out = append(out, t.idBytes[id]...)
		}
	}
	return out
}

// Decode returns the text of ids. Byte sequences that are not valid UTF-8
// (a token sequence cut inside a character) become U+FFFD, one per maximal
// ill-formed subsequence, as the reference decoder does.
func (t *Tokenizer) Decode(ids []int32) string {
	if !t.byteLevel {
		return t.decodeSP(ids, true)
	}
	return lossyUTF8(t.DecodeBytes(ids))
}

// decodeSP decodes with the SentencePiece-style decoder: '▁' becomes ' ',
// runs of byte tokens become their bytes (with lossy, invalid UTF-8 in a run
// becomes U+FFFD), and leading spaces are stripped.
func (t *Tokenizer) decodeSP(ids []int32, lossy bool) string {
	var sb strings.Builder
	var run []byte
	flush := func() {
		if lossy && !utf8.Valid(run) {
			// As the reference (@huggingface/tokenizers) does: one U+FFFD per
			// maximal ill-formed subsequence. (The Rust library writes one
			// per byte of the run.)
			sb.WriteString(lossyUTF8(run))
		} else {
			sb.Write(run)
		}
		run = run[:0]
	}
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.idBytes) || t.idToToken[id] == "" {
			continue
		}
		if b := t.spByte[id]; b >= 0 {
			run = append(run, byte(b))
			continue
		}
		flush()
		sb.Write(t.idBytes[id])
	}
	flush()
	out := sb.String()
	for k := 0; k < t.spStrip && strings.HasPrefix(out, " "); k++ {
		out = out[1:]
	}
	return out
}

// lossyUTF8 replaces each maximal ill-formed subsequence of b with U+FFFD.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		r, w := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || w > 1 {
			sb.Write(b[i : i+w])
			i += w
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += ill(b[i:])
	}
	return sb.String()
}

// ill returns the length of the maximal ill-formed subsequence at the start
// of b (the longest prefix of a well-formed sequence, or 1).
func ill(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if k == 0 {
			if x < lo || x > hi {
				break
			}
		} else if x < 0x80 || x > 0xBF {
			break
		}
		n++
	}
	return n
}

// VocabSize is one more than the largest token id (added tokens included).
func (t *Tokenizer) VocabSize() int { return len(t.idToToken) }

// TokenToID returns the id of a token (its text as stored in the file:
// byte-level symbols for model tokens, plain text for added tokens).
func (t *Tokenizer) TokenToID(tok string) (int32, bool) {
	id, ok := t.tokenToID[tok]
	return id, ok
}

// IDToToken returns the stored text of token id.
func (t *Tokenizer) IDToToken(id int32) (string, bool) {
	if id < 0 || int(id) >= len(t.idToToken) || t.idToToken[id] == "" {
		return "", false
	}
	return t.idToToken[id], true
}

// BOS is the beginning-of-sequence id named by tokenizer_config.json, or -1
// when absent.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence id named by tokenizer_config.json, or -1 when
// absent.
func (t *Tokenizer) EOS() int32 { return t.eos }

// PAD is the padding id named by tokenizer_config.json, or -1 when absent.
func (t *Tokenizer) PAD() int32 { return t.pad }
