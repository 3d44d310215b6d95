package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
)

// minTemperature is the lowest temperature served.
const minTemperature = 1e-6

// completionRequest is a checked POST /v1/completions body.
type completionRequest struct {
	prompts     [][]int32
	n           int
	temperature float64
	maxTokens   int
	stop        []int32 // stop_token_ids
	logprobs    bool    // logprobs given (0 or 1): return the sampled tokens' log-probs
	tokenIDs    bool    // return_tokens_as_token_ids
	seed        uint64
}

// neutral are sampling fields cde's sampler does not implement, with the
// value that leaves sampling unchanged: any other value is refused rather
// than silently ignored, since the tokens and log-probs would not be what
// the client asked for.
var neutral = []struct {
	key  string
	vals []float64
}{
	{"top_p", []float64{1}},
	{"top_k", []float64{-1, 0}},
	{"min_p", []float64{0}},
	{"presence_penalty", []float64{0}},
	{"frequency_penalty", []float64{0}},
	{"repetition_penalty", []float64{1}},
}

// allowed are the request fields the server honours or checks (a neutral
// value of a sampling field it does not implement is accepted; "user"
// changes nothing in the answer). Any other field is a 400 naming it:
// silently ignoring logit_bias, best_of, min_tokens, suffix... would answer
// something the client did not ask for.
var completionFields = fieldSet("model", "prompt", "n", "temperature", "max_tokens", "stop_token_ids", "logprobs",
	"return_tokens_as_token_ids", "seed", "stream", "echo", "ignore_eos", "stop", "user", "skip_special_tokens")

// chatFields are those of /v1/chat/completions once its own fields
// (messages, max_completion_tokens, logprobs as a flag, top_logprobs) are
// read and mapped onto the completions ones.
var chatFields = fieldSet("model", "n", "temperature", "max_tokens", "stop_token_ids", "logprobs",
	"return_tokens_as_token_ids", "seed", "stream", "ignore_eos", "stop", "user", "skip_special_tokens")

// fieldSet is the set of keys plus the neutral sampling fields.
func fieldSet(keys ...string) map[string]bool {
	set := map[string]bool{}
	for _, k := range keys {
		set[k] = true
	}
	for _, nf := range neutral {
		set[nf.key] = true
	}
	return set
}

// readCompletion reads a completions request body from r as it streams
// in and checks every field (a wrong type or an invalid value is a 400
// naming the field; so is a field it does not honour). The prompt's ids
// are counted as they arrive: a prompt longer than the model's context, or
// more prompts than a request may hold, ends the reading at once, so a
// huge body costs neither memory nor time beyond that point; so do a text
// past its limit and the other faults a bodyGuard catches. A body over
// the reader's limit (http.MaxBytesReader) is a 413.
func readCompletion(r io.Reader, m *Model, o Options) (*completionRequest, *apiError) {
	why := fmt.Sprintf("a completions request can need (for each of --max-batch %d prompts a text of up to %d bytes with every byte escaped, and 1 MiB for the other fields)",
		o.MaxRows, MaxTextBytesPerToken*m.MaxLen)
	b := newBodyReader(r, limitWhy(why, completionBodyLimit(m, o), o))
	var prompts [][]int32
	f, aerr := b.object("prompt", func() *apiError {
		var aerr *apiError
		prompts, aerr = streamPrompts(b, m, o.MaxRows)
		return aerr
	}, MaxTextBytesPerToken*m.MaxLen, textWhy(m))
	if aerr != nil {
		return nil, aerr
	}
	if prompts == nil {
		return nil, badRequest("prompt: required (a text, a list of texts, or a list of token-id lists)")
	}
	return checkCompletion(f, completionFields, prompts, m, o)
}

// textWhy says where a text's limit comes from.
func textWhy(m *Model) string {
	return fmt.Sprintf("%d per position of the model's max length %d", MaxTextBytesPerToken, m.MaxLen)
}

// checkCompletion checks the fields of a request whose prompts were read
// already; allowed are the fields the endpoint takes.
func checkCompletion(f map[string]json.RawMessage, allowed map[string]bool, prompts [][]int32, m *Model, o Options) (*completionRequest, *apiError) {
	if unknown := unknownFields(f, allowed); unknown != "" {
		return nil, badRequest("%s: not supported by this server, which refuses what it cannot honour (docs/serve.md lists the fields it takes)", unknown)
	}
	req := &completionRequest{}
	var aerr *apiError
	for _, key := range []string{"model", "user"} {
		if aerr = nameField(f, key); aerr != nil {
			return nil, aerr
		}
	}
	req.prompts = prompts
	n, aerr := intField(f, "n", 1)
	if aerr != nil {
		return nil, aerr
	}
	if n < 1 || n > int64(o.MaxN) {
		return nil, badRequest("n = %d: must be in [1, %d]", n, o.MaxN)
	}
	req.n = int(n)
	if rows := len(req.prompts) * req.n; rows > o.MaxRows {
		return nil, badRequest("n = %d: %d prompts x n = %d completions, more than the server's limit of %d per request", n, len(req.prompts), rows, o.MaxRows)
	}
	if req.temperature, aerr = floatField(f, "temperature", 1); aerr != nil {
		return nil, aerr
	}
	// Below minTemperature, 1/T in float32 overflows for tiny T and the
	// log-probs become NaN; sampling there is argmax for any practical use.
	if !(req.temperature >= minTemperature && req.temperature <= 10) {
		return nil, badRequest("temperature = %v: must be in [%v, 10] (greedy decoding, 0, is not supported)", req.temperature, minTemperature)
	}
	mt, aerr := intField(f, "max_tokens", 16)
	if aerr != nil {
		return nil, aerr
	}
	if mt < 1 || mt > int64(m.MaxLen) {
		return nil, badRequest("max_tokens = %d: must be in [1, %d] (the model's max length)", mt, m.MaxLen)
	}
	req.maxTokens = int(mt)
	for i, p := range req.prompts {
		if padded := (len(p) + 3) / 4 * 4; padded >= m.MaxLen {
			return nil, badRequest("prompt %d has %d tokens (%d padded to a multiple of 4): the model's max length is %d, so no new token fits",
				i, len(p), padded, m.MaxLen)
		} else if padded+req.maxTokens > m.MaxLen {
			return nil, badRequest("max_tokens = %d: prompt %d has %d tokens (%d padded to a multiple of 4), and the model's max length is %d: at most %d new tokens fit",
				mt, i, len(p), padded, m.MaxLen, m.MaxLen-padded)
		}
	}
	if raw := value(f, "stop_token_ids"); raw != nil {
		var ids []json.RawMessage
		if json.Unmarshal(raw, &ids) != nil {
			return nil, badRequest("stop_token_ids: want a list of token ids, got %s", short(raw))
		}
		for j, x := range ids {
			id, ok := asInt(x)
			if !ok || id < 0 || id >= int64(m.Vocab) {
				return nil, badRequest("stop_token_ids[%d] = %s: want a token id in [0, %d)", j, short(x), m.Vocab)
			}
			req.stop = append(req.stop, int32(id))
		}
	}
	if raw := value(f, "logprobs"); raw != nil {
		k, ok := asInt(raw)
		if !ok || k < 0 || k > 1 {
			return nil, badRequest("logprobs = %s: want 0 or 1 (the sampled tokens' log-probs; top alternatives are not supported)", short(raw))
		}
		req.logprobs = true
	}
	if req.tokenIDs, aerr = boolField(f, "return_tokens_as_token_ids"); aerr != nil {
		return nil, aerr
	}
	if raw := value(f, "seed"); raw != nil {
		s, ok := asInt(raw)
		if !ok {
			return nil, badRequest("seed: want an integer, got %s", short(raw))
		}
		req.seed = uint64(s)
	} else {
		var b [8]byte
		rand.Read(b[:])
		req.seed = binary.LittleEndian.Uint64(b[:])
	}
	// skip_special_tokens: false is what the text is (special tokens kept,
	// and what cde's rollout client sends); true is refused.
	for _, key := range []string{"stream", "echo", "ignore_eos", "skip_special_tokens"} {
		on, aerr := boolField(f, key)
		if aerr != nil {
			return nil, aerr
		}
		if on {
			return nil, badRequest("%s: true is not supported", key)
		}
	}
	if raw := value(f, "stop"); raw != nil && string(raw) != `""` && string(raw) != "[]" {
		return nil, badRequest("stop: stop strings are not supported; send stop_token_ids")
	}
	for _, nf := range neutral {
		raw := value(f, nf.key)
		if raw == nil {
			continue
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		ok := err == nil
		if ok {
			ok = false
			for _, want := range nf.vals {
				ok = ok || v == want
			}
		}
		if !ok {
			return nil, badRequest("%s = %s: not supported; cde samples from the full softmax at the given temperature (%s must be %v or absent)", nf.key, short(raw), nf.key, nf.vals)
		}
	}
	return req, nil
}

// streamPrompts reads the value of prompt from dec, token by token: a
// list of token-id lists, one flat list (one prompt), a text or a list of
// texts (tokenized with m's tokenizer); null is none. Every id must be in
// [0, m.Vocab); a prompt of m.MaxLen ids or more (no room for a new token)
// or more than maxPrompts prompts stops the reading.
func streamPrompts(b *bodyReader, m *Model, maxPrompts int) ([][]int32, *apiError) {
	dec := b.dec
	vocab, maxLen := m.Vocab, m.MaxLen
	t, err := dec.Token()
	if err != nil {
		return nil, b.fail("prompt", err)
	}
	switch v := t.(type) {
	case nil:
		return nil, nil
	case string:
		ids, aerr := encodeText(m, 0, v)
		if aerr != nil {
			return nil, aerr
		}
		return [][]int32{ids}, nil
	case json.Delim:
		if v != '[' {
			return nil, badRequest("prompt: want a text, a list of texts or a list of token-id lists, got an object")
		}
	default:
		return nil, badRequest("prompt: want a text, a list of texts or a list of token-id lists, got %v", v)
	}
	if !dec.More() {
		return nil, badRequest("prompt: empty")
	}
	if t, err = dec.Token(); err != nil {
		return nil, b.fail("prompt[0]", err)
	}
	if text, ok := t.(string); ok {
		return readTexts(b, m, text, maxPrompts)
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		// One flat prompt: t is its first id.
		ids, aerr := readIDs(b, 0, t, vocab, maxLen)
		if aerr != nil {
			return nil, aerr
		}
		return [][]int32{ids}, nil
	}
	var out [][]int32
	for i := 0; ; i++ {
		ids, aerr := readIDs(b, i, nil, vocab, maxLen)
		if aerr != nil {
			return nil, aerr
		}
		out = append(out, ids)
		if !dec.More() {
			break
		}
		if len(out) >= maxPrompts {
			return nil, badRequest("prompt: more than %d prompts, the server's limit per request (--max-batch)", maxPrompts)
		}
		if t, err = dec.Token(); err != nil {
			return nil, b.fail(fmt.Sprintf("prompt[%d]", i+1), err)
		}
		if d, ok := t.(json.Delim); !ok || d != '[' {
			return nil, badRequest("prompt[%d]: want a list of token ids, got %s", i+1, describe(t))
		}
	}
	if _, err := dec.Token(); err != nil { // the outer list's end
		return nil, b.fail("prompt", err)
	}
	return out, nil
}

// readTexts reads a list of text prompts whose first, first, was read.
func readTexts(b *bodyReader, m *Model, first string, maxPrompts int) ([][]int32, *apiError) {
	dec := b.dec
	var out [][]int32
	text := first
	for i := 0; ; i++ {
		ids, aerr := encodeText(m, i, text)
		if aerr != nil {
			return nil, aerr
		}
		out = append(out, ids)
		if !dec.More() {
			break
		}
		if len(out) >= maxPrompts {
			return nil, badRequest("prompt: more than %d prompts, the server's limit per request (--max-batch)", maxPrompts)
		}
		t, err := dec.Token()
		if err != nil {
			return nil, b.fail(fmt.Sprintf("prompt[%d]", i+1), err)
		}
		var ok bool
		if text, ok = t.(string); !ok {
			return nil, badRequest("prompt[%d]: want a text (the list's first prompt is one), got %s", i+1, describe(t))
		}
	}
	if _, err := dec.Token(); err != nil { // the list's end
		return nil, b.fail("prompt", err)
	}
	return out, nil
}

// MaxTextBytesPerToken bounds a text prompt's length before it is
// tokenized: at most this many bytes per position of the model's context.
const MaxTextBytesPerToken = 64

// encodeText tokenizes text prompt i as the model's tokenizer does for a
// completions prompt: the BOS (TextBOS) and the text's tokens.
func encodeText(m *Model, i int, text string) ([]int32, *apiError) {
	return encodeWith(m, fmt.Sprintf("prompt[%d]", i), text, m.TextBOS)
}

// encodeWith tokenizes text (named what in errors) after bos (< 0: none)
// and checks it against the model: ids in its vocabulary, room for one
// new token.
func encodeWith(m *Model, what, text string, bos int32) ([]int32, *apiError) {
	if text == "" {
		return nil, badRequest("%s: empty", what)
	}
	if limit := MaxTextBytesPerToken * m.MaxLen; len(text) > limit {
		return nil, badRequest("%s: %d bytes, more than %d (%d per position of the model's max length %d)", what, len(text), limit, MaxTextBytesPerToken, m.MaxLen)
	}
	var ids []int32
	if bos >= 0 {
		ids = append(ids, bos)
	}
	ids = append(ids, m.Tokenizer.Encode(text)...)
	for j, id := range ids {
		if id < 0 || int(id) >= m.Vocab {
			return nil, badRequest("%s: token %d of its tokenization is id %d, past the model's vocabulary of %d (the tokenizer is larger than the model)", what, j, id, m.Vocab)
		}
	}
	if len(ids) > m.MaxLen-1 {
		return nil, badRequest("%s: %d tokens, more than %d: the model's max length is %d, so no new token would fit", what, len(ids), m.MaxLen-1, m.MaxLen)
	}
	return ids, nil
}

// readIDs reads the ids of prompt i up to its closing bracket; first, when
// not nil, is its first token, already read.
func readIDs(b *bodyReader, i int, first json.Token, vocab, maxLen int) ([]int32, *apiError) {
	dec := b.dec
	var ids []int32
	for j := 0; first != nil || dec.More(); j++ {
		t := first
		first = nil
		if t == nil {
			var err error
			if t, err = dec.Token(); err != nil {
				return nil, b.fail(fmt.Sprintf("prompt[%d]", i), err)
			}
		}
		num, ok := t.(json.Number)
		var id int64
		if ok {
			id, ok = numberToInt(string(num))
		}
		if !ok || id < 0 || id >= int64(vocab) {
			return nil, badRequest("prompt[%d][%d] = %s: want a token id in [0, %d)", i, j, describe(t), vocab)
		}
		if j >= maxLen-1 {
			return nil, badRequest("prompt[%d]: more than %d tokens: the model's max length is %d, so no new token would fit", i, maxLen-1, maxLen)
		}
		ids = append(ids, int32(id))
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return nil, b.fail(fmt.Sprintf("prompt[%d]", i), err)
	}
	if len(ids) == 0 {
		return nil, badRequest("prompt[%d]: empty", i)
	}
	return ids, nil
}

// describe writes a JSON token for an error message.
func describe(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		if v == '[' {
			return "a list"
		}
		return "an object"
	case string:
		return short(json.RawMessage(strconv.Quote(v)))
	case nil:
		return "null"
	}
	return short(json.RawMessage(fmt.Sprint(t)))
}

// value returns key's raw value, nil when absent or null (null means the
// default, as for vLLM's optional fields).
func value(f map[string]json.RawMessage, key string) json.RawMessage {
	raw, ok := f[key]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	return bytes.TrimSpace(raw)
}

// asInt reads a JSON number with an integral value (16 or 16.0; not "16").
func asInt(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		return 0, false
	}
	return numberToInt(s)
}

func numberToInt(s string) (int64, bool) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return 0, false
	}
	return int64(v), true
}

func intField(f map[string]json.RawMessage, key string, def int64) (int64, *apiError) {
	raw := value(f, key)
	if raw == nil {
		return def, nil
	}
	v, ok := asInt(raw)
	if !ok {
		return 0, badRequest("%s: want an integer, got %s", key, short(raw))
	}
	return v, nil
}

func floatField(f map[string]json.RawMessage, key string, def float64) (float64, *apiError) {
	raw := value(f, key)
	if raw == nil {
		return def, nil
	}
	var v float64
	if s := string(raw); s[0] != '-' && (s[0] < '0' || s[0] > '9') || json.Unmarshal(raw, &v) != nil {
		return 0, badRequest("%s: want a number, got %s", key, short(raw))
	}
	return v, nil
}

func boolField(f map[string]json.RawMessage, key string) (bool, *apiError) {
	raw := value(f, key)
	if raw == nil {
		return false, nil
	}
	var v bool
	if json.Unmarshal(raw, &v) != nil {
		return false, badRequest("%s: want true or false, got %s", key, short(raw))
	}
	return v, nil
}

// short is raw cut to 40 bytes, for error messages.
func short(raw json.RawMessage) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}
