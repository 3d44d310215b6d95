package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cde-rl/cde/plugins/skeleton"
)

// missing skips a test for a missing tool or package outside CI and fails
// it under CI, where everything the tests need is installed (.ci/run).
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI is set, so this test must run", why)
	}
	t.Skipf("skipping: %s (CI is unset)", why)
}

// needNodeModules requires node and the npm packages of the directory dir
// (npm ci there, as .ci/run does).
func needNodeModules(t *testing.T, dir, pkg string) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, "node is not installed (Node.js >= 20)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json")); err != nil {
		missing(t, "node_modules is missing: run `npm ci` in "+dir)
	}
}

// pythonForPlugins is the first of python3 on PATH and /usr/bin/python3
// that imports grpc, google.protobuf and numpy.
func pythonForPlugins(t *testing.T) string {
	t.Helper()
	py := skeleton.PythonWithDeps()
	if py == "" {
		missing(t, "no python3 with grpc, google.protobuf and numpy (Debian: apt-get install python3-grpcio python3-protobuf python3-numpy)")
	}
	return py
}

// startServe starts `cde-run serve args...` on a free port and returns its
// URL and process (killed when the test ends) and its stderr.
func startServe(t *testing.T, args ...string) (string, *exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(cdeRun, append(append([]string{"serve"}, args...), "--addr", "127.0.0.1:0")...)
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("no listening line (%v): %q\n%s", err, line, stderr.String())
	}
	return url, cmd, &stderr
}
