// Package serve is `cde-run serve`: an HTTP server that samples from a cde
// policy with the subset of the OpenAI-compatible completions API that
// vLLM serves and RL trainers use (token-id prompts in, token ids and
// log-probs out), plus SGLang's weight-reload endpoint, so a trainer can
// move generation to other processes and push new weights to them.
//
// Endpoints (docs/serve.md has every field):
//
//	POST /v1/completions          sample n completions of each prompt (token ids or text)
//	POST /v1/chat/completions     sample n replies to a chat (the model's chat template)
//	GET  /health                  200 once the model is loaded
//	GET  /v1/models               the served model's name
//	POST /update_weights_from_disk reload the weights from the fixed directory (token)
//
// The backend is not safe for concurrent use: requests are handled
// concurrently but run on the model one at a time, each as one Generate
// call of its prompts x n rows. Requests are not merged into one batch:
// the sampling noise of a row depends on the batch it is drawn in, so a
// request's seed would no longer fix its tokens. A reload takes the same
// lock, so a completion in progress finishes on the old weights and the
// next one samples from the new.
package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
)

// Engine is what the server needs of a model: xla.Backend satisfies it.
// Calls are serialised by the server.
type Engine interface {
	Generate(req core.GenerateRequest) ([]core.Generation, error)
	// LoadPolicyWeights replaces the weights with those in dir, leaving
	// the old ones in place on any error.
	LoadPolicyWeights(dir string) error
}

// Model is a loaded policy with what the API needs around it.
type Model struct {
	Engine    Engine
	Tokenizer core.Tokenizer // decodes the returned text
	// Vocab bounds token ids: a prompt or stop id must be in [0, Vocab).
	Vocab int
	// MaxLen is the model's longest sequence: a prompt padded to a
	// multiple of 4, plus max_tokens, must fit (as Generate requires).
	MaxLen int
	// EOS is the id the engine stops at; ExtraEOS are more ids that end a
	// completion the same way (generation_config.json's other eos ids).
	EOS      int32
	ExtraEOS []int32
	// TextBOS starts a text prompt of /v1/completions (-1: none), as
	// Hugging Face's tokenizer adds it (add_special_tokens).
	TextBOS int32
	// Template renders the messages of /v1/chat/completions; with
	// ChatNone (no chat template) or TemplateErr (one cde does not
	// render) that endpoint answers 400.
	Template    tasks.ChatTemplate
	TemplateErr error
	// Close releases the engine (nil: nothing to release).
	Close func() error
}

// Options configures a Server. Zero values take the defaults.
type Options struct {
	Name string // the served model name (responses, /v1/models)
	// Token is the shared secret of the reload endpoint; ReloadDir the one
	// directory it loads from. Reload is off unless both are set.
	Token     string
	ReloadDir string
	MaxN      int   // largest n per request (default 1024)
	MaxRows   int   // largest prompts x n per request (default 4096)
	MaxBody   int64 // largest request body in bytes, whatever the model and MaxRows allow (default 64 MiB)
	// RequestTimeout bounds one completions request from its arrival to
	// its answer, waiting included (default 10 minutes): past it the
	// generation stops between decode steps and the answer is 503.
	RequestTimeout time.Duration
	// MaxQueue is how many completions requests may wait for the model
	// behind the one it runs (default 64); one more is answered 429 with
	// Retry-After.
	MaxQueue int
	Log      zerolog.Logger
}

// Server is the http.Handler of the API.
type Server struct {
	m *Model
	o Options
	// sem serialises every call into m.Engine (a one-slot semaphore, so a
	// waiting request can give up when its context ends); queued counts
	// the completions requests running or waiting.
	sem    chan struct{}
	queued atomic.Int64
	auth   [sha256.Size]byte
	// reload is the reload directory, absolute and cleaned; reloadReal the
	// same with symlinks resolved at start-up ("" when it did not exist).
	reload, reloadReal string
}

// New makes the server of m. A ReloadDir is made absolute and its symlinks
// resolved now: that fixed directory is the only one reload ever reads.
func New(m *Model, o Options) (*Server, error) {
	if o.MaxN == 0 {
		o.MaxN = 1024
	}
	if o.MaxRows == 0 {
		o.MaxRows = 4096
	}
	if o.MaxBody == 0 {
		o.MaxBody = 64 << 20
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 10 * time.Minute
	}
	if o.MaxQueue == 0 {
		o.MaxQueue = 64
	}
	if o.MaxN < 1 || o.MaxRows < 1 || o.MaxBody < 1 || o.MaxQueue < 1 || o.RequestTimeout < 0 {
		return nil, fmt.Errorf("max n %d, max rows %d, max body %d and max queue %d must be >= 1, the request timeout %v > 0",
			o.MaxN, o.MaxRows, o.MaxBody, o.MaxQueue, o.RequestTimeout)
	}
	if o.Name == "" {
		o.Name = "cde"
	}
	s := &Server{m: m, o: o, sem: make(chan struct{}, 1), auth: sha256.Sum256([]byte(o.Token))}
	if o.ReloadDir != "" {
		abs, err := filepath.Abs(o.ReloadDir)
		if err != nil {
			return nil, fmt.Errorf("reload dir %s: %w", o.ReloadDir, err)
		}
		s.reload = filepath.Clean(abs)
		if real, err := filepath.EvalSymlinks(s.reload); err == nil {
			s.reloadReal = real
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("reload dir: %w", err)
		}
	}
	return s, nil
}

// ReloadEnabled reports whether the reload endpoint is on (a token and a
// reload directory were given).
func (s *Server) ReloadEnabled() bool { return s.o.Token != "" && s.reload != "" }

// apiError is an error answer: HTTP status and the message, which names
// the offending field.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(errorBody(status, "encoding the response: "+err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// errorBody is the OpenAI-style error object vLLM answers with.
func errorBody(status int, msg string) map[string]any {
	typ := "invalid_request_error"
	switch {
	case status >= 500:
		typ = "server_error"
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusNotFound:
		typ = "not_found_error"
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody(status, msg))
}

// ServeHTTP routes the five endpoints; anything else is a JSON 404, a
// known path with another method a JSON 405.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	routes := map[string]struct {
		method string
		h      func(http.ResponseWriter, *http.Request)
	}{
		"/v1/completions":           {http.MethodPost, s.completions},
		"/v1/chat/completions":      {http.MethodPost, s.chatCompletions},
		"/health":                   {http.MethodGet, s.health},
		"/v1/models":                {http.MethodGet, s.models},
		"/update_weights_from_disk": {http.MethodPost, s.updateWeights},
	}
	rt, ok := routes[r.URL.Path]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s", r.URL.Path))
		return
	}
	if r.Method != rt.method {
		w.Header().Set("Allow", rt.method)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, rt.method))
		return
	}
	rt.h(w, r)
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list",
		"data": []map[string]any{{"id": s.o.Name, "object": "model", "owned_by": "cde"}}})
}

// readBody reads at most limit bytes of the request body.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, &apiError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body: larger than %d bytes", limit)}
		}
		return nil, badRequest("request body: %v", err)
	}
	return body, nil
}

// completions samples and answers one completions request.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	req, aerr := readCompletion(http.MaxBytesReader(w, r.Body, completionBodyLimit(s.m, s.o)), s.m, s.o)
	if aerr != nil {
		writeError(w, aerr.status, aerr.msg)
		return
	}
	start := time.Now()
	gens, ok := s.generate(w, r, req)
	if !ok {
		return
	}
	resp := s.response(req, gens)
	s.o.Log.Info().Int("prompts", len(req.prompts)).Int("n", req.n).Int("completion_tokens", resp.Usage.CompletionTokens).
		Dur("took", time.Since(start)).Msg("completions")
	writeJSON(w, http.StatusOK, resp)
}

// chatCompletions samples and answers one chat completions request: its
// messages rendered with the model's chat template, then as completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	if s.m.TemplateErr != nil {
		writeError(w, http.StatusBadRequest, "chat completions are off for this model: "+s.m.TemplateErr.Error()+"; send text or token ids to /v1/completions")
		return
	}
	if s.m.Template.Name == tasks.ChatNone {
		writeError(w, http.StatusBadRequest, "chat completions are off for this model: it has no chat template; send text or token ids to /v1/completions")
		return
	}
	req, aerr := readChat(http.MaxBytesReader(w, r.Body, chatBodyLimit(s.m, s.o)), s.m, s.o)
	if aerr != nil {
		writeError(w, aerr.status, aerr.msg)
		return
	}
	start := time.Now()
	gens, ok := s.generate(w, r, req)
	if !ok {
		return
	}
	resp := s.chatResponse(req, gens)
	s.o.Log.Info().Int("n", req.n).Int("completion_tokens", resp.Usage.CompletionTokens).
		Dur("took", time.Since(start)).Msg("chat completions")
	writeJSON(w, http.StatusOK, resp)
}

// generate runs req on the model, queued behind the running request: it
// answers the error itself (429 with the queue full, 503 past the request
// timeout, 500 for an engine error, nothing to a client gone away) and
// returns false then.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, req *completionRequest) ([]core.Generation, bool) {
	gr := core.GenerateRequest{Temperature: req.temperature, MaxTokens: req.maxTokens, Seed: req.seed}
	for _, p := range req.prompts {
		for range req.n {
			gr.Prompts = append(gr.Prompts, p)
		}
	}
	gr.StopTokens = append(append([]int32{}, req.stop...), s.m.ExtraEOS...)
	start := time.Now()
	// One running and MaxQueue waiting at most: a client that floods the
	// server gets 429s, not an unbounded queue.
	if n := s.queued.Add(1); n > int64(s.o.MaxQueue)+1 {
		s.queued.Add(-1)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("the server has %d completions requests waiting, its limit (--max-queue); retry later", s.o.MaxQueue))
		return nil, false
	}
	defer s.queued.Add(-1)
	// The request's context ends when the client goes away; the deadline
	// bounds the whole request. Either stops the generation between decode
	// steps, so an abandoned request frees the model.
	ctx, cancel := context.WithTimeout(r.Context(), s.o.RequestTimeout)
	defer cancel()
	gr.Done = ctx.Done()
	var gens []core.Generation
	err := s.lockedCtx(ctx, func() error {
		var err error
		gens, err = s.m.Engine.Generate(gr)
		return err
	})
	if r.Context().Err() != nil {
		s.o.Log.Info().Int("prompts", len(req.prompts)).Int("n", req.n).Dur("after", time.Since(start)).Msg("completions: the client went away; generation stopped")
		return nil, false
	}
	if ctx.Err() != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the request took longer than the server's limit of %v (--request-timeout); generation stopped", s.o.RequestTimeout))
		return nil, false
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "generate: "+err.Error())
		return nil, false
	}
	return gens, true
}

// locked runs f alone on the model. A panic in the engine becomes an
// error (the request answers 500) instead of leaving the lock held.
func (s *Server) locked(f func() error) (err error) {
	return s.lockedCtx(context.Background(), f)
}

// lockedCtx is locked, giving up with ctx's error when ctx ends while it
// waits for the model.
func (s *Server) lockedCtx(ctx context.Context, f func() error) (err error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	if err := ctx.Err(); err != nil {
		return err // gone while it waited: do not spend the model on it
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine panic: %v", p)
		}
	}()
	return f()
}

// The response, field for field as vLLM writes it.
type (
	completionResponse struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   usage    `json:"usage"`
	}
	choice struct {
		Index        int       `json:"index"`
		Text         string    `json:"text"`
		Logprobs     *logprobs `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
		StopReason   *int32    `json:"stop_reason"`
	}
	logprobs struct {
		Tokens        []string  `json:"tokens"`
		TokenLogprobs []float64 `json:"token_logprobs"`
		TopLogprobs   []any     `json:"top_logprobs"`
		TextOffset    []int     `json:"text_offset"`
	}
	usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
)

// response builds the answer of req from its generations, which are the
// prompts in order, each repeated n times (so choice i = prompt i/n).
func (s *Server) response(req *completionRequest, gens []core.Generation) completionResponse {
	resp := completionResponse{ID: "cmpl-" + randomHex(12), Object: "text_completion", Created: time.Now().Unix(),
		Model: s.o.Name, Choices: make([]choice, len(gens))}
	for _, p := range req.prompts {
		resp.Usage.PromptTokens += len(p)
	}
	for i, g := range gens {
		c := choice{Index: i, FinishReason: "length"}
		text := g.Tokens
		if !g.Truncated && len(g.Tokens) > 0 {
			c.FinishReason = "stop"
			last := g.Tokens[len(g.Tokens)-1]
			text = g.Tokens[:len(g.Tokens)-1] // the stop token is not text
			if last != s.m.EOS && !containsID(s.m.ExtraEOS, last) && containsID(req.stop, last) {
				c.StopReason = &last
			}
		}
		c.Text = s.m.Tokenizer.Decode(text)
		if req.logprobs {
			lp := &logprobs{Tokens: make([]string, len(g.Tokens)), TokenLogprobs: g.LogProbs, TextOffset: make([]int, len(g.Tokens))}
			off := 0
			for j, id := range g.Tokens {
				piece := s.m.Tokenizer.Decode([]int32{id})
				if req.tokenIDs {
					lp.Tokens[j] = fmt.Sprintf("token_id:%d", id)
				} else {
					lp.Tokens[j] = piece
				}
				lp.TextOffset[j] = off
				off += utf8.RuneCountInString(piece)
			}
			if lp.TokenLogprobs == nil {
				lp.TokenLogprobs = []float64{}
			}
			c.Logprobs = lp
		}
		resp.Usage.CompletionTokens += len(g.Tokens)
		resp.Choices[i] = c
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	return resp
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// updateWeights is SGLang's POST /update_weights_from_disk: with the right
// bearer token and model_path naming the reload directory, the weights
// found there replace the served ones. No path from the request is ever
// opened: it only has to name the directory fixed at start-up, which is
// what is read.
func (s *Server) updateWeights(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		body := errorBody(status, msg)
		body["success"], body["message"] = false, msg
		writeJSON(w, status, body)
	}
	if !s.ReloadEnabled() {
		fail(http.StatusNotFound, "weight reload is off: start the server with --reload-dir and a token (--token or CDE_SERVE_TOKEN)")
		return
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	// Hashes are compared, so neither the token nor its length leaks
	// through timing.
	if sum := sha256.Sum256([]byte(got)); !ok || subtle.ConstantTimeCompare(sum[:], s.auth[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="cde-run serve"`)
		fail(http.StatusUnauthorized, "Authorization: want the server's bearer token")
		return
	}
	body, aerr := readBody(w, r, 1<<20)
	if aerr != nil {
		fail(aerr.status, aerr.msg)
		return
	}
	var req struct {
		ModelPath *string `json:"model_path"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) && se.Offset == int64(len(body)) && len(bytes.TrimSpace(body)) > 0 {
			fail(http.StatusBadRequest, fmt.Sprintf("request body: the body ends at byte %d, inside the JSON object: truncated (want {\"model_path\": string})", len(body)))
		} else {
			fail(http.StatusBadRequest, "request body: want {\"model_path\": string}: "+err.Error())
		}
		return
	}
	if path := repeatedKey(body, ""); path != "" {
		fail(http.StatusBadRequest, duplicateKey(path).msg)
		return
	}
	if req.ModelPath == nil || *req.ModelPath == "" {
		fail(http.StatusBadRequest, "model_path: required (the server's reload directory)")
		return
	}
	if !s.isReloadDir(*req.ModelPath) {
		fail(http.StatusForbidden, "model_path: not this server's reload directory (it loads only from the --reload-dir it was started with)")
		return
	}
	dir := s.reload
	if s.reloadReal != "" {
		dir = s.reloadReal
	}
	start := time.Now()
	err := s.locked(func() error { return s.m.Engine.LoadPolicyWeights(dir) })
	if err != nil {
		s.o.Log.Error().Err(err).Msg("reload failed; the old weights keep serving")
		fail(http.StatusInternalServerError, err.Error()+" (the old weights keep serving)")
		return
	}
	s.o.Log.Info().Str("dir", dir).Dur("took", time.Since(start)).Msg("weights reloaded")
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "loaded the weights in " + dir})
}

// isReloadDir reports whether path names the reload directory: equal to
// it after filepath.Abs and Clean, or, with symlinks resolved, equal to
// its resolved form. Only a caller holding the token gets here.
func (s *Server) isReloadDir(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	abs = filepath.Clean(abs)
	if abs == s.reload || (s.reloadReal != "" && abs == s.reloadReal) {
		return true
	}
	if s.reloadReal == "" {
		return false
	}
	real, err := filepath.EvalSymlinks(abs)
	return err == nil && real == s.reloadReal
}

// DefaultAddr is where the server listens unless told otherwise.
const DefaultAddr = "127.0.0.1:8000"

// Listen opens a TCP listener on addr (host:port). An empty host means
// 127.0.0.1, not every interface: listening beyond the machine takes an
// explicit host (0.0.0.0, an address), and is logged as a warning, since
// anyone who can reach the port can sample from the model.
func Listen(addr string, log zerolog.Logger) (net.Listener, error) {
	if addr == "" {
		addr = DefaultAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: want HOST:PORT: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); !(host == "localhost" || (ip != nil && ip.IsLoopback())) {
		log.Warn().Str("host", host).Msg("listening beyond loopback: anyone who can reach this port can sample from the model (reload still needs the token)")
	}
	return net.Listen("tcp", net.JoinHostPort(host, port))
}

// Serve answers on ln until ctx is cancelled, then stops accepting and
// waits up to grace for the requests in progress.
//
// A connection must send its headers within 30 s and its whole request
// within ReadTimeout (2 minutes; a 64 MiB body at 1 MB/s fits), an answer
// must be written within writeTimeout (the request timeout and a minute),
// and an idle keep-alive connection is closed after 2 minutes: a client
// that opens connections and sends nothing, or half a body, holds them
// for bounded time.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	writeTimeout := 11 * time.Minute
	if s, ok := h.(*Server); ok {
		writeTimeout = s.o.RequestTimeout + time.Minute
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ReadTimeout: ReadTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// ReadTimeout bounds the reading of one request, headers and body.
var ReadTimeout = 2 * time.Minute
