package plugins_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Binaries built once for the package's tests.
var (
	testPlugin string // plugins/internal/testplugin
	examplePlg string // plugins/examples/answercount/cmd/answercount
	binDir     string
)

func TestMain(m *testing.M) {
	if path := os.Getenv(hostHelperEnv); path != "" {
		os.Exit(hostHelper(path))
	}
	dir, err := os.MkdirTemp("", "cde-plugins-test")
	if err != nil {
		panic(err)
	}
	binDir = dir
	testPlugin = filepath.Join(dir, "testplugin")
	examplePlg = filepath.Join(dir, "answercount")
	for out, pkg := range map[string]string{testPlugin: "./internal/testplugin", examplePlg: "./examples/answercount/cmd/answercount"} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, b)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	before := shmEntries()
	code := m.Run()
	os.RemoveAll(dir)
	// The shared-memory transport uses memfds, which have no name under
	// /dev/shm: nothing the tests did may be left there.
	if left := slices.DeleteFunc(shmEntries(), func(e string) bool { return slices.Contains(before, e) }); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "the tests left %v in /dev/shm\n", left)
		code = 1
	}
	os.Exit(code)
}

// shmEntries lists /dev/shm (nil where there is none).
func shmEntries() []string {
	es, _ := os.ReadDir("/dev/shm")
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
