package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/backends/xla"
	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
	"github.com/cde-rl/cde/trainer"
)

// charModel is the default config's character transformer (2 layers,
// d_model 64, max_len 64, vocabulary 101, EOS 2) with random weights drawn
// from seed.
func charModel(t *testing.T, seed int) *Model {
	t.Helper()
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{`model.checkpoint=""`, "seed=" + strconv.Itoa(seed)}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := FromConfig(cfg, "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

var nopLog = zerolog.Nop()

func backendOf(m *Model) *xla.Backend { return m.Engine.(*xla.Backend) }

// The response, mirrored from the contract (docs/serve.md) field by field;
// decoded with unknown fields refused, so an extra or renamed field fails.
type (
	wantResponse struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []wantChoice `json:"choices"`
		Usage   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	wantChoice struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		Logprobs *struct {
			Tokens        []string  `json:"tokens"`
			TokenLogprobs []float64 `json:"token_logprobs"`
			TopLogprobs   []any     `json:"top_logprobs"`
			TextOffset    []int     `json:"text_offset"`
		} `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
		StopReason   *int   `json:"stop_reason"`
	}
)

// post sends body to path and returns the status and the raw answer.
func post(t *testing.T, url, path, body string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// complete posts a completions request that must succeed.
func complete(t *testing.T, url, body string) wantResponse {
	t.Helper()
	status, out := post(t, url, "/v1/completions", body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, out)
	}
	var r wantResponse
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("response does not match the contract: %v\n%s", err, out)
	}
	return r
}

// ids reads a choice's "token_id:N" tokens.
func ids(t *testing.T, c wantChoice) []int32 {
	t.Helper()
	out := make([]int32, len(c.Logprobs.Tokens))
	for i, s := range c.Logprobs.Tokens {
		n, err := strconv.Atoi(strings.TrimPrefix(s, "token_id:"))
		if err != nil || !strings.HasPrefix(s, "token_id:") {
			t.Fatalf("token %q: want token_id:N", s)
		}
		out[i] = int32(n)
	}
	return out
}

func newTestServer(t *testing.T, m *Model, o Options) *httptest.Server {
	t.Helper()
	s, err := New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

// Every invalid field is a 400 whose OpenAI-style error names it; unknown
// fields, neutral sampling values and nulls are accepted.
func TestCompletionValidation(t *testing.T) {
	m := charModel(t, 1)
	ts := newTestServer(t, m, Options{Name: "tiny", MaxN: 8, MaxRows: 16})
	// The default model: vocabulary 101, max length 64.
	long := "[" + strings.Repeat("5,", 40) + "5]" // 41 tokens, padded to 44: 20 new ones fit
	for _, c := range []struct{ body, want string }{
		{`[1, 2]`, "request body"},
		{`not json`, "request body"},
		{`{}`, "prompt: required"},
		{`{"prompt": "12+3", "max_tokens": 100}`, "max_tokens = 100"},
		{`{"prompt": []}`, "prompt: empty"},
		{`{"prompt": [[]]}`, "prompt[0]: empty"},
		{`{"prompt": [[1, 5], 7]}`, "prompt[1]"},
		{`{"prompt": [[1, 1.5]]}`, "prompt[0][1]"},
		{`{"prompt": [[1, 101]]}`, "prompt[0][1] = 101"},
		{`{"prompt": [1, -1]}`, "prompt[0][1] = -1"},
		{`{"prompt": [["1"]]}`, "prompt[0][0]"},
		{`{"prompt": [[1]], "n": 0}`, "n = 0"},
		{`{"prompt": [[1]], "n": 9}`, "n = 9"},
		{`{"prompt": [[1]], "n": "2"}`, "n: want an integer"},
		{`{"prompt": [[1]], "n": 1.5}`, "n: want an integer"},
		{`{"prompt": [[1], [2], [3]], "n": 6}`, "n = 6: 3 prompts x n = 18"},
		{`{"prompt": [[1]], "temperature": 0}`, "temperature = 0"},
		{`{"prompt": [[1]], "temperature": -1}`, "temperature = -1"},
		{`{"prompt": [[1]], "temperature": 10.5}`, "temperature = 10.5"},
		{`{"prompt": [[1]], "temperature": 1e-40}`, "temperature = 1e-40"},
		{`{"prompt": [[1]], "temperature": "hot"}`, "temperature: want a number"},
		{`{"prompt": [[1]], "max_tokens": 0}`, "max_tokens = 0"},
		{`{"prompt": [[1]], "max_tokens": "8"}`, "max_tokens: want an integer"},
		{`{"prompt": [[1]], "max_tokens": 61}`, "max_tokens = 61"}, // 4 + 61 > 64
		{`{"prompt": ` + long + `, "max_tokens": 21}`, "max_tokens = 21: prompt 0 has 41 tokens"},
		{`{"prompt": [[1]], "stop_token_ids": [101]}`, "stop_token_ids[0] = 101"},
		{`{"prompt": [[1]], "stop_token_ids": [3, -1]}`, "stop_token_ids[1] = -1"},
		{`{"prompt": [[1]], "stop_token_ids": 3}`, "stop_token_ids: want a list"},
		{`{"prompt": [[1]], "logprobs": 2}`, "logprobs = 2"},
		{`{"prompt": [[1]], "logprobs": true}`, "logprobs = true"},
		{`{"prompt": [[1]], "return_tokens_as_token_ids": "yes"}`, "return_tokens_as_token_ids: want true or false"},
		{`{"prompt": [[1]], "seed": "7"}`, "seed: want an integer"},
		{`{"prompt": [[1]], "model": 3}`, "model: want a string"},
		{`{"prompt": [[1]], "stream": true}`, "stream: true is not supported"},
		{`{"prompt": [[1]], "echo": true}`, "echo: true is not supported"},
		{`{"prompt": [[1]], "stop": ["\n"]}`, "stop: stop strings"},
		{`{"prompt": [[1]], "top_p": 0.9}`, "top_p = 0.9"},
		{`{"prompt": [[1]], "top_k": 50}`, "top_k = 50"},
	} {
		status, out := post(t, ts.URL, "/v1/completions", c.body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(out, &e); err != nil {
			t.Fatalf("%s: answer is not JSON: %s", c.body, out)
		}
		if status != 400 || e.Error.Code != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: status %d, error %+v; want 400 naming %q", c.body, status, e.Error, c.want)
		}
	}
	// Refused: every field the server does not honour, named (it used to
	// answer 200 and ignore them).
	for _, field := range []string{`"logit_bias": {"5": 100}`, `"best_of": 2`, `"min_tokens": 3`, `"truncate_prompt_tokens": 1`,
		`"prompt_logprobs": 1`, `"suffix": "x"`, `"foo": {"bar": 1}`, `"skip_special_tokens": true`} {
		body := `{"prompt": [[1, 5]], "max_tokens": 2, ` + field + `}`
		name := strings.Trim(strings.SplitN(field, ":", 2)[0], `"`)
		if status, out := post(t, ts.URL, "/v1/completions", body); status != 400 || !strings.Contains(string(out), name) {
			t.Errorf("%s: status %d, want 400 naming %s: %s", body, status, name, out)
		}
	}
	// Accepted: nulls, neutral sampling values, the longest prompt +
	// max_tokens that fits, a flat prompt.
	for _, body := range []string{
		`{"prompt": [[1, 5]], "skip_special_tokens": false, "user": "u1", "max_tokens": 2}`,
		`{"prompt": [[1, 5]], "n": null, "temperature": null, "seed": null, "logprobs": null, "max_tokens": 2, "model": "anything"}`,
		`{"prompt": [[1, 5]], "top_p": 1, "top_k": -1, "min_p": 0, "stream": false, "stop": [], "max_tokens": 2}`,
		`{"prompt": ` + long + `, "max_tokens": 20}`,
		`{"prompt": [1, 5, 6], "max_tokens": 2, "n": 8}`,
	} {
		if status, out := post(t, ts.URL, "/v1/completions", body); status != 200 {
			t.Errorf("%s: status %d: %s", body, status, out)
		}
	}
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/completions", 405},
		{"POST", "/health", 405},
		{"GET", "/v2/completions", 404},
	} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, resp.StatusCode, c.status)
		}
	}
	// A body over the limit is refused before it is parsed.
	small := newTestServer(t, m, Options{MaxBody: 64})
	if status, out := post(t, small.URL, "/v1/completions", `{"prompt": [[`+strings.Repeat("1,", 40)+`1]]}`); status != 413 {
		t.Errorf("oversized body: status %d: %s", status, out)
	}
}

// The response has the contract's shape; choices are prompt-major (choice
// i continues prompt i / n), and each choice's token_logprobs equal the
// backend's own scoring of its tokens after that prompt at the request's
// temperature, an independent graph (ScoreLogProbs). The same seed gives
// the same tokens; finish_reason, text and usage agree with the tokens.
func TestCompletionResponse(t *testing.T) {
	m := charModel(t, 3)
	ts := newTestServer(t, m, Options{Name: "tiny"})
	prompts := [][]int32{{1, 20, 11, 21, 3}, {1, 22}}
	body := `{"model": "tiny", "prompt": [[1, 20, 11, 21, 3], [1, 22]], "n": 3, "temperature": 0.8, "max_tokens": 8,
		"logprobs": 1, "return_tokens_as_token_ids": true, "seed": 5}`
	r := complete(t, ts.URL, body)
	if !strings.HasPrefix(r.ID, "cmpl-") || r.Object != "text_completion" || r.Model != "tiny" || r.Created <= 0 {
		t.Fatalf("header fields: id %q object %q model %q created %d", r.ID, r.Object, r.Model, r.Created)
	}
	if len(r.Choices) != 6 {
		t.Fatalf("%d choices, want 2 prompts x 3", len(r.Choices))
	}
	completion := 0
	lengthSeen, stopSeen := false, false
	for i, c := range r.Choices {
		if c.Index != i || c.Logprobs == nil || c.Logprobs.TopLogprobs != nil {
			t.Fatalf("choice %d: index %d, logprobs %+v", i, c.Index, c.Logprobs)
		}
		toks := ids(t, c)
		if len(toks) == 0 || len(toks) > 8 || len(c.Logprobs.TokenLogprobs) != len(toks) || len(c.Logprobs.TextOffset) != len(toks) {
			t.Fatalf("choice %d: %d tokens, %d log-probs, %d offsets", i, len(toks), len(c.Logprobs.TokenLogprobs), len(c.Logprobs.TextOffset))
		}
		completion += len(toks)
		last := toks[len(toks)-1]
		switch {
		case last == tasks.EosID:
			stopSeen = true
			if c.FinishReason != "stop" || c.StopReason != nil {
				t.Fatalf("choice %d ends with EOS: finish %q stop_reason %v", i, c.FinishReason, c.StopReason)
			}
			if want := m.Tokenizer.Decode(toks[:len(toks)-1]); c.Text != want {
				t.Fatalf("choice %d: text %q, want %q", i, c.Text, want)
			}
		default:
			lengthSeen = true
			if len(toks) != 8 || c.FinishReason != "length" || c.StopReason != nil {
				t.Fatalf("choice %d: %d tokens without EOS, finish %q", i, len(toks), c.FinishReason)
			}
			if want := m.Tokenizer.Decode(toks); c.Text != want {
				t.Fatalf("choice %d: text %q, want %q", i, c.Text, want)
			}
		}
		if c.Logprobs.TextOffset[0] != 0 {
			t.Fatalf("choice %d: first text offset %d", i, c.Logprobs.TextOffset[0])
		}
		lps, _, err := backendOf(m).ScoreLogProbs([]*core.Sequence{{Prompt: prompts[i/3], Response: toks}}, 0.8)
		if err != nil {
			t.Fatal(err)
		}
		for j, lp := range c.Logprobs.TokenLogprobs {
			if math.Abs(lp-lps[0][j]) > 1e-4 {
				t.Fatalf("choice %d token %d: served log-prob %v, the scorer's after prompt %d %v", i, j, lp, i/3, lps[0][j])
			}
		}
	}
	if !lengthSeen || !stopSeen {
		t.Logf("finish reasons seen: length %v, stop %v (a seed that gives both checks more)", lengthSeen, stopSeen)
	}
	// 5 + 2 prompt tokens, each prompt counted once.
	if r.Usage.PromptTokens != 7 || r.Usage.CompletionTokens != completion || r.Usage.TotalTokens != 7+completion {
		t.Fatalf("usage %+v, want 7 prompt and %d completion tokens", r.Usage, completion)
	}
	again := complete(t, ts.URL, body)
	other := complete(t, ts.URL, strings.Replace(body, `"seed": 5`, `"seed": 6`, 1))
	differs := false
	for i := range r.Choices {
		a, b := ids(t, r.Choices[i]), ids(t, again.Choices[i])
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("choice %d: seed 5 gave %v, then %v", i, a, b)
		}
		differs = differs || fmt.Sprint(a) != fmt.Sprint(ids(t, other.Choices[i]))
	}
	if !differs {
		t.Fatal("seeds 5 and 6 gave the same tokens in every choice")
	}
	// Without logprobs: null; without return_tokens_as_token_ids: text tokens.
	plain := complete(t, ts.URL, `{"prompt": [[1, 22]], "max_tokens": 4, "seed": 5}`)
	if plain.Choices[0].Logprobs != nil {
		t.Fatal("logprobs returned without being asked for")
	}
	texts := complete(t, ts.URL, `{"prompt": [[1, 22]], "max_tokens": 4, "seed": 5, "logprobs": 0}`)
	if got, want := strings.Join(texts.Choices[0].Logprobs.Tokens, ""), texts.Choices[0].Text; !strings.HasPrefix(got, want) {
		t.Fatalf("text tokens %q do not spell the text %q", got, want)
	}
}

// stop_token_ids end a choice at the first sampled stop id, kept as its
// last token with stop_reason that id. The sampling noise of each position
// does not depend on where rows stop, so the expected tokens are the free
// run's cut after its first stop id; the model's extra EOS ids stop a
// choice too, with stop_reason null.
func TestStopTokenIDs(t *testing.T) {
	m := charModel(t, 4)
	ts := newTestServer(t, m, Options{})
	req := `{"prompt": [[1, 20], [1, 30], [1, 40, 41]], "n": 2, "max_tokens": 12, "logprobs": 1, "return_tokens_as_token_ids": true, "seed": 9`
	free := complete(t, ts.URL, req+`}`)
	// The stop id: the second token of the first choice that has one
	// other than EOS.
	stop := int32(-1)
	for _, c := range free.Choices {
		if toks := ids(t, c); len(toks) > 2 && toks[1] != tasks.EosID {
			stop = toks[1]
			break
		}
	}
	if stop < 0 {
		t.Fatal("no choice has a second token: pick another seed")
	}
	cut := func(toks []int32) ([]int32, bool) {
		for j, id := range toks {
			if id == stop {
				return toks[:j+1], true
			}
		}
		return toks, false
	}
	check := func(resp wantResponse, wantReason bool) {
		t.Helper()
		for i, c := range resp.Choices {
			want, stopped := cut(ids(t, free.Choices[i]))
			if got := ids(t, c); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("choice %d: %v, want the free run %v cut at %d", i, got, ids(t, free.Choices[i]), stop)
			}
			if stopped {
				if c.FinishReason != "stop" || (wantReason && (c.StopReason == nil || *c.StopReason != int(stop))) || (!wantReason && c.StopReason != nil) {
					t.Fatalf("choice %d stopped at %d: finish %q, stop_reason %v", i, stop, c.FinishReason, c.StopReason)
				}
			} else if c.FinishReason != free.Choices[i].FinishReason || c.StopReason != nil {
				t.Fatalf("choice %d never sampled %d but finish %q stop_reason %v", i, stop, c.FinishReason, c.StopReason)
			}
		}
	}
	check(complete(t, ts.URL, fmt.Sprintf(`%s, "stop_token_ids": [%d]}`, req, stop)), true)
	m.ExtraEOS = []int32{stop}
	check(complete(t, ts.URL, req+`}`), false)
}

// reloadFixture is a server of one random model whose reload directory
// holds another's policy.gob, and a third directory holding yet another.
type reloadFixture struct {
	url, dir, token     string
	served, next, other *Model
}

func newReloadFixture(t *testing.T, o Options) reloadFixture {
	t.Helper()
	f := reloadFixture{served: charModel(t, 1), next: charModel(t, 2), other: charModel(t, 3), dir: t.TempDir(), token: "s3cret-token"}
	if err := backendOf(f.next).Save(f.dir); err != nil {
		t.Fatal(err)
	}
	if o.Token == "set" {
		o.Token = f.token
	}
	if o.ReloadDir == "set" {
		o.ReloadDir = f.dir
	}
	f.url = newTestServer(t, f.served, o).URL
	return f
}

// lpsOf samples one fixed request from the server and checks that its
// token_logprobs are model's scoring of the sampled tokens; it returns them.
func lpsOf(t *testing.T, url string, model *Model) []float64 {
	t.Helper()
	r := complete(t, url, `{"prompt": [[1, 20, 21]], "max_tokens": 6, "temperature": 1, "logprobs": 1, "return_tokens_as_token_ids": true, "seed": 3}`)
	toks := ids(t, r.Choices[0])
	lps, _, err := backendOf(model).ScoreLogProbs([]*core.Sequence{{Prompt: []int32{1, 20, 21}, Response: toks}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for j, lp := range r.Choices[0].Logprobs.TokenLogprobs {
		if math.Abs(lp-lps[0][j]) > 1e-4 {
			t.Fatalf("token %d: served %v, not the expected weights' %v", j, lp, lps[0][j])
		}
	}
	return r.Choices[0].Logprobs.TokenLogprobs
}

// Reload is off (404) without a token or a directory; a missing or wrong
// token is 401; any model_path but the reload directory is 403, however it
// is spelled, and loads nothing even when it holds valid weights; the
// directory itself (also through a symlink to it) loads its weights; a bad
// file there is a 500 and the weights in use keep serving.
func TestReload(t *testing.T) {
	for _, o := range []Options{{}, {Token: "set"}, {ReloadDir: "set"}} {
		f := newReloadFixture(t, o)
		status, out := post(t, f.url, "/update_weights_from_disk", `{"model_path": "`+f.dir+`"}`, "Authorization", "Bearer "+f.token)
		if status != 404 || !bytes.Contains(out, []byte(`"success":false`)) {
			t.Fatalf("reload with token %q, dir %q: status %d: %s", o.Token, o.ReloadDir, status, out)
		}
	}
	f := newReloadFixture(t, Options{Token: "set", ReloadDir: "set"})
	lpsOf(t, f.url, f.served)
	body := `{"model_path": "` + f.dir + `"}`
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", f.token},
		{"Authorization", "Bearer " + f.token + "x"}, {"Authorization", "Basic " + f.token}} {
		if status, out := post(t, f.url, "/update_weights_from_disk", body, hdr...); status != 401 {
			t.Fatalf("header %v: status %d: %s", hdr, status, out)
		}
	}
	auth := []string{"Authorization", "Bearer " + f.token}
	// Other paths, each holding valid weights of a third model.
	elsewhere := t.TempDir()
	if err := backendOf(f.other).Save(elsewhere); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(f.dir, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{elsewhere, link, filepath.Dir(f.dir), f.dir + "/../" + filepath.Base(elsewhere), sub, "/", "..", "", f.dir + "x"} {
		want := 403
		if p == "" {
			want = 400
		}
		if status, out := post(t, f.url, "/update_weights_from_disk", `{"model_path": "`+p+`"}`, auth...); status != want {
			t.Fatalf("model_path %q: status %d, want %d: %s", p, status, want, out)
		}
	}
	if status, out := post(t, f.url, "/update_weights_from_disk", `{"path": "x"}`, auth...); status != 400 {
		t.Fatalf("no model_path: status %d: %s", status, out)
	}
	lpsOf(t, f.url, f.served) // nothing was loaded

	// The reload directory, spelled with a trailing "/." and "sub/..".
	status, out := post(t, f.url, "/update_weights_from_disk", `{"model_path": "`+sub+`/.."}`, auth...)
	if status != 200 || !bytes.Contains(out, []byte(`"success":true`)) {
		t.Fatalf("reload: status %d: %s", status, out)
	}
	after := lpsOf(t, f.url, f.next)

	// A policy.gob of other sizes: 500, the reloaded weights stay.
	cfg, err := trainer.LoadConfig(trainer.LoadOptions{Env: []string{}, Sets: []string{`model.checkpoint=""`, "model.d_model=32"}})
	if err != nil {
		t.Fatal(err)
	}
	small, err := FromConfig(cfg, "cpu", "")
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if err := backendOf(small).Save(f.dir); err != nil {
		t.Fatal(err)
	}
	status, out = post(t, f.url, "/update_weights_from_disk", body, auth...)
	if status != 500 || !bytes.Contains(out, []byte(`"success":false`)) || !bytes.Contains(out, []byte("model sizes")) {
		t.Fatalf("bad weights: status %d: %s", status, out)
	}
	if got := lpsOf(t, f.url, f.next); fmt.Sprint(got) != fmt.Sprint(after) {
		t.Fatalf("a failed reload changed the served log-probs: %v, then %v", after, got)
	}

	// A symlink to the reload directory names it.
	if err := backendOf(f.other).Save(f.dir); err != nil {
		t.Fatal(err)
	}
	toDir := filepath.Join(t.TempDir(), "to-reload")
	if err := os.Symlink(f.dir, toDir); err != nil {
		t.Fatal(err)
	}
	if status, out := post(t, f.url, "/update_weights_from_disk", `{"model_path": "`+toDir+`"}`, auth...); status != 200 {
		t.Fatalf("symlink to the reload dir: status %d: %s", status, out)
	}
	lpsOf(t, f.url, f.other)
}

// GET /health and /v1/models answer as the contract says.
func TestHealthAndModels(t *testing.T) {
	ts := newTestServer(t, charModel(t, 1), Options{Name: "tiny"})
	resp, err := http.Get(ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("health: %d", resp.StatusCode)
	}
	resp, err = http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ms struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ms); err != nil {
		t.Fatal(err)
	}
	if ms.Object != "list" || len(ms.Data) != 1 || ms.Data[0].ID != "tiny" || ms.Data[0].Object != "model" {
		t.Fatalf("models: %+v", ms)
	}
}

// An address without a host, and the default, listen on 127.0.0.1 only.
func TestListenLoopback(t *testing.T) {
	if !strings.HasPrefix(DefaultAddr, "127.0.0.1:") {
		t.Fatalf("DefaultAddr = %q", DefaultAddr)
	}
	for _, addr := range []string{":0", "127.0.0.1:0"} {
		ln, err := Listen(addr, nopLog)
		if err != nil {
			t.Fatal(err)
		}
		ip := ln.Addr().(*net.TCPAddr).IP
		ln.Close()
		if !ip.Equal(net.IPv4(127, 0, 0, 1)) {
			t.Fatalf("Listen(%q) bound %v, want 127.0.0.1", addr, ip)
		}
	}
	if _, err := Listen("no-port", nopLog); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Fatalf("err = %v", err)
	}
	// Every interface only when named, and with a warning; none for
	// loopback names.
	for _, c := range []struct {
		addr string
		warn bool
	}{{"0.0.0.0:0", true}, {"localhost:0", false}, {"127.0.0.1:0", false}} {
		var logs bytes.Buffer
		ln, err := Listen(c.addr, zerolog.New(&logs))
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if got := strings.Contains(logs.String(), "listening beyond loopback"); got != c.warn {
			t.Fatalf("Listen(%q): warning %v, want %v: %s", c.addr, got, c.warn, logs.String())
		}
	}
}

// Completions and reloads sent at once are served one at a time: every
// answer is wholly the old weights' or wholly the new ones' (its
// log-probs are one model's scoring of its tokens), and once a reload has
// answered, later completions use the new weights.
func TestConcurrentCompletionsAndReload(t *testing.T) {
	f := newReloadFixture(t, Options{Token: "set", ReloadDir: "set"})
	const body = `{"prompt": [[1, 20, 21], [1, 30]], "n": 2, "max_tokens": 6, "logprobs": 1, "return_tokens_as_token_ids": true, "seed": 3}`
	scoredBy := func(r wantResponse, m *Model) bool {
		for i, c := range r.Choices {
			prompt := [][]int32{{1, 20, 21}, {1, 30}}[i/2]
			lps, _, err := backendOf(m).ScoreLogProbs([]*core.Sequence{{Prompt: prompt, Response: ids(t, c)}}, 1)
			if err != nil {
				t.Error(err)
				return false
			}
			for j, lp := range c.Logprobs.TokenLogprobs {
				if math.Abs(lp-lps[0][j]) > 1e-4 {
					return false
				}
			}
		}
		return true
	}
	type result struct {
		r   wantResponse
		err string
	}
	results := make(chan result, 12)
	reloads := make(chan int, 2)
	for i := range 12 {
		go func() {
			if i == 5 || i == 9 {
				status, _ := postNoFatal(f.url, "/update_weights_from_disk", `{"model_path": "`+f.dir+`"}`, "Bearer "+f.token)
				reloads <- status
			}
			status, out := postNoFatal(f.url, "/v1/completions", body, "")
			var r wantResponse
			if status != 200 || json.Unmarshal(out, &r) != nil {
				results <- result{err: fmt.Sprintf("status %d: %s", status, out)}
				return
			}
			results <- result{r: r}
		}()
	}
	for range 2 {
		if s := <-reloads; s != 200 {
			t.Fatalf("reload: status %d", s)
		}
	}
	var answers []wantResponse
	for range 12 {
		res := <-results
		if res.err != "" {
			t.Fatal(res.err)
		}
		answers = append(answers, res.r)
	}
	// Scored once every request is done (the backends are not safe for
	// concurrent use), the old weights by a fresh copy: the served model
	// now holds the new ones.
	old := charModel(t, 1)
	sawOld, sawNew := false, false
	for _, r := range answers {
		o, n := scoredBy(r, old), scoredBy(r, f.next)
		if !o && !n {
			t.Fatal("an answer's log-probs are neither the old weights' nor the new ones'")
		}
		sawOld, sawNew = sawOld || o, sawNew || n
	}
	t.Logf("answers from the old weights: %v, from the new: %v", sawOld, sawNew)
	lpsOf(t, f.url, f.next)
}

// postNoFatal is post for goroutines other than the test's: errors come
// back as status 0.
func postNoFatal(url, path, body, auth string) (int, []byte) {
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// panicEngine panics on every call, as an engine may on a bug.
type panicEngine struct{}

func (panicEngine) Generate(core.GenerateRequest) ([]core.Generation, error) { panic("boom") }
func (panicEngine) LoadPolicyWeights(string) error                           { panic("boom") }

// An engine panic answers 500 and releases the model: the next request is
// served (here, answered 500 again) rather than waiting forever.
func TestEnginePanic(t *testing.T) {
	m := &Model{Engine: panicEngine{}, Tokenizer: tasks.NewCharTokenizer(), Vocab: 101, MaxLen: 64, EOS: tasks.EosID}
	ts := newTestServer(t, m, Options{})
	for range 2 {
		if status, out := post(t, ts.URL, "/v1/completions", `{"prompt": [[1, 5]]}`); status != 500 || !bytes.Contains(out, []byte("engine panic: boom")) {
			t.Fatalf("status %d: %s", status, out)
		}
	}
}
