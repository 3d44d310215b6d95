package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
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
var allowed = map[string]bool{"model": true, "prompt": true, "n": true, "temperature": true, "max_tokens": true,
	"stop_token_ids": true, "logprobs": true, "return_tokens_as_token_ids": true, "seed": true, "stream": true,
	"echo": true, "ignore_eos": true, "stop": true, "user": true, "skip_special_tokens": true}

func init() {
	for _, nf := range neutral {
		allowed[nf.key] = true
	}
}

// parseCompletion checks every field (a wrong type or an invalid value is
// a 400 naming the field; so is a field it does not honour).
func parseCompletion(body []byte, m *Model, o Options) (*completionRequest, *apiError) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil || f == nil {
		return nil, badRequest("request body: want a JSON object (%v)", err)
	}
	var unknown []string
	for k := range f {
		if !allowed[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, badRequest("%s: not supported by this server, which refuses what it cannot honour (docs/serve.md lists the fields it takes)", strings.Join(unknown, ", "))
	}
	req := &completionRequest{}
	if raw := value(f, "model"); raw != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, badRequest("model: want a string, got %s", short(raw))
		}
	}
	var aerr *apiError
	if req.prompts, aerr = parsePrompts(value(f, "prompt"), m.Vocab); aerr != nil {
		return nil, aerr
	}
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

// parsePrompts reads prompt: a list of token-id lists, or one flat list
// (one prompt). Every id must be in [0, vocab).
func parsePrompts(raw json.RawMessage, vocab int) ([][]int32, *apiError) {
	if raw == nil {
		return nil, badRequest("prompt: required (a list of token-id lists)")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var top any
	if err := dec.Decode(&top); err != nil {
		return nil, badRequest("prompt: %v", err)
	}
	list, ok := top.([]any)
	if !ok {
		if _, isText := top.(string); isText {
			return nil, badRequest("prompt: text prompts are not supported: send token ids (a list of token-id lists)")
		}
		return nil, badRequest("prompt: want a list of token-id lists, got %s", short(raw))
	}
	if len(list) == 0 {
		return nil, badRequest("prompt: empty")
	}
	if _, nested := list[0].([]any); !nested {
		list = []any{list} // one flat prompt
	}
	out := make([][]int32, len(list))
	for i, p := range list {
		ids, ok := p.([]any)
		if !ok {
			return nil, badRequest("prompt[%d]: want a list of token ids, got %v", i, p)
		}
		if len(ids) == 0 {
			return nil, badRequest("prompt[%d]: empty", i)
		}
		out[i] = make([]int32, len(ids))
		for j, x := range ids {
			num, ok := x.(json.Number)
			var id int64
			if ok {
				id, ok = numberToInt(string(num))
			}
			if !ok || id < 0 || id >= int64(vocab) {
				return nil, badRequest("prompt[%d][%d] = %v: want a token id in [0, %d)", i, j, x, vocab)
			}
			out[i][j] = int32(id)
		}
	}
	return out, nil
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
