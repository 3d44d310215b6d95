package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
)

// fake is a completions server after the shared contract, with scripted
// failures. Choice j of a prompt p answers [100+p[0], 200+j, EOS=0] with
// finish_reason stop for even j and [100+p[0], 200+j, 300] with length for
// odd j (max_tokens 3 in the tests); the log-prob of token k is
// -(k+1)/10.
type fake struct {
	mu       sync.Mutex
	bodies   []completionRequest
	auth     []string // Authorization header of each completions request
	reloads  []map[string]string
	reloadAu []string
	failN    int  // answer the next failN completions requests with HTTP 500
	always   int  // HTTP status for every completions request (0 = none)
	hangup   bool // close the connection without answering
	hang     chan struct{}
	strip    bool          // leave the stop token out of stopped choices
	reloadSt int           // HTTP status of reloads (0 = 200 success)
	after    *fake         // answer nothing before this server got a completions request
	asked    chan struct{} // closed at the first completions request
	askOnce  sync.Once
	srv      *httptest.Server
}

func newFake(t *testing.T) *fake {
	f := &fake{asked: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		if f.hang != nil {
			close(f.hang)
		}
		f.srv.Close()
	})
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/update_weights_from_disk":
		var body map[string]string
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.reloads = append(f.reloads, body)
		f.reloadAu = append(f.reloadAu, r.Header.Get("Authorization"))
		st := f.reloadSt
		f.mu.Unlock()
		if st != 0 {
			http.Error(w, `{"error": {"message": "no"}}`, st)
			return
		}
		w.Write([]byte(`{"success": true, "message": "loaded"}`))
		return
	case "/v1/completions":
	default:
		http.NotFound(w, r)
		return
	}
	var req completionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	fail := f.failN > 0
	if fail {
		f.failN--
	}
	always, hangup, hang, strip := f.always, f.hangup, f.hang, f.strip
	f.mu.Unlock()
	f.askOnce.Do(func() { close(f.asked) })
	if f.after != nil {
		select {
		case <-f.after.asked:
		case <-time.After(10 * time.Second):
		}
	}
	if hang != nil {
		<-hang
		return
	}
	if hangup {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	if fail || always == 500 {
		http.Error(w, `{"error": {"message": "boom", "code": 500}}`, 500)
		return
	}
	if always != 0 {
		http.Error(w, `{"error": {"message": "bad max_tokens", "type": "invalid_request_error", "code": 400}}`, always)
		return
	}
	type lp struct {
		Tokens        []string   `json:"tokens"`
		TokenLogprobs []*float64 `json:"token_logprobs"`
	}
	type ch struct {
		Index        int    `json:"index"`
		Logprobs     lp     `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
		StopReason   any    `json:"stop_reason"`
	}
	var choices []ch
	for pi, p := range req.Prompt {
		for j := range req.N {
			toks := []int{100 + int(p[0]), 200 + j, 0}
			c := ch{Index: pi*req.N + j, FinishReason: "stop"}
			if j%2 == 1 {
				toks[2] = 300
				c.FinishReason = "length"
			} else if strip {
				toks = toks[:2]
			}
			for k, id := range toks {
				x := -float64(k+1) / 10
				c.Logprobs.Tokens = append(c.Logprobs.Tokens, fmt.Sprintf("token_id:%d", id))
				c.Logprobs.TokenLogprobs = append(c.Logprobs.TokenLogprobs, &x)
			}
			choices = append(choices, c)
		}
	}
	// Out of order on purpose: the client sorts by index.
	slices.Reverse(choices)
	json.NewEncoder(w).Encode(map[string]any{"id": "cmpl-1", "object": "text_completion", "choices": choices})
}

func (f *fake) requests() []completionRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bodies)
}

// logBuf collects the client's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newClient(t *testing.T, log *logBuf, servers ...*fake) *Client {
	t.Helper()
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.srv.URL)
	}
	o := Options{Servers: urls, Retries: 1, Backoff: time.Millisecond, Timeout: 5 * time.Second, EOS: 0, Vocab: 1000,
		Log: zerolog.New(log)}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// prompts is each of ids as a one-token prompt, n times in a row.
func prompts(n int, ids ...int32) [][]int32 {
	var out [][]int32
	for _, id := range ids {
		for range n {
			out = append(out, []int32{id})
		}
	}
	return out
}

// wantGen is what the fake answers for prompt id and sample j (by hand
// from its rule), stop token included.
func wantGen(id int32, j int) core.Generation {
	if j%2 == 1 {
		return core.Generation{Tokens: []int32{100 + id, 200 + int32(j), 300}, Truncated: true, LogProbs: []float64{-0.1, -0.2, -0.3}}
	}
	return core.Generation{Tokens: []int32{100 + id, 200 + int32(j), 0}, LogProbs: []float64{-0.1, -0.2, -0.3}}
}

func checkGens(t *testing.T, got []core.Generation, n int, ids ...int32) {
	t.Helper()
	if len(got) != n*len(ids) {
		t.Fatalf("%d generations, want %d", len(got), n*len(ids))
	}
	for pi, id := range ids {
		for j := range n {
			g, w := got[pi*n+j], wantGen(id, j)
			if !slices.Equal(g.Tokens, w.Tokens) || g.Truncated != w.Truncated || !slices.Equal(g.LogProbs, w.LogProbs) {
				t.Errorf("generation %d (prompt %d, sample %d) = %+v, want %+v", pi*n+j, id, j, g, w)
			}
		}
	}
}

func TestGenerateChunksAndOrder(t *testing.T) {
	a, b := newFake(t), newFake(t)
	var log logBuf
	c := newClient(t, &log, a, b)
	req := core.GenerateRequest{Prompts: prompts(4, 1, 2, 3), Temperature: 0.7, MaxTokens: 3, Seed: 9}
	got, err := c.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	checkGens(t, got, 4, 1, 2, 3)
	// Three distinct prompts over two servers: chunks of ceil(3/2) = 2
	// prompts, each sent once with n = 4.
	all := append(a.requests(), b.requests()...)
	if len(all) != 2 {
		t.Fatalf("%d requests, want 2", len(all))
	}
	var sent [][]int32
	for _, r := range all {
		if r.N != 4 || r.MaxTokens != 3 || r.Temperature != 0.7 || r.Logprobs != 1 || !r.TokensAsIDs || !slices.Equal(r.StopTokenIDs, []int32{0}) {
			t.Errorf("request %+v: want n 4, max_tokens 3, temperature 0.7, logprobs 1, token ids, stop [0]", r)
		}
		sent = append(sent, r.Prompt...)
	}
	slices.SortFunc(sent, func(x, y []int32) int { return int(x[0] - y[0]) })
	if fmt.Sprint(sent) != "[[1] [2] [3]]" {
		t.Errorf("prompts sent %v, want each of [1] [2] [3] once", sent)
	}
	if all[0].Seed == all[1].Seed {
		t.Errorf("both chunks have seed %d", all[0].Seed)
	}
	if c.LiveServers() != 2 {
		t.Errorf("%d live servers, want 2", c.LiveServers())
	}
}

// Prompts whose runs differ in length go in different requests (n is per
// request); a fixed ChunkPrompts splits further.
func TestGenerateUnevenRuns(t *testing.T) {
	a := newFake(t)
	var log logBuf
	c := newClient(t, &log, a)
	c.o.ChunkPrompts = 1
	req := core.GenerateRequest{Prompts: append(prompts(2, 5, 6), prompts(3, 7)...), Temperature: 1, MaxTokens: 3, StopTokens: []int32{0, 9}}
	got, err := c.Generate(req)
	if err != nil {
		t.Fatal(err)
	}
	checkGens(t, got[:4], 2, 5, 6)
	checkGens(t, got[4:], 3, 7)
	var ns []int
	for _, r := range a.requests() {
		ns = append(ns, r.N)
		if !slices.Equal(r.StopTokenIDs, []int32{0, 9}) {
			t.Errorf("stop_token_ids %v, want [0 9] (EOS once, then the request's)", r.StopTokenIDs)
		}
	}
	slices.Sort(ns)
	if fmt.Sprint(ns) != "[2 2 3]" {
		t.Errorf("requests' n = %v, want [2 2 3]", ns)
	}
}

func TestRetriesThenSucceeds(t *testing.T) {
	a := newFake(t)
	a.failN = 1 // one failure, Retries 1: the second attempt succeeds
	var log logBuf
	c := newClient(t, &log, a)
	got, err := c.Generate(core.GenerateRequest{Prompts: prompts(2, 4), Temperature: 1, MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	checkGens(t, got, 2, 4)
	if n := len(a.requests()); n != 2 {
		t.Errorf("%d requests, want 2 (one failure, one retry)", n)
	}
	if c.LiveServers() != 1 {
		t.Errorf("the server was dropped after a failure it recovered from")
	}
}

func TestDeadServerDroppedAndWorkRedone(t *testing.T) {
	for _, how := range []string{"http500", "hangup", "timeout"} {
		t.Run(how, func(t *testing.T) {
			bad, good := newFake(t), newFake(t)
			// The good server holds its first answer until the bad one has
			// been asked; otherwise a quick good server can take every
			// chunk before the bad one's worker starts.
			good.after = bad
			switch how {
			case "http500":
				bad.always = 500
			case "hangup":
				bad.hangup = true
			case "timeout":
				bad.hang = make(chan struct{})
			}
			var log logBuf
			c := newClient(t, &log, bad, good)
			c.o.Timeout = 100 * time.Millisecond
			c.o.ChunkPrompts = 1
			req := core.GenerateRequest{Prompts: prompts(2, 1, 2, 3, 4), Temperature: 1, MaxTokens: 3, Seed: 3}
			got, err := c.Generate(req)
			if err != nil {
				t.Fatal(err)
			}
			checkGens(t, got, 2, 1, 2, 3, 4)
			if c.LiveServers() != 1 {
				t.Errorf("%d live servers, want 1", c.LiveServers())
			}
			if !strings.Contains(log.String(), bad.srv.URL) || !strings.Contains(log.String(), `"level":"warn"`) {
				t.Errorf("no warning naming %s in the log:\n%s", bad.srv.URL, log.String())
			}
			// A chunk the dead server had is redone with the same seed.
			seeds := map[uint64]bool{}
			for _, r := range good.requests() {
				seeds[r.Seed] = true
			}
			for _, r := range bad.requests() {
				if !seeds[r.Seed] {
					t.Errorf("chunk with seed %d, sent to the dead server, was not redone with that seed", r.Seed)
				}
			}
			if len(bad.requests()) == 0 {
				t.Errorf("the bad server got no request")
			}
			// The next request goes to the live server only.
			before := len(bad.requests())
			if _, err := c.Generate(req); err != nil {
				t.Fatal(err)
			}
			if len(bad.requests()) != before {
				t.Errorf("a dropped server was sent more work")
			}
		})
	}
}

func TestNoServerLeft(t *testing.T) {
	a, b := newFake(t), newFake(t)
	a.always, b.always = 500, 500
	var log logBuf
	c := newClient(t, &log, a, b)
	_, err := c.Generate(core.GenerateRequest{Prompts: prompts(2, 1, 2), Temperature: 1, MaxTokens: 3})
	if err == nil {
		t.Fatal("no error with every server failing")
	}
	for _, want := range []string{a.srv.URL, b.srv.URL, "HTTP 500: boom", "no generation server left"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if c.LiveServers() != 0 {
		t.Errorf("%d live servers, want 0", c.LiveServers())
	}
}

// An HTTP 400 is the request's fault: no retry, no server dropped.
func TestBadRequestIsFatal(t *testing.T) {
	a := newFake(t)
	a.always = 400
	var log logBuf
	c := newClient(t, &log, a)
	_, err := c.Generate(core.GenerateRequest{Prompts: prompts(1, 1), Temperature: 1, MaxTokens: 3})
	if err == nil || !strings.Contains(err.Error(), "HTTP 400: bad max_tokens") {
		t.Fatalf("error %v, want the server's HTTP 400 message", err)
	}
	if len(a.requests()) != 1 || c.LiveServers() != 1 {
		t.Errorf("%d requests and %d live servers, want 1 and 1", len(a.requests()), c.LiveServers())
	}
}

// A server that strips the stop token: the client puts EOS back with an
// unknown (NaN) log-prob.
func TestStrippedStopToken(t *testing.T) {
	a := newFake(t)
	a.strip = true
	var log logBuf
	c := newClient(t, &log, a)
	got, err := c.Generate(core.GenerateRequest{Prompts: prompts(2, 7), Temperature: 1, MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	g := got[0]
	if !slices.Equal(g.Tokens, []int32{107, 200, 0}) || g.Truncated {
		t.Errorf("tokens %v truncated %v, want [107 200 0] (EOS put back), false", g.Tokens, g.Truncated)
	}
	if len(g.LogProbs) != 3 || g.LogProbs[0] != -0.1 || g.LogProbs[1] != -0.2 || !math.IsNaN(g.LogProbs[2]) {
		t.Errorf("log-probs %v, want [-0.1 -0.2 NaN]", g.LogProbs)
	}
	if w := wantGen(7, 1); !slices.Equal(got[1].Tokens, w.Tokens) {
		t.Errorf("the truncated sample changed: %v", got[1].Tokens)
	}
}

func TestParseChoiceErrors(t *testing.T) {
	c, _ := New(Options{Servers: []string{"http://x"}, EOS: 0, Vocab: 500})
	for _, tc := range []struct{ name, choice, want string }{
		{"text token", `{"index":0,"logprobs":{"tokens":["hello"],"token_logprobs":[-1]},"finish_reason":"length"}`, "want token_id:N"},
		{"outside vocab", `{"index":0,"logprobs":{"tokens":["token_id:500"],"token_logprobs":[-1]},"finish_reason":"length"}`, "outside the vocabulary of 500"},
		{"lengths", `{"index":0,"logprobs":{"tokens":["token_id:5"],"token_logprobs":[]},"finish_reason":"length"}`, "1 tokens and 0 token_logprobs"},
		{"no logprobs", `{"index":0,"finish_reason":"length"}`, "no logprobs"},
		{"finish", `{"index":0,"logprobs":{"tokens":["token_id:5"],"token_logprobs":[-1]},"finish_reason":"abort"}`, `finish_reason "abort"`},
		{"too long", `{"index":0,"logprobs":{"tokens":["token_id:5","token_id:5","token_id:5","token_id:5"],"token_logprobs":[-1,-1,-1,-1]},"finish_reason":"length"}`, "4 tokens: want 1..max_tokens = 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ch choice
			if err := json.Unmarshal([]byte(tc.choice), &ch); err != nil {
				t.Fatal(err)
			}
			_, err := c.parseChoice(&ch, 3, []int32{0})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	// stop_reason names the stop id that was stripped.
	var ch choice
	json.Unmarshal([]byte(`{"index":0,"logprobs":{"tokens":["token_id:5"],"token_logprobs":[-1]},"finish_reason":"stop","stop_reason":9}`), &ch)
	g, err := c.parseChoice(&ch, 3, []int32{0, 9})
	if err != nil || !slices.Equal(g.Tokens, []int32{5, 9}) || !math.IsNaN(g.LogProbs[1]) {
		t.Errorf("stop_reason 9: %+v, %v; want tokens [5 9], NaN last log-prob", g, err)
	}
}

// The bearer token goes with reloads only; the reload names the sync
// directory, absolute; a server that fails to reload is dropped.
func TestSyncWeights(t *testing.T) {
	a, b := newFake(t), newFake(t)
	b.reloadSt = 403
	var log logBuf
	c := newClient(t, &log, a, b)
	dir := t.TempDir()
	rel, err := filepath.Rel(must(os.Getwd()), dir)
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	c.o.SyncDir, c.o.SyncToken = rel, "s3cret"
	c.o.Export = func(d string) error { exported = append(exported, d); return nil }
	if err := c.SyncWeights(); err != nil {
		t.Fatal(err)
	}
	if len(exported) != 1 || exported[0] != dir {
		t.Errorf("exported to %v, want [%s]", exported, dir)
	}
	if len(a.reloads) != 1 || a.reloads[0]["model_path"] != dir || a.reloadAu[0] != "Bearer s3cret" {
		t.Errorf("reloads %v with %v, want model_path %s with Bearer s3cret", a.reloads, a.reloadAu, dir)
	}
	if c.LiveServers() != 1 || !strings.Contains(log.String(), b.srv.URL) {
		t.Errorf("the server refusing the reload was not dropped with a warning: %d live\n%s", c.LiveServers(), log.String())
	}
	if strings.Contains(log.String(), "s3cret") {
		t.Errorf("the token was logged:\n%s", log.String())
	}
	if _, err := c.Generate(core.GenerateRequest{Prompts: prompts(1, 1), Temperature: 1, MaxTokens: 3}); err != nil {
		t.Fatal(err)
	}
	for i, au := range a.auth {
		if au != "" {
			t.Errorf("completions request %d carried Authorization %q", i, au)
		}
	}
	// The last server refusing: an error naming it.
	a.reloadSt = 401
	if err := c.SyncWeights(); err == nil || !strings.Contains(err.Error(), a.srv.URL) || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("error %v, want no server left naming %s and HTTP 401", err, a.srv.URL)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
