package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cde-rl/cde/core"
	"github.com/cde-rl/cde/tasks"
)

// recEngine forwards to an engine and reports when each Generate starts
// and what it returned.
type recEngine struct {
	Engine
	started chan struct{}
	errs    chan error
}

func (e *recEngine) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	e.started <- struct{}{}
	g, err := e.Engine.Generate(req)
	e.errs <- err
	return g, err
}

// A request the client abandons stops its generation between decode
// steps, so the next request finds the model free (it used to run to the
// end: 342 s for the next 1-token request in the probe).
func TestAbandonedRequestStops(t *testing.T) {
	m := charModel(t, 1)
	rec := &recEngine{Engine: m.Engine, started: make(chan struct{}, 4), errs: make(chan error, 4)}
	m.Engine = rec
	ts := newTestServer(t, m, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	big := `{"prompt": [[1, 5, 6, 7]], "n": 512, "max_tokens": 56, "temperature": 1}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/completions", strings.NewReader(big))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-rec.started
	cancel() // the client goes away mid-generation
	<-done
	if err := <-rec.errs; !errors.Is(err, core.ErrGenerateStopped) {
		t.Fatalf("the abandoned 512 x 56 generation returned %v, want it stopped", err)
	}
	if status, out := post(t, ts.URL, "/v1/completions", `{"prompt": [[1, 5]], "max_tokens": 1}`); status != 200 {
		t.Fatalf("the next request: %d %s", status, out)
	}
	<-rec.started
	if err := <-rec.errs; err != nil {
		t.Fatal(err)
	}
}

// The server-side deadline stops a request and answers 503 naming the flag.
func TestRequestTimeout(t *testing.T) {
	m := charModel(t, 1)
	ts := newTestServer(t, m, Options{RequestTimeout: time.Nanosecond})
	status, out := post(t, ts.URL, "/v1/completions", `{"prompt": [[1, 5]], "n": 64, "max_tokens": 40}`)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(out), "--request-timeout") {
		t.Fatalf("status %d: %s", status, out)
	}
}

// blockEngine holds every Generate until release is closed.
type blockEngine struct {
	started chan struct{}
	release chan struct{}
}

func (e *blockEngine) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	e.started <- struct{}{}
	<-e.release
	gens := make([]core.Generation, len(req.Prompts))
	for i := range gens {
		gens[i] = core.Generation{Tokens: []int32{tasks.EosID}, LogProbs: []float64{-1}, Entropies: []float64{1}}
	}
	return gens, nil
}
func (e *blockEngine) LoadPolicyWeights(string) error { return nil }

// One request runs and MaxQueue wait; one more is answered 429 with
// Retry-After, and the others are served once the model is free.
func TestQueueBound(t *testing.T) {
	eng := &blockEngine{started: make(chan struct{}, 4), release: make(chan struct{})}
	m := &Model{Engine: eng, Tokenizer: tasks.NewCharTokenizer(), Vocab: 101, MaxLen: 64, EOS: tasks.EosID}
	s, err := New(m, Options{MaxQueue: 1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	body := `{"prompt": [[1, 5]], "max_tokens": 1}`
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = postNoFatal(ts.URL, "/v1/completions", body, "")
		}()
		if i == 0 {
			<-eng.started // the first one holds the model
		}
	}
	for deadline := time.Now().Add(time.Minute); s.queued.Load() < 2 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
	}
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a third request with one running and one waiting: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(eng.release)
	wg.Wait()
	if statuses[0] != 200 || statuses[1] != 200 {
		t.Errorf("the running and the waiting request: %v, want 200 200", statuses)
	}
}

// A prompt that leaves no room for a new token says so, with no negative
// count of tokens that fit (it used to say "at most -9936 new tokens fit"):
// one longer than the context is refused while it streams in, one that
// only its padding makes too long after.
func TestPromptTooLong(t *testing.T) {
	m := &Model{Engine: &blockEngine{}, Tokenizer: tasks.NewCharTokenizer(), Vocab: 101, MaxLen: 64, EOS: tasks.EosID}
	ts := newTestServer(t, m, Options{})
	for _, c := range []struct {
		n    int
		want string
	}{
		{100, "prompt[0]: more than 63 tokens: the model's max length is 64, so no new token would fit"},
		{62, "prompt 0 has 62 tokens (64 padded to a multiple of 4): the model's max length is 64, so no new token fits"},
	} {
		long := "[" + strings.Repeat("5, ", c.n-1) + "5]"
		status, out := post(t, ts.URL, "/v1/completions", `{"prompt": [`+long+`], "max_tokens": 1}`)
		if status != 400 || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "at most -") {
			t.Errorf("%d tokens: status %d: %s", c.n, status, out)
		}
	}
}

// A connection that sends its headers and part of a body, then nothing, is
// closed once ReadTimeout passes (it used to stay open for as long as the
// client liked: 500 such connections held for a whole probe), and the
// server answers others meanwhile.
func TestSlowConnectionClosed(t *testing.T) {
	old := ReadTimeout
	ReadTimeout = 300 * time.Millisecond
	defer func() { ReadTimeout = old }()
	m := charModel(t, 1)
	s, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, s, time.Second) }()
	defer func() { cancel(); <-done }()
	var conns []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":")
		conns = append(conns, c)
	}
	url := "http://" + ln.Addr().String()
	if status, out := post(t, url, "/v1/completions", `{"prompt": [[1, 5]], "max_tokens": 1}`); status != 200 {
		t.Fatalf("a request beside the slow connections: %d %s", status, out)
	}
	// Each slow connection is closed by the server: a read ends (with
	// EOF, a reset, or the 400/408 the server writes before closing) well
	// before the generous deadline below.
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err := io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("slow connection %d: still open after 20 s (read timeout %v)", i, ReadTimeout)
		}
	}
}

// stepEngine decodes one step at a time as the test releases them,
// checking req.Done before each step as the backend does between decode
// steps; it records the step it stopped at.
type stepEngine struct {
	calls   atomic.Int32
	started chan (<-chan struct{}) // each Generate's Done, as it starts
	running chan int               // the step now running
	release chan struct{}          // ends the running step
	stopped chan int               // the step Generate stopped before
	abort   chan struct{}          // closed: every Generate returns (a failed test's cleanup)
}

func (e *stepEngine) Generate(req core.GenerateRequest) ([]core.Generation, error) {
	e.calls.Add(1)
	e.started <- req.Done
	for step := 1; step <= req.MaxTokens; step++ {
		select {
		case <-req.Done:
			e.stopped <- step
			return nil, core.ErrGenerateStopped
		default:
		}
		select {
		case e.running <- step:
		case <-e.abort:
			return nil, errors.New("aborted")
		}
		select {
		case <-e.release:
		case <-e.abort:
			return nil, errors.New("aborted")
		}
	}
	return quickEngine{}.Generate(req)
}
func (e *stepEngine) LoadPolicyWeights(string) error { return nil }

// A client that goes away mid-generation closes its request's Done while
// the step in flight runs, so generation stops before the next step; a
// request that waits in the queue and is abandoned never reaches the
// model. Counted in steps, not timed: the safety timeouts only turn a
// hang into a failure.
func TestAbandonedRequestStopsAtNextStep(t *testing.T) {
	eng := &stepEngine{started: make(chan (<-chan struct{}), 4), running: make(chan int), release: make(chan struct{}),
		stopped: make(chan int, 4), abort: make(chan struct{})}
	m := quickModel()
	m.Engine = eng
	s, err := New(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()
	defer close(eng.abort) // before ts.Close, which waits for the handlers
	send := func(ctx context.Context, body string) chan int {
		status := make(chan int, 1)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/completions", strings.NewReader(body))
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				status <- 0
				return
			}
			resp.Body.Close()
			status <- resp.StatusCode
		}()
		return status
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	send(ctxA, `{"prompt": [[1, 5]], "max_tokens": 50}`)
	doneA := <-eng.started
	for want := 1; want <= 3; want++ {
		if step := <-eng.running; step != want {
			t.Fatalf("step %d, want %d", step, want)
		}
		if want < 3 {
			eng.release <- struct{}{}
		}
	}
	// B waits behind A; its client goes away; it leaves the queue.
	ctxB, cancelB := context.WithCancel(context.Background())
	send(ctxB, `{"prompt": [[1, 6]], "max_tokens": 50}`)
	for deadline := time.Now().Add(time.Minute); s.queued.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B never queued")
		}
	}
	cancelB()
	for deadline := time.Now().Add(time.Minute); s.queued.Load() > 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned waiting request is still queued after a minute")
		}
	}
	// A's client goes away during step 3: Done closes while it runs.
	cancelA()
	select {
	case <-doneA:
	case <-time.After(time.Minute):
		t.Fatal("A's Done still open a minute after its client went away")
	}
	eng.release <- struct{}{} // step 3 ends
	select {
	case step := <-eng.stopped:
		if step != 4 {
			t.Fatalf("stopped before step %d, want 4 (the first after the client went away)", step)
		}
	case <-eng.running:
		t.Fatal("a step ran after the client went away")
	}
	// The model is free and B never ran: the next request is the second Generate.
	status := send(context.Background(), `{"prompt": [[1, 5]], "max_tokens": 1}`)
	<-eng.started
	<-eng.running
	eng.release <- struct{}{}
	if got := <-status; got != 200 {
		t.Fatalf("the next request: %d", got)
	}
	if n := eng.calls.Load(); n != 2 {
		t.Fatalf("%d Generate calls, want 2 (the abandoned waiting request must not run)", n)
	}
}
