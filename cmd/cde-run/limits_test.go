package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runLimited runs cde-run with stdin from the file stdin ("" for none)
// and kills it after limit: an input that is read without a cap would
// otherwise grow until the machine runs out of memory.
func runLimited(t *testing.T, limit time.Duration, stdin string, args ...string) (string, error, time.Duration) {
	t.Helper()
	cmd := exec.Command(cdeRun, args...)
	cmd.Env = append(os.Environ(), "GOMLX_NO_AUTO_INSTALL=1")
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err, time.Since(began)
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("cde-run %s: still running after %v (reading without a cap?)\n%s", strings.Join(args, " "), limit, out.String())
		return "", nil, 0
	}
}

// Every input read whole is capped: /dev/zero as a config, a bench file,
// a rollout file or the stdin of tokenize and verify is an error naming
// the input and the cap within seconds (it used to be read until the
// kernel killed the process), and a config over the cap is refused
// before it is read.
func TestInputLimits(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "tiny.yaml")
	writeFile(t, cfg, tinyConfig)
	big := filepath.Join(tmp, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100 << 20); err != nil { // a sparse 100 MB file
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"train", "--config", "/dev/zero"}, "config /dev/zero: larger than 16 MiB: refused (a config is a few KB; is it the right file?)"},
		{"", []string{"train", "--config", big, "--run-dir", filepath.Join(tmp, "run")}, "config " + big + ": larger than 16 MiB"},
		{"", []string{"eval", "--config", "/dev/zero"}, "config /dev/zero: larger than 16 MiB"},
		{"", []string{"pretrain", "--config", "/dev/zero"}, "config /dev/zero: larger than 16 MiB"},
		{"", []string{"shape", "--config", "/dev/zero", "--in", "x.json"}, "config /dev/zero: larger than 16 MiB"},
		{"", []string{"shape", "--config", cfg, "--in", "/dev/zero"}, "/dev/zero: want a JSON object (a rollout file), and it starts with byte 0x00"},
		{"", []string{"bench", "-c", "/dev/zero"}, "bench file /dev/zero: larger than 16 MiB"},
		{"/dev/zero", []string{"verify"}, "stdin line 1: longer than 64 MiB: refused"},
		{"/dev/zero", []string{"tokenize", "--model", qwen3Dir}, "stdin line 1: longer than 64 MiB: refused"},
	} {
		out, err, took := runLimited(t, 30*time.Second, c.stdin, c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("cde-run %s: %v\n%s\nwant an error holding %q", strings.Join(c.args, " "), err, out, c.want)
		}
		t.Logf("cde-run %s: %v", strings.Join(c.args, " "), took.Round(time.Millisecond))
	}
	if _, err := os.Stat(filepath.Join(tmp, "run")); !os.IsNotExist(err) {
		t.Error("a refused config left a run directory")
	}
}

// The first SIGTERM before training begins ends cde-run at once, with
// status 130 and a line saying so, even while it is blocked opening a
// --config FIFO nobody writes to (it used to print "stopping after the
// current step" and wait for the FIFO forever).
func TestSignalBeforeTrainingQuits(t *testing.T) {
	tmp := t.TempDir()
	fifo := filepath.Join(tmp, "config.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, c := range [][]string{
		{"train", "--config", fifo, "--run-dir", filepath.Join(tmp, "run")},
		{"pretrain", "--config", fifo, "--out", filepath.Join(tmp, "base")},
		{"eval", "--config", fifo},
	} {
		cmd := exec.Command(cdeRun, c...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond) // in open(2) of the FIFO by now
		sent := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Errorf("cde-run %s: exit %v after SIGTERM, want status 130\n%s", c[0], err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "terminated: quitting now (training has not begun") {
				t.Errorf("cde-run %s: no word of quitting:\n%s", c[0], stderr.String())
			}
			t.Logf("cde-run %s exited %v after SIGTERM", c[0], time.Since(sent).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("cde-run %s: still running 10 s after SIGTERM\n%s", c[0], stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "run")); !os.IsNotExist(err) {
		t.Error("an interrupted start left its run directory")
	}
}
