package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cde-rl/cde/internal/proctest"
)

// children lists the pids whose parent is ppid.
func children(ppid int) []int {
	var out []int
	for _, p := range proctest.All() {
		if p.PPID == ppid {
			out = append(out, p.PID)
		}
	}
	return out
}

func alive(pid int) bool {
	p, ok := proctest.Get(strconv.Itoa(pid))
	return ok && p.Live()
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
