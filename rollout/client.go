// Package rollout generates the trainer's batches on remote servers that
// speak the OpenAI-compatible completions API as vLLM and SGLang serve it
// (and `cde-run serve` does): token-id prompts, n samples per prompt,
// temperature, max_tokens, stop token ids, and the log-probs of the sampled
// tokens. Client implements core.ServerGenerator: it spreads a request over
// the live servers, retries, drops a server that keeps failing (its work is
// redone on the others) and, for weight sync, writes the trainer's policy
// into a directory and asks every server to reload it (SGLang's
// update-weights-from-disk).
package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/trainer"
)

// Options configures a Client.
type Options struct {
	// Servers are base URLs (http://host:port, no trailing /v1).
	Servers []string
	// Model is the request's "model" field ("" = omitted).
	Model string
	// Timeout bounds one HTTP request (120s when 0).
	Timeout time.Duration
	// Retries is how many times a failed request is retried on the same
	// server before the server is dropped (attempts = 1 + Retries).
	Retries int
	// Backoff is the wait before the first retry, doubled for each further
	// one (200ms when 0).
	Backoff time.Duration
	// EOS is the model's end-of-sequence id, sent among stop_token_ids
	// (negative: none).
	EOS int32
	// StopTokens are further ids that end a response.
	StopTokens []int32
	// Vocab, when > 0, is the model's vocabulary size: a returned id
	// outside [0, Vocab) is a server error.
	Vocab int
	// ChunkPrompts is how many distinct prompts one request carries
	// (0 = the request's distinct prompts over the number of servers
	// configured, rounded up, so every server gets one request). It does
	// not change when servers are dropped, so a chunk's seed and content
	// stay the same wherever it is redone.
	ChunkPrompts int
	// SyncDir is where Export writes the policy and what each reload
	// names as model_path; SyncEndpoint the servers' reload route
	// (/update_weights_from_disk when ""); SyncToken the bearer token sent
	// with reloads only ("" sends no Authorization header).
	SyncDir      string
	SyncEndpoint string
	SyncToken    string
	// Export writes the trainer's policy into a directory (the reload
	// directory's format; see backends/xla WriteServeWeights).
	Export func(dir string) error
	Log    zerolog.Logger
	// HTTP is the client used (a plain one with no overall timeout when nil:
	// Timeout bounds each request).
	HTTP *http.Client
}

// server is one endpoint and whether it is still used.
type server struct {
	url     string
	dead    bool
	lastErr error
}

// Client is a core.ServerGenerator over completions servers. Generate and
// SyncWeights must not be called concurrently with each other.
type Client struct {
	o       Options
	mu      sync.Mutex
	servers []*server
}

var _ core.ServerGenerator = (*Client)(nil)

// New checks o and returns a client using every server in o.Servers.
func New(o Options) (*Client, error) {
	if len(o.Servers) == 0 {
		return nil, errors.New("rollout: no servers")
	}
	if o.Timeout <= 0 {
		o.Timeout = 120 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.Retries < 0 {
		return nil, fmt.Errorf("rollout: retries %d < 0", o.Retries)
	}
	if o.SyncEndpoint == "" {
		o.SyncEndpoint = "/update_weights_from_disk"
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	c := &Client{o: o}
	for _, u := range o.Servers {
		c.servers = append(c.servers, &server{url: strings.TrimRight(u, "/")})
	}
	return c, nil
}

// LiveServers is the number of servers not dropped.
func (c *Client) LiveServers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.servers {
		if !s.dead {
			n++
		}
	}
	return n
}

func (c *Client) live() []*server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*server
	for _, s := range c.servers {
		if !s.dead {
			out = append(out, s)
		}
	}
	return out
}

// drop marks s dead and logs a warning naming it and what it was doing.
func (c *Client) drop(s *server, err error, what string) {
	c.mu.Lock()
	s.dead, s.lastErr = true, err
	left := 0
	for _, x := range c.servers {
		if !x.dead {
			left++
		}
	}
	c.mu.Unlock()
	c.o.Log.Warn().Str("server", s.url).Err(err).Int("servers_left", left).Msgf("rollout: dropping server after %s failed", what)
}

// noneLeft is the error when every server was dropped: each with its last
// error.
func (c *Client) noneLeft() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, s := range c.servers {
		parts = append(parts, fmt.Sprintf("%s: %v", s.url, s.lastErr))
	}
	return fmt.Errorf("rollout: no generation server left (rollout.servers): %s", strings.Join(parts, "; "))
}

// unit is a run of identical consecutive prompts of a request: the prompt,
// where the run starts in the request, and its length (the request's n).
type unit struct {
	prompt []int32
	start  int
	n      int
}

// chunk is one completions request: units with the same n.
type chunk struct {
	units []unit
	n     int
	seed  uint64
}

// units splits prompts into runs of equal consecutive prompts (the trainer
// sends each prompt rollout.n times in a row).
func units(prompts [][]int32) []unit {
	var out []unit
	for i, p := range prompts {
		if k := len(out) - 1; k >= 0 && slices.Equal(out[k].prompt, p) {
			out[k].n++
			continue
		}
		out = append(out, unit{prompt: p, start: i, n: 1})
	}
	return out
}

// chunks groups consecutive units of the same n, at most per distinct
// prompts each; chunk i's seed is trainer.Mix(seed, i), reduced to 53 bits (a
// JSON integer every parser reads exactly).
func chunks(us []unit, per int, seed uint64) []chunk {
	var out []chunk
	for _, u := range us {
		k := len(out) - 1
		if k < 0 || out[k].n != u.n || len(out[k].units) >= per {
			out = append(out, chunk{n: u.n})
			k++
		}
		out[k].units = append(out[k].units, u)
	}
	for i := range out {
		out[i].seed = trainer.Mix(seed, uint64(i)) & (1<<53 - 1)
	}
	return out
}

// Generate samples the request's responses on the live servers. Each
// distinct prompt is sent once with n (so a server shares its prefix);
// chunks go to the servers concurrently; a chunk that fails on a server
// after Retries retries drops the server and is redone on another. The
// generations come back in the request's order; LogProbs are the
// server's, NaN where it gave none (see parseChoice); Entropies and
// Embedding are nil.
func (c *Client) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	if len(req.Prompts) == 0 {
		return nil, nil
	}
	if req.Pooling != "" {
		return nil, fmt.Errorf("rollout: pooled embeddings (%s) are not available from remote servers", req.Pooling)
	}
	if req.Temperature <= 0 || req.MaxTokens < 1 {
		return nil, fmt.Errorf("rollout: temperature %v and max tokens %d: want > 0 and >= 1", req.Temperature, req.MaxTokens)
	}
	us := units(req.Prompts)
	per := c.o.ChunkPrompts
	if per <= 0 {
		per = max((len(us)+len(c.servers)-1)/len(c.servers), 1)
	}
	cs := chunks(us, per, req.Seed)
	out := make([]core.Generation, len(req.Prompts))
	stop := c.stopIDs(req.StopTokens)

	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		queue   []int
		done    int
		fatal   error
		workers int
	)
	for i := range cs {
		queue = append(queue, i)
	}
	live := c.live()
	if len(live) == 0 {
		return nil, c.noneLeft()
	}
	var wg sync.WaitGroup
	workers = len(live)
	for _, s := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				for len(queue) == 0 && done < len(cs) && fatal == nil {
					cond.Wait()
				}
				if done == len(cs) || fatal != nil {
					mu.Unlock()
					return
				}
				ci := queue[0]
				queue = queue[1:]
				mu.Unlock()
				gens, err := c.complete(s, cs[ci], req, stop)
				mu.Lock()
				var perm *permanentError
				switch {
				case err == nil:
					for j, g := range gens {
						out[j] = g // j indexes the request; chunks do not overlap
					}
					done++
				case errors.As(err, &perm):
					// The request itself is refused (HTTP 4xx): every
					// server would refuse it, so the server stays.
					if fatal == nil {
						fatal = fmt.Errorf("rollout: %s refused the request: %w", s.url, err)
					}
				default:
					// The server failed: its chunk goes back for the others.
					queue = append(queue, ci)
					workers--
					last := workers == 0
					cond.Broadcast()
					mu.Unlock()
					c.drop(s, err, "a completions request")
					if last {
						mu.Lock()
						if fatal == nil {
							fatal = c.noneLeft()
						}
						cond.Broadcast()
						mu.Unlock()
					}
					return
				}
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if fatal != nil {
		return nil, fatal
	}
	return out, nil
}

// stopIDs is the stop set: EOS, Options.StopTokens and the request's
// StopTokens, each once.
func (c *Client) stopIDs(req []int32) []int32 {
	var ids []int32
	if c.o.EOS >= 0 {
		ids = append(ids, c.o.EOS)
	}
	for _, id := range append(slices.Clone(c.o.StopTokens), req...) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// permanentError is a refusal that retrying or another server will not
// change (HTTP 4xx other than 408 and 429).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	Model          string    `json:"model,omitempty"`
	Prompt         [][]int32 `json:"prompt"`
	N              int       `json:"n"`
	Temperature    float64   `json:"temperature"`
	MaxTokens      int       `json:"max_tokens"`
	StopTokenIDs   []int32   `json:"stop_token_ids,omitempty"`
	Logprobs       int       `json:"logprobs"`
	TokensAsIDs    bool      `json:"return_tokens_as_token_ids"`
	Seed           uint64    `json:"seed"`
	SkipSpecialTok bool      `json:"skip_special_tokens"`
}

// completionResponse is the part of the response read.
type completionResponse struct {
	Choices []choice `json:"choices"`
}

type choice struct {
	Index    *int `json:"index"`
	Logprobs *struct {
		Tokens        []string   `json:"tokens"`
		TokenLogprobs []*float64 `json:"token_logprobs"`
	} `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
}

// complete runs chunk ch on s with retries and returns its generations
// keyed by request index.
func (c *Client) complete(s *server, ch chunk, req core.GenerateRequest, stop []int32) (map[int]core.Generation, error) {
	body := completionRequest{Model: c.o.Model, N: ch.n, Temperature: req.Temperature, MaxTokens: req.MaxTokens,
		StopTokenIDs: stop, Logprobs: 1, TokensAsIDs: true, Seed: ch.seed}
	for _, u := range ch.units {
		body.Prompt = append(body.Prompt, u.prompt)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt <= c.o.Retries; attempt++ {
		if attempt > 0 {
			time.Sleep(c.o.Backoff << (attempt - 1))
		}
		var resp []byte
		resp, last = c.post(s.url+"/v1/completions", data, "")
		if last == nil {
			var gens map[int]core.Generation
			if gens, last = c.parse(resp, ch, req.MaxTokens, stop); last == nil {
				return gens, nil
			}
		}
		var perm *permanentError
		if errors.As(last, &perm) {
			return nil, last
		}
		c.o.Log.Debug().Str("server", s.url).Int("attempt", attempt+1).Err(last).Msg("rollout: completions request failed")
	}
	return nil, last
}

// post sends a JSON body with the per-request timeout; token, when not
// empty, goes in an Authorization header. A non-200 status is an error
// (permanent for 4xx other than 408 and 429).
func (c *Client) post(url string, body []byte, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.o.HTTP.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		err := fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
			return nil, &permanentError{err}
		}
		return nil, err
	}
	return data, nil
}

// parse reads a completions response for chunk ch: len(units) * n choices
// ordered prompt-major (choice index = prompt index * n + j), each with its
// sampled token ids ("token_id:N") and their log-probs.
func (c *Client) parse(data []byte, ch chunk, maxTokens int, stop []int32) (map[int]core.Generation, error) {
	var r completionResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("completions response: %v", err)
	}
	want := len(ch.units) * ch.n
	if len(r.Choices) != want {
		return nil, fmt.Errorf("completions response: %d choices for %d prompts x n %d", len(r.Choices), len(ch.units), ch.n)
	}
	sorted := make([]*choice, want)
	for i := range r.Choices {
		ix := r.Choices[i].Index
		if ix == nil || *ix < 0 || *ix >= want || sorted[*ix] != nil {
			return nil, fmt.Errorf("completions response: choices[%d]: missing, out-of-range or repeated index", i)
		}
		sorted[*ix] = &r.Choices[i]
	}
	out := map[int]core.Generation{}
	for pi, u := range ch.units {
		for j := range ch.n {
			g, err := c.parseChoice(sorted[pi*ch.n+j], maxTokens, stop)
			if err != nil {
				return nil, fmt.Errorf("completions response: choices[%d]: %w", pi*ch.n+j, err)
			}
			out[u.start+j] = g
		}
	}
	return out, nil
}

// parseChoice turns one choice into a Generation. Truncated is
// finish_reason "length". A choice that finished with "stop" but whose
// tokens do not end in a stop id (a server that strips the stop token) gets
// stop_reason (or EOS) appended with an unknown log-prob, NaN: the
// truncated-importance-sampling weight is 1 there.
func (c *Client) parseChoice(ch *choice, maxTokens int, stop []int32) (core.Generation, error) {
	var g core.Generation
	if ch.Logprobs == nil {
		return g, errors.New("no logprobs")
	}
	lp := ch.Logprobs
	if len(lp.Tokens) != len(lp.TokenLogprobs) {
		return g, fmt.Errorf("%d tokens and %d token_logprobs", len(lp.Tokens), len(lp.TokenLogprobs))
	}
	for i, t := range lp.Tokens {
		id, err := tokenID(t)
		if err != nil {
			return g, fmt.Errorf("logprobs.tokens[%d]: %w", i, err)
		}
		if id < 0 || c.o.Vocab > 0 && int(id) >= c.o.Vocab {
			return g, fmt.Errorf("logprobs.tokens[%d]: id %d outside the vocabulary of %d", i, id, c.o.Vocab)
		}
		g.Tokens = append(g.Tokens, id)
		x := math.NaN()
		if p := lp.TokenLogprobs[i]; p != nil {
			x = *p
		}
		g.LogProbs = append(g.LogProbs, x)
	}
	switch ch.FinishReason {
	case "length":
		g.Truncated = true
	case "stop":
		if n := len(g.Tokens); n == 0 || !slices.Contains(stop, g.Tokens[n-1]) {
			id := c.o.EOS
			var sr int64
			if len(ch.StopReason) > 0 && json.Unmarshal(ch.StopReason, &sr) == nil {
				id = int32(sr)
			}
			if id < 0 {
				return g, errors.New(`finish_reason "stop" without a stop token, and no EOS to put back`)
			}
			g.Tokens = append(g.Tokens, id)
			g.LogProbs = append(g.LogProbs, math.NaN())
		}
	default:
		return g, fmt.Errorf("finish_reason %q: want stop or length", ch.FinishReason)
	}
	if len(g.Tokens) == 0 || len(g.Tokens) > maxTokens {
		return g, fmt.Errorf("%d tokens: want 1..max_tokens = %d", len(g.Tokens), maxTokens)
	}
	return g, nil
}

// tokenID parses vLLM's "token_id:N" form.
func tokenID(s string) (int32, error) {
	rest, ok := strings.CutPrefix(s, "token_id:")
	if !ok {
		return 0, fmt.Errorf("%q: want token_id:N (return_tokens_as_token_ids)", s)
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q: %v", s, err)
	}
	return int32(n), nil
}

// SyncWeights writes the policy into SyncDir with Export and POSTs
// {"model_path": SyncDir} to every live server's SyncEndpoint, with the
// bearer token, concurrently and with retries; a server that fails to
// reload is dropped like a dead one. It fails when none is left.
func (c *Client) SyncWeights() error {
	if c.o.Export == nil || c.o.SyncDir == "" {
		return errors.New("rollout: weight sync without a directory or an exporter (rollout.weight_sync.dir)")
	}
	dir, err := filepath.Abs(c.o.SyncDir)
	if err != nil {
		return err
	}
	if err := c.o.Export(dir); err != nil {
		return fmt.Errorf("writing the policy into %s: %w", dir, err)
	}
	body, _ := json.Marshal(map[string]string{"model_path": dir})
	live := c.live()
	if len(live) == 0 {
		return c.noneLeft()
	}
	errs := make([]error, len(live))
	var wg sync.WaitGroup
	for i, s := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.reload(s, body)
		}()
	}
	wg.Wait()
	for i, s := range live {
		if errs[i] != nil {
			c.drop(s, errs[i], "a weight reload")
		}
	}
	if c.LiveServers() == 0 {
		return c.noneLeft()
	}
	return nil
}

// reload asks s to load the weights in the sync directory.
func (c *Client) reload(s *server, body []byte) error {
	var last error
	for attempt := 0; attempt <= c.o.Retries; attempt++ {
		if attempt > 0 {
			time.Sleep(c.o.Backoff << (attempt - 1))
		}
		var data []byte
		if data, last = c.post(s.url+c.o.SyncEndpoint, body, c.o.SyncToken); last == nil {
			var r struct {
				Success bool   `json:"success"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(data, &r); err != nil {
				last = fmt.Errorf("reload response: %v", err)
			} else if !r.Success {
				last = fmt.Errorf("reload refused: %s", r.Message)
			} else {
				return nil
			}
		}
		var perm *permanentError
		if errors.As(last, &perm) {
			return last // a wrong token or directory: retrying will not help
		}
	}
	return last
}
