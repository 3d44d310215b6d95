package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer safe to write from the server's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cde-run serve on 127.0.0.1:0 prints its address once ready, answers a
// completion, and exits 0 when its context ends (as on SIGINT).
func TestServeCommand(t *testing.T) {
	dir := tinyQwen3Dir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- runServe(ctx, []string{"--model", dir, "--engine", "cpu", "--max-len", "64", "--addr", "127.0.0.1:0"}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no listening line (%v); stderr:\n%s", err, stderr.String())
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("stdout line %q", line)
	}
	// "<|im_start|>user" in Qwen3's vocabulary.
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt": [[151644, 872]], "n": 2, "max_tokens": 3, "logprobs": 1, "return_tokens_as_token_ids": true, "seed": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Logprobs struct {
				Tokens        []string  `json:"tokens"`
				TokenLogprobs []float64 `json:"token_logprobs"`
			} `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if out.Model != filepath.Base(dir) || len(out.Choices) != 2 {
		t.Fatalf("model %q, %d choices", out.Model, len(out.Choices))
	}
	for i, c := range out.Choices {
		n := len(c.Logprobs.Tokens)
		if n < 1 || n > 3 || len(c.Logprobs.TokenLogprobs) != n || !strings.HasPrefix(c.Logprobs.Tokens[0], "token_id:") {
			t.Fatalf("choice %d: %+v", i, c)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d after shutdown; stderr:\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "listening beyond loopback") {
		t.Fatalf("warned about a loopback address:\n%s", stderr.String())
	}
}

// Flag errors exit 2 before any model is loaded.
func TestServeFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"--model", "a", "--checkpoint", "b"}, {"--model", "a", "extra"}, {"--bogus"}} {
		var stderr bytes.Buffer
		if code := runServe(context.Background(), args, io.Discard, &stderr); code != 2 {
			t.Fatalf("%v: exit %d, want 2: %s", args, code, stderr.String())
		}
	}
}
