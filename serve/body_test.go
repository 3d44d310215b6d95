package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
)

// quickEngine answers every row with EOS at once.
type quickEngine struct{}

func (quickEngine) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	gens := make([]core.Generation, len(req.Prompts))
	for i := range gens {
		gens[i] = core.Generation{Tokens: []int32{tasks.EosID}, LogProbs: []float64{-1}, Entropies: []float64{1}}
	}
	return gens, nil
}
func (quickEngine) LoadPolicyWeights(string) error { return nil }

// quickModel is the character model's sizes (vocabulary 101, context 64:
// a text prompt of at most 4096 bytes) with ChatML and an engine that
// answers at once.
func quickModel() *Model {
	return &Model{Engine: quickEngine{}, Tokenizer: tasks.NewCharTokenizer(), Vocab: 101, MaxLen: 64, EOS: tasks.EosID,
		TextBOS: tasks.BosID, Template: tasks.ChatTemplate{Name: tasks.ChatML}}
}

// hugeBody is a body of prefix, fill repeated to about size bytes, and
// suffix, made as it is read (the test holds none of it).
type hugeBody struct {
	parts [][]byte
	fill  []byte
	left  int
}

func newHugeBody(prefix, fill, suffix string, size int) *hugeBody {
	return &hugeBody{parts: [][]byte{[]byte(prefix), nil, []byte(suffix)}, fill: []byte(fill), left: size / len(fill)}
}

func (h *hugeBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		switch {
		case len(h.parts[0]) > 0:
			k := copy(p[n:], h.parts[0])
			h.parts[0] = h.parts[0][k:]
			n += k
		case h.left > 0:
			if len(p)-n < len(h.fill) {
				return n, nil
			}
			for h.left > 0 && len(p)-n >= len(h.fill) {
				n += copy(p[n:], h.fill)
				h.left--
			}
		case len(h.parts[2]) > 0:
			k := copy(p[n:], h.parts[2])
			h.parts[2] = h.parts[2][k:]
			n += k
		default:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
	}
	return n, nil
}

// A 60 MB body whose one string, white-space run, number or small field
// outgrows what the server takes is refused while it streams in, naming
// the field: the server allocates a few MB, not the body (it read each of
// them whole before: the 60 MB text prompt, the user field and the
// unknown field were buffered, and the white space and the number grew
// the decoder's buffer to the body's size).
func TestHugeBodiesRefusedEarly(t *testing.T) {
	ts := newTestServer(t, quickModel(), Options{})
	const size = 60 << 20
	for _, c := range []struct {
		path, prefix, fill, suffix string
		status                     int
		want                       string
	}{
		{"/v1/completions", `{"prompt": "`, "a", `"}`, 400, "prompt: more than 4096 bytes (64 per position of the model's max length 64)"},
		{"/v1/completions", `{"prompt": ["a", "`, "a", `"]}`, 400, "prompt[1]: more than 4096 bytes"},
		{"/v1/completions", `{"prompt": [[1, 5]], "user": "`, "u", `"}`, 400, "user: more than 256 bytes"},
		{"/v1/completions", `{"prompt": [[1, 5]], "model": "`, "m", `"}`, 400, "model: more than 256 bytes"},
		{"/v1/completions", `{"prompt": [[1, 5]], "logit_bias": [`, "1, ", `1]}`, 413, "logit_bias: the fields other than the prompt or the messages take more than 1048576 bytes"},
		{"/v1/completions", `{"prompt": [[1, 5]], "stop_token_ids": [`, "1, ", `1]}`, 413, "stop_token_ids: the fields other than"},
		{"/v1/completions", `{"prompt": [[1,`, " ", `5]]}`, 400, "prompt[0]: more than 4096 bytes of white space in a row"},
		{"/v1/completions", `{"prompt": [[1, 5`, "0", `]]}`, 400, "prompt[0]: a number or literal of more than 256 bytes"},
		{"/v1/completions", `{"`, "k", `": 1}`, 400, "request body: more than 256 bytes (a field name)"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "`, "a", `"}]}`, 400, "messages: more than 4096 bytes (64 per position"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "user": "`, "u", `"}`, 400, "user: more than 256 bytes"},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		resp, err := http.Post(ts.URL+c.path, "application/json", newHugeBody(c.prefix, c.fill, c.suffix, size))
		if err != nil {
			t.Fatalf("%s %s...: %v", c.path, c.prefix, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		if resp.StatusCode != c.status || !strings.Contains(string(out), c.want) {
			t.Errorf("%s %s...: status %d %s, want %d with %q", c.path, c.prefix, resp.StatusCode, out, c.status, c.want)
		}
		if alloc > 16<<20 {
			t.Errorf("%s %s...: %.1f MB allocated for a %d MB body, want under 16 MB", c.path, c.prefix, float64(alloc)/1e6, size>>20)
		}
	}
	// The server still answers.
	if status, out := post(t, ts.URL, "/v1/completions", `{"prompt": [[1, 5]], "max_tokens": 1}`); status != 200 {
		t.Fatalf("next request: %d %s", status, out)
	}
}

// The body is limited to what the largest request could need (with
// --max-batch 1: 1 MiB for the other fields and one text of 4096 bytes
// with every byte escaped); past it, 413 naming the limit and the field
// being read. The fields other than the prompt get 1 MiB together. Both
// were read before up to the fixed 64 MiB, and these bodies answered 200.
func TestBodyLimitFromServerLimits(t *testing.T) {
	m := quickModel()
	o := Options{MaxRows: 1}
	ts := newTestServer(t, m, o)
	limit := completionBodyLimit(m, Options{MaxRows: 1, MaxBody: 64 << 20})
	if limit != 1<<20+6*64*64+16 {
		t.Fatalf("limit %d", limit)
	}
	stops := strings.Repeat("1,", 500_000) + "1" // a MB of stop ids, under the other fields' 1 MiB
	spaced := "[1" + strings.Repeat(","+strings.Repeat(" ", 4000)+"1", 62) + "]"
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"stop_token_ids": [` + stops + `], "prompt": [` + spaced + `], "max_tokens": 1}`, 413,
			fmt.Sprintf("request body: more than %d bytes, the most a completions request can need (for each of --max-batch 1 prompts a text of up to 4096 bytes with every byte escaped, and 1 MiB for the other fields); refused while reading prompt[0]", limit)},
		{`{"prompt": [[1]], "stop_token_ids": [` + stops + "," + stops + `]}`, 413, "stop_token_ids: the fields other than the prompt or the messages take more than 1048576 bytes"},
	} {
		status, out := post(t, ts.URL, "/v1/completions", c.body)
		if status != c.status || !strings.Contains(string(out), c.want) {
			t.Errorf("%.60s...: %d %s, want %d with %q", c.body, status, out, c.status, c.want)
		}
	}
	// Within the limits: a MB of stop ids and a prompt spaced out.
	if status, out := post(t, ts.URL, "/v1/completions", `{"stop_token_ids": [`+stops+`], "prompt": [[1, 5]], "max_tokens": 1}`); status != 200 {
		t.Errorf("a MB of stop ids: %d %s", status, out)
	}
	if status, out := post(t, ts.URL, "/v1/completions", `{"prompt": [[1`+strings.Repeat(","+strings.Repeat(" ", 4000)+"1", 8)+`]], "max_tokens": 1}`); status != 200 {
		t.Errorf("a spaced-out prompt: %d %s", status, out)
	}
	// Chat: its own limit (1 MiB + 512 x 64), named the same way; and
	// MaxBody below the limits drawn from the model.
	chatLimit := 1<<20 + 512*64
	if status, out := post(t, ts.URL, "/v1/chat/completions",
		`{"messages": [{"role": "user", "content": "hi"}`+strings.Repeat(", "+strings.Repeat(" ", 4000)+`{"role": "user", "content": "hi"}`, 300)+`]}`); status != 413 ||
		!strings.Contains(string(out), fmt.Sprintf("more than %d bytes, the most a chat completions request can need (512 bytes of JSON per position of the model's max length 64 for the messages, and 1 MiB for the other fields); refused while reading messages", chatLimit)) {
		t.Errorf("chat over its limit: %d %s", status, out)
	}
	if status, out := post(t, newTestServer(t, m, Options{MaxBody: 100}).URL, "/v1/chat/completions",
		`{"messages": [{"role": "user", "content": "`+strings.Repeat("a", 200)+`"}]}`); status != 413 ||
		!strings.Contains(string(out), "request body: more than 100 bytes, the most this server reads; refused while reading messages") {
		t.Errorf("chat over MaxBody: %d %s", status, out)
	}
}

// user and model are strings of at most MaxNameBytes (user was taken
// whatever its type and length: 60 MB were accepted and buffered).
func TestUserAndModelCapped(t *testing.T) {
	ts := newTestServer(t, quickModel(), Options{})
	for _, c := range []struct {
		path, fields string
		status       int
		want         string
	}{
		{"/v1/completions", `"user": "` + strings.Repeat("u", 256) + `"`, 200, ""},
		{"/v1/completions", `"model": "` + strings.Repeat("m", 256) + `"`, 200, ""},
		{"/v1/completions", `"user": "` + strings.Repeat("é", 128) + `"`, 200, ""},
		{"/v1/completions", `"user": "` + strings.Repeat("u", 257) + `"`, 400, "user: 257 bytes, more than 256 (the limit of user and model)"},
		{"/v1/completions", `"user": "` + strings.Repeat("u", 256) + `\u00e9"`, 400, "user: 258 bytes, more than 256"},
		{"/v1/completions", `"user": "` + strings.Repeat("u", 5000) + `"`, 400, "user: more than 256 bytes (the limit of user and model)"},
		{"/v1/completions", `"model": "` + strings.Repeat("m", 300) + `"`, 400, "model: 300 bytes, more than 256"},
		{"/v1/completions", `"user": 7`, 400, "user: want a string, got 7"},
		{"/v1/completions", `"user": null`, 200, ""},
		{"/v1/chat/completions", `"user": "` + strings.Repeat("u", 257) + `"`, 400, "user: 257 bytes, more than 256"},
		{"/v1/chat/completions", `"user": ["u"]`, 400, "user: want a string"},
	} {
		body := `{"prompt": [[1, 5]], "max_tokens": 1, ` + c.fields + `}`
		if c.path == "/v1/chat/completions" {
			body = `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, ` + c.fields + `}`
		}
		status, out := post(t, ts.URL, c.path, body)
		if status != c.status || !strings.Contains(string(out), c.want) {
			t.Errorf("%s %.60s: %d %s, want %d with %q", c.path, c.fields, status, out, c.status, c.want)
		}
	}
}

// Text that is not UTF-8, and a UTF-16 surrogate escape not in a pair, are
// refused naming the field, as the JSONL readers refuse them; encoding/json
// would have turned them into U+FFFD and the request was answered 200.
func TestInvalidUTF8Refused(t *testing.T) {
	ts := newTestServer(t, quickModel(), Options{})
	for _, c := range []struct {
		path, body string
		want       string
	}{
		{"/v1/completions", "{\"prompt\": \"ab\xffc\"}", "prompt: invalid UTF-8 at byte 15 of the body"},
		{"/v1/completions", "{\"prompt\": [\"ok\", \"ab\xc3\"]}", "prompt[1]: invalid UTF-8 at byte 22 of the body"},
		{"/v1/completions", "{\"prompt\": \"\xc0\xaf\"}", "prompt: invalid UTF-8"},         // an overlong '/'
		{"/v1/completions", "{\"prompt\": \"\xed\xa0\x80\"}", "prompt: invalid UTF-8"},     // a surrogate, encoded
		{"/v1/completions", "{\"prompt\": \"\xf4\x90\x80\x80\"}", "prompt: invalid UTF-8"}, // past U+10FFFF
		{"/v1/completions", `{"prompt": "a\ud800b"}`, "prompt: a UTF-16 surrogate escape not in a pair at byte 14"},
		{"/v1/completions", `{"prompt": "a\udc00"}`, "prompt: a UTF-16 surrogate escape not in a pair"},
		{"/v1/completions", `{"prompt": "a\ud800"}`, "prompt: a UTF-16 surrogate escape not in a pair"},
		{"/v1/completions", `{"prompt": "a\ud800\n"}`, "prompt: a UTF-16 surrogate escape not in a pair"},
		{"/v1/completions", "{\"prompt\": [[1, 5]], \"user\": \"\xff\"}", "user: invalid UTF-8"},
		{"/v1/completions", "{\"prompt\": [[1, 5]], \"us\xffer\": 1}", "request body: invalid UTF-8"},
		{"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"h\xffi\"}]}", "messages: invalid UTF-8 at byte 45"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]}`, "messages: a UTF-16 surrogate escape not in a pair"},
	} {
		status, out := post(t, ts.URL, c.path, c.body)
		if status != 400 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s %q: %d %s, want 400 with %q", c.path, c.body, status, out, c.want)
		}
	}
	// Accepted: UTF-8 raw or escaped, a surrogate pair, escapes around them.
	for _, body := range []string{
		`{"prompt": "é ü 中 😀", "max_tokens": 1}`,
		`{"prompt": "\u00e9\ud83d\ude00\n\\\"\u4e2d", "max_tokens": 1}`,
		`{"prompt": "\ud83d\ude00\ud83d\ude00", "max_tokens": 1}`,
	} {
		if status, out := post(t, ts.URL, "/v1/completions", body); status != 200 {
			t.Errorf("%s: %d %s", body, status, out)
		}
	}
}

// The guard's UTF-8 check agrees with utf8.Valid on every text, however
// the body is cut into reads (one byte at a time here).
func TestGuardUTF8(t *testing.T) {
	texts := []string{"plain", "é", "中文", "😀", "\xff", "a\xc3", "\xe2\x82", "\xe2\x82\xac", "\xf0\x9f\x98", "\xc3\xa9\xc3",
		"\xef\xbf\xbd", "\xed\x9f\xbf", "\xee\x80\x80", "\xf4\x8f\xbf\xbf", "\xc1\xbf", "\xe0\x9f\xbf", "\xf0\x8f\xbf\xbf", "\x80"}
	for _, text := range texts {
		for _, r := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader} {
			b := newBodyReader(r(strings.NewReader(`{"prompt": "`+text+`", "user": "x"}`)), "")
			_, aerr := b.object("prompt", func() *apiError {
				var s string
				if err := b.dec.Decode(&s); err != nil {
					return b.fail("prompt", err)
				}
				return nil
			}, 4096, "")
			if refused := aerr != nil && strings.Contains(aerr.msg, "invalid UTF-8"); refused == utf8.ValidString(text) {
				t.Errorf("%q: refused %v (%v), valid %v", text, refused, aerr, utf8.ValidString(text))
			}
		}
	}
}

// A limit set for one field does not apply to the next one's bytes, which
// the decoder may have read ahead: a long text after a short user or a
// field name, in one read or byte by byte.
func TestGuardLimitsPerField(t *testing.T) {
	text := strings.Repeat("a", 4000)
	for _, body := range []string{
		`{"user": "u", "prompt": "` + text + `"}`,
		`{"prompt": "` + text + `", "user": "` + strings.Repeat("u", 256) + `", "n": 1}`,
		`{"model": "m", "n": 1, "prompt": "` + text + `"}`,
	} {
		for _, r := range []func(io.Reader) io.Reader{func(r io.Reader) io.Reader { return r }, iotest.OneByteReader} {
			b := newBodyReader(r(strings.NewReader(body)), "")
			var got string
			f, aerr := b.object("prompt", func() *apiError {
				if err := b.dec.Decode(&got); err != nil {
					return b.fail("prompt", err)
				}
				return nil
			}, 4096, "")
			if aerr != nil || got != text || f["user"] == nil && f["model"] == nil {
				t.Errorf("%.40s...: %v, %d bytes of prompt", body, aerr, len(got))
			}
		}
	}
}

// The server takes what JSON allows around the values: white space up to
// the run limit, keys in any order, escapes.
func TestBodyShapesAccepted(t *testing.T) {
	ts := newTestServer(t, quickModel(), Options{})
	pretty, _ := json.MarshalIndent(map[string]any{"prompt": [][]int{{1, 5, 6}, {1, 7}}, "max_tokens": 1, "user": "x", "stop_token_ids": []int{3}}, "", "        ")
	for _, body := range []string{string(pretty), "\n\t{ \"max_tokens\" : 1 ,\r\n \"prompt\" : \"a\\tb\" }\n"} {
		if status, out := post(t, ts.URL, "/v1/completions", body); status != 200 {
			t.Errorf("%s: %d %s", body, status, out)
		}
	}
}

// asciiJSON writes s as Python's json.dumps does by default: every
// character past ASCII escaped, as a surrogate pair past U+FFFF.
func asciiJSON(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			if r > 0xFFFF {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// The guard refuses no text that fits: random texts of up to the limit,
// written as Go and as Python write JSON, read in one go or byte by byte,
// decode to themselves; the limit holds at the byte, however the text is
// escaped.
func TestGuardAcceptsValidJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("aZ09 \t\n\"\\/<>&\x01\x1f\u007f\u00e9\u4e2d\u2028\U0001F600\U0010FFFF\uFFFD")
	read := func(r io.Reader) (string, *apiError) {
		b := newBodyReader(r, "")
		var got string
		_, aerr := b.object("prompt", func() *apiError {
			if err := b.dec.Decode(&got); err != nil {
				return b.fail("prompt", err)
			}
			return nil
		}, 4096, "the limit")
		return got, aerr
	}
	for i := range 300 {
		var sb strings.Builder
		for n := rng.IntN(1200); sb.Len() < n; {
			sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		text := sb.String()
		if len(text) > 4096 {
			continue
		}
		goJSON, _ := json.Marshal(text)
		for _, enc := range []string{string(goJSON), asciiJSON(text)} {
			body := `{"user": "u", "prompt": ` + enc + `, "n": 1}`
			for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body)), iotest.HalfReader(strings.NewReader(body))} {
				if got, aerr := read(r); aerr != nil || got != text {
					t.Fatalf("text %d %q: %v, decoded %q", i, text, aerr, got)
				}
			}
		}
	}
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{strings.Repeat("\x01", 4096), true}, {strings.Repeat("\x01", 4097), false},
		{strings.Repeat("\U0001F600", 1024), true},
	} {
		got, aerr := read(strings.NewReader(`{"prompt": ` + asciiJSON(c.text) + `}`))
		if (aerr == nil && got == c.text) != c.ok || (!c.ok && !strings.Contains(aerr.msg, "prompt: more than 4096 bytes (the limit)")) {
			t.Errorf("%d bytes escaped: %v", len(c.text), aerr)
		}
	}
}
