package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `cde-run board` serves the page and the API of the directories given, on
// 127.0.0.1, read-only, and stops on SIGINT with status 0.
func TestBoardCommand(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "r"), 0o755)
	writeFile(t, filepath.Join(dir, "r", "metrics.jsonl"), `{"step":0,"reward/acc":0.5}`+"\n"+`{"step":1,"reward/acc":0.75}`+"\n")
	if out, err := exec.Command(cdeRun, "board", filepath.Join(dir, "missing")).CombinedOutput(); err == nil || !strings.Contains(string(out), "missing") {
		t.Errorf("a missing directory: %v\n%s", err, out)
	}
	if out, err := exec.Command(cdeRun, "board", "--addr", "nonsense").CombinedOutput(); err == nil || !strings.Contains(string(out), "HOST:PORT") {
		t.Errorf("a bad --addr: %v\n%s", err, out)
	}
	cmd := exec.Command(cdeRun, "board", "--addr", "127.0.0.1:0", dir)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	_, url, ok := strings.Cut(strings.TrimSpace(line), " on ")
	if err != nil || !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("no address line: %q (%v)", line, err)
	}
	resp, err := http.Get(url + "api/list")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Items []struct{ Path, State, Kind string }
	}
	json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	if len(l.Items) != 1 || l.Items[0].Path != "r" || l.Items[0].Kind != "run" {
		t.Errorf("list: %+v", l)
	}
	resp, err = http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "app.js") {
		t.Errorf("the page: %s", page)
	}
	resp, err = http.Post(url+"api/list", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", resp.StatusCode)
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGINT: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("board did not stop on SIGINT")
	}
}
