package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// vmHWM is a process's peak resident memory in bytes (Linux /proc).
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Skipf("no /proc status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// A 60 MB completions body of one 30M-id prompt (under the 64 MiB limit)
// is refused while it streams in: the serve process's peak memory stays
// under 200 MB (it reached 2.29 GB when the whole body was decoded first).
func TestServeHugePromptMemory(t *testing.T) {
	base, err := filepath.Glob(filepath.Join("..", "..", "assets", "base", "*", "policy.gob"))
	if err != nil || len(base) == 0 {
		t.Fatalf("no shipped base policy: %v", err)
	}
	url, cmd, _ := startServe(t, "--checkpoint", filepath.Dir(base[0]), "--engine", "cpu")
	before := vmHWM(t, cmd.Process.Pid)
	// {"prompt": [[1,1,...]]}, 30M ids, streamed to the server.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"prompt": [[1`))
		chunk := bytes.Repeat([]byte(",1"), 1<<20)
		for range 30 {
			if _, err := pw.Write(chunk); err != nil {
				return // the server answered and closed the connection
			}
		}
		pw.Write([]byte(`]]}`))
		pw.Close()
	}()
	resp, err := http.Post(url+"/v1/completions", "application/json", pr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pr.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "no new token would fit") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	peak := vmHWM(t, cmd.Process.Pid)
	t.Logf("serve peak RSS: %.1f MB before the request, %.1f MB after", float64(before)/1e6, float64(peak)/1e6)
	if peak > 200e6 {
		t.Errorf("serve's peak RSS reached %.1f MB for a 60 MB body, want under 200 MB", float64(peak)/1e6)
	}
	// The server still answers.
	r2, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt": [[1, 5]], "max_tokens": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != 200 {
		t.Fatalf("next request: %d", r2.StatusCode)
	}
}
