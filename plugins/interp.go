package plugins

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cde-rl/cde/plugins/skeleton"
)

// shebang is a script's #! line, read to word start-up errors for the
// language the plugin is written in.
type shebang struct {
	line   string   // the line after "#!", trimmed
	interp string   // the interpreter it names (its first word)
	args   []string // the words after it
}

// readShebang returns the #! line of the file at path (ok false for a
// binary or a file without one).
func readShebang(path string) (shebang, bool) {
	f, err := os.Open(path)
	if err != nil {
		return shebang{}, false
	}
	defer f.Close()
	buf := make([]byte, 512)
	n, _ := io.ReadFull(f, buf)
	buf = buf[:n]
	if !bytes.HasPrefix(buf, []byte("#!")) {
		return shebang{}, false
	}
	line := buf[2:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	// The kernel splits the line at spaces and tabs only: a '\r' (a file
	// saved with Windows line ends) is part of the interpreter's name.
	s := strings.Trim(string(line), " \t")
	words := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(words) == 0 {
		return shebang{line: s}, true
	}
	return shebang{line: s, interp: words[0], args: words[1:]}, true
}

// command is the program the #! line runs: the interpreter, or for
// "/usr/bin/env [-S] [-options] NAME" the NAME env looks up on PATH.
func (s shebang) command() (name string, viaEnv bool) {
	if filepath.Base(s.interp) != "env" {
		return s.interp, false
	}
	for _, a := range s.args {
		if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
			continue
		}
		return a, true
	}
	return "", true
}

// python reports whether the #! line runs a Python interpreter.
func (s shebang) python() bool {
	name, _ := s.command()
	return strings.HasPrefix(filepath.Base(name), "python")
}

// node reports whether the #! line runs Node.js.
func (s shebang) node() bool {
	name, _ := s.command()
	return filepath.Base(name) == "node" || filepath.Base(name) == "nodejs"
}

// resolved is the interpreter program that runs the script: the
// interpreter the line names, or what env finds on PATH ("" when it
// finds none).
func (s shebang) resolved() string {
	name, viaEnv := s.command()
	if !viaEnv {
		return name
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return ""
}

// describe names the interpreter as the #! line does, with the program
// env found when it goes through env: "/usr/bin/python3", or
// "/usr/bin/env python3 (/usr/local/bin/python3)".
func (s shebang) describe() string {
	if _, viaEnv := s.command(); viaEnv {
		if r := s.resolved(); r != "" {
			return fmt.Sprintf("%s (%s)", s.line, r)
		}
	}
	return s.line
}

// pythonDeps are the Python SDK's dependencies, as pip names them.
const pythonDeps = "grpcio, protobuf and numpy"

// interpreterMissing reports a #! line whose interpreter cannot be run,
// which exec reports only as "fork/exec SCRIPT: no such file or
// directory" (the script exists; its interpreter does not).
func interpreterMissing(path string) error {
	sb, ok := readShebang(path)
	if !ok {
		return nil
	}
	fix := "fix the #! line"
	if sb.python() {
		fix = "name in the #! line a Python 3 that has " + pythonDeps
		if py := skeleton.PythonWithDeps(); py != "" {
			fix += " (" + py + " has them)"
		}
	}
	if sb.interp == "" {
		return fmt.Errorf("plugin %s: its #! line names no interpreter: %s", path, fix)
	}
	name, viaEnv := sb.command()
	switch {
	case viaEnv && name == "":
		return fmt.Errorf("plugin %s: its #! line %q runs env without a program: %s", path, "#!"+sb.line, fix)
	case viaEnv && sb.resolved() == "":
		return fmt.Errorf("plugin %s: its #! line %q runs %q through env, and there is no %q on PATH: %s, or put one on PATH",
			path, "#!"+sb.line, name, name, fix)
	case viaEnv:
		return nil
	}
	st, err := os.Stat(sb.interp)
	switch {
	case err != nil:
		return fmt.Errorf("plugin %s: its #! line names the interpreter %q, which does not exist: %s", path, sb.interp, fix)
	case st.IsDir() || st.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("plugin %s: its #! line names the interpreter %q, which is not an executable file: %s", path, sb.interp, fix)
	}
	return nil
}

var noModuleRE = regexp.MustCompile(`No module named '([^']+)'`)

// pythonImportError words a Python plugin's start-up failure on a module
// its interpreter cannot import (the last "No module named 'X'" of its
// stderr): the interpreter the #! line ran, and the fix ("" when stderr
// has no such line or the plugin is not a Python script).
func pythonImportError(path, stderr string) string {
	sb, ok := readShebang(path)
	if !ok || !sb.python() {
		return ""
	}
	m := noModuleRE.FindAllStringSubmatch(stderr, -1)
	if m == nil {
		return ""
	}
	module := m[len(m)-1][1]
	top, _, _ := strings.Cut(module, ".")
	interp := sb.describe()
	py := sb.resolved()
	if py == "" {
		py = sb.interp
	}
	switch top {
	case "grpc", "google", "numpy":
		install := py + " -m pip install grpcio protobuf numpy"
		if strings.HasPrefix(py, "/usr/bin/") {
			install = "apt-get install python3-grpcio python3-protobuf python3-numpy (Debian/Ubuntu)"
		}
		fix := fmt.Sprintf("install %s for it: %s", pythonDeps, install)
		if other := skeleton.PythonWithDeps(); other != "" && other != py {
			fix += fmt.Sprintf("; or name in the #! line an interpreter that has them (%s does)", other)
		}
		return fmt.Sprintf("its interpreter, %s from the #! line, cannot import %s (the plugin SDK needs %s): %s", interp, module, pythonDeps, fix)
	case "cde_plugin":
		return fmt.Sprintf("its interpreter, %s from the #! line, cannot import cde_plugin (the plugin SDK): "+
			"put cde's python/ directory on PYTHONPATH, or install it for that interpreter (pip install ./python in cde's checkout), "+
			"or keep the cde_plugin/ copy `cde-run plugins new` writes beside the script", interp)
	}
	return fmt.Sprintf("its interpreter, %s from the #! line, cannot import %s: install it for that interpreter, or name in the #! line one that has it", interp, module)
}

// printAdvice is how a plugin should log before it serves, in its
// language: the end of the "printed ... on stdout before the handshake"
// error.
func printAdvice(path string) string {
	sb, ok := readShebang(path)
	switch {
	case ok && sb.python():
		return "print to stderr (print(..., file=sys.stderr)) or log with the logging module before cde_plugin.serve"
	case ok && sb.node():
		return "print to stderr (console.error) before serving"
	}
	return "print to stderr or use sdk.Logger()"
}
