package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// pluginsCheckPasses runs `cde-run plugins check path` and fails unless it
// passes.
func pluginsCheckPasses(t *testing.T, path string, env ...string) {
	t.Helper()
	cmd := exec.Command(cdeRun, "plugins", "check", path, "--start-timeout", "30s")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS: ") {
		t.Fatalf("plugins check %s: %v\n%s", path, err, out)
	}
}

// `cde-run plugins new` writes, for each language, a skeleton whose own
// test passes and which `cde-run plugins check` passes as written.
func TestPluginsNew(t *testing.T) {
	t.Run("python", func(t *testing.T) {
		py := pythonForPlugins(t)
		dir := filepath.Join(t.TempDir(), "my-bonus")
		out, err := exec.Command(cdeRun, "plugins", "new", "--lang", "python", "--python", py, dir).CombinedOutput()
		if err != nil {
			t.Fatalf("plugins new: %v\n%s", err, out)
		}
		script := filepath.Join(dir, "my_bonus.py")
		if b, err := os.ReadFile(script); err != nil || !strings.HasPrefix(string(b), "#!"+py+"\n") {
			t.Fatalf("%s: %v\n%.80s", script, err, b)
		}
		// The next steps, and the test's docstring, run the test with the
		// #! line's interpreter.
		if b, err := os.ReadFile(filepath.Join(dir, "test_my_bonus.py")); err != nil || !strings.Contains(string(b), py+" -m unittest discover") {
			t.Fatalf("test_my_bonus.py: %v\n%.200s", err, b)
		}
		if want := "next: " + py + " -m unittest discover -s " + dir + " && cde-run plugins check " + script; !strings.Contains(string(out), want) {
			t.Fatalf("plugins new printed\n%s\nwant %q", out, want)
		}
		for python, want := range map[string]string{"/opt/py3/bin/python3.12": "/opt/py3/bin/python3.12", "/usr/bin/env python3": "python3"} {
			other := filepath.Join(t.TempDir(), "other")
			out, err := exec.Command(cdeRun, "plugins", "new", "--lang", "python", "--python", python, other).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "next: "+want+" -m unittest discover -s "+other+" ") {
				t.Fatalf("plugins new --python %q: %v\n%s\nwant next: %s -m unittest", python, err, out, want)
			}
		}
		// Its unit test, with nothing on PYTHONPATH: the SDK copy is used.
		test := exec.Command(py, "-m", "unittest", "discover", "-s", dir)
		test.Env = append(os.Environ(), "PYTHONPATH=")
		if out, err := test.CombinedOutput(); err != nil || !strings.Contains(string(out), "OK") {
			t.Fatalf("the skeleton's test: %v\n%s", err, out)
		}
		pluginsCheckPasses(t, script, "PYTHONPATH=")
		// A second new into the same directory is refused.
		if out, err := exec.Command(cdeRun, "plugins", "new", "--lang", "python", dir).CombinedOutput(); err == nil || !strings.Contains(string(out), "is not empty") {
			t.Fatalf("new into a non-empty dir: %v\n%s", err, out)
		}
	})
	t.Run("go", func(t *testing.T) {
		// Inside cde's module, as the skeleton's doc says.
		dir, err := os.MkdirTemp(filepath.Join("..", "..", "plugins", "internal"), "skel-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if out, err := exec.Command(cdeRun, "plugins", "new", "--lang", "go", "--name", "skel_go", dir).CombinedOutput(); err != nil {
			t.Fatalf("plugins new: %v\n%s", err, out)
		}
		pkg := "./" + filepath.ToSlash(dir)
		if out, err := exec.Command("go", "test", pkg).CombinedOutput(); err != nil {
			t.Fatalf("go test %s: %v\n%s", pkg, err, out)
		}
		bin := filepath.Join(t.TempDir(), "skel_go")
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		pluginsCheckPasses(t, bin)
	})
	t.Run("node", func(t *testing.T) {
		example, _ := filepath.Abs(filepath.Join("..", "..", "plugins", "examples", "node-lenbonus"))
		needNodeModules(t, example, "@grpc/grpc-js")
		dir := filepath.Join(t.TempDir(), "lenx")
		if out, err := exec.Command(cdeRun, "plugins", "new", "--lang", "node", dir).CombinedOutput(); err != nil {
			t.Fatalf("plugins new: %v\n%s", err, out)
		}
		// The skeleton pins the example's dependencies, whose node_modules
		// (npm ci in CI) it borrows here instead of a network install.
		var skel, ex struct{ Dependencies map[string]string }
		for p, v := range map[string]any{filepath.Join(dir, "package.json"): &skel, filepath.Join(example, "package.json"): &ex} {
			b, err := os.ReadFile(p)
			if err != nil || json.Unmarshal(b, v) != nil {
				t.Fatalf("%s: %v", p, err)
			}
		}
		if !reflect.DeepEqual(skel.Dependencies, ex.Dependencies) || len(skel.Dependencies) == 0 {
			t.Fatalf("skeleton dependencies %v, the example's %v", skel.Dependencies, ex.Dependencies)
		}
		if err := os.Symlink(filepath.Join(example, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
			t.Fatal(err)
		}
		test := exec.Command("node", "--test")
		test.Dir = dir
		if out, err := test.CombinedOutput(); err != nil {
			t.Fatalf("node --test: %v\n%s", err, out)
		}
		pluginsCheckPasses(t, filepath.Join(dir, "plugin.js"))
	})
}
