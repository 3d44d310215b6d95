package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// children lists the pids whose parent is ppid (from /proc).
func children(ppid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" // a zombie has exited
}

// A bench killed with SIGKILL takes its training child with it.
func TestChildDiesWithBench(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "long.yaml")
	os.WriteFile(spec, []byte(tinySpecYAML(100000, 1000)), 0o644)
	cmd := exec.Command(cdeRun, "bench", "-c", spec, "--out", filepath.Join(dir, "out"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var child int
	for deadline := time.Now().Add(2 * time.Minute); child == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c := children(cmd.Process.Pid); len(c) > 0 {
			child = c[0]
		}
	}
	if child == 0 {
		t.Fatal("the bench started no training child")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for deadline := time.Now().Add(time.Minute); alive(child) && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
	}
	if alive(child) {
		syscall.Kill(child, syscall.SIGKILL)
		t.Fatalf("the training child %d outlived its bench, killed with SIGKILL", child)
	}
}
