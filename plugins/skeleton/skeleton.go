// Package skeleton writes a new plugin's files: `cde-run plugins new
// --lang python|go|node DIR`. Each skeleton is a working strategy (a
// placeholder reward bonus and a metric) with its unit test, which
// `cde-run plugins check` passes as written.
package skeleton

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	strategypb "github.com/cde-rl/cde/plugins/proto"
	"github.com/cde-rl/cde/python"
)

//go:embed templates
var templates embed.FS

// Langs are the skeletons' languages.
var Langs = []string{"python", "go", "node"}

// Options are a skeleton's settings.
type Options struct {
	// Name is the strategy's name (metrics explore/NAME/...): lower-case
	// letters, digits and underscores, starting with a letter ("": the
	// directory's base name, lower-cased, '-' and '.' made '_').
	Name string
	// Python is the interpreter a Python plugin's shebang names ("": the
	// first of python3 on PATH and /usr/bin/python3 that imports grpc,
	// google.protobuf and numpy, else /usr/bin/env python3).
	Python string
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// PythonWithDeps is the first of python3 on PATH and /usr/bin/python3 that
// imports the SDK's dependencies ("" for none).
func PythonWithDeps() string {
	var cands []string
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range append(cands, "/usr/bin/python3") {
		if exec.Command(c, "-c", "import grpc, google.protobuf, numpy").Run() == nil {
			return c
		}
	}
	return ""
}

// Write writes the skeleton of lang into dir (missing or empty) and
// returns the paths written, the entry point first (the plugin to give
// cde-run: the Python script, the Go package's directory, plugin.js).
func Write(lang, dir string, o Options) ([]string, error) {
	if !contains(Langs, lang) {
		return nil, fmt.Errorf("--lang %q: want one of %s", lang, strings.Join(Langs, ", "))
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%s is not empty: give a new or empty directory", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	name := o.Name
	if name == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		name = strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToLower(filepath.Base(abs)))
	}
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("strategy name %q: want lower-case letters, digits and underscores, starting with a letter (give --name)", name)
	}
	py := o.Python
	if py == "" {
		if py = PythonWithDeps(); py == "" {
			py = "/usr/bin/env python3"
		}
	}
	data := map[string]string{"Name": name, "Class": camel(name), "File": name + ".py", "Module": name,
		"Python": py, "Dir": filepath.ToSlash(filepath.Clean(dir))}
	type file struct {
		tmpl, out string
		mode      os.FileMode
	}
	var files []file
	switch lang {
	case "python":
		files = []file{{"python/plugin.py.tmpl", name + ".py", 0o755}, {"python/test_plugin.py.tmpl", "test_" + name + ".py", 0o644}}
	case "go":
		files = []file{{"go/main.go.tmpl", "main.go", 0o644}, {"go/main_test.go.tmpl", "main_test.go", 0o644}}
	case "node":
		files = []file{{"node/plugin.js.tmpl", "plugin.js", 0o755}, {"node/strategy.js.tmpl", "strategy.js", 0o644},
			{"node/strategy.test.js.tmpl", "strategy.test.js", 0o644}, {"node/package.json.tmpl", "package.json", 0o644}}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, f := range files {
		src, err := templates.ReadFile("templates/" + f.tmpl)
		if err != nil {
			return nil, err
		}
		t, err := template.New(f.tmpl).Delims("<%", "%>").Parse(string(src))
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, err
		}
		path := filepath.Join(dir, f.out)
		if err := os.WriteFile(path, b.Bytes(), f.mode); err != nil {
			return nil, err
		}
		written = append(written, path)
	}
	switch lang {
	case "python":
		// The SDK beside the plugin, so it runs as written (an installed
		// cde_plugin is used instead when the copy is removed).
		err := fs.WalkDir(python.SDK, "cde_plugin", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := python.SDK.ReadFile(p)
			if err != nil {
				return err
			}
			out := filepath.Join(dir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return err
			}
			written = append(written, out)
			return os.WriteFile(out, b, 0o644)
		})
		if err != nil {
			return nil, err
		}
	case "go":
		written[0] = dir
	case "node":
		out := filepath.Join(dir, "cde_strategy.proto")
		if err := os.WriteFile(out, strategypb.Proto, 0o644); err != nil {
			return nil, err
		}
		written = append(written, out)
	}
	return written, nil
}

// camel is name in CamelCase ("my_bonus" -> "MyBonus").
func camel(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// shebangPython is the interpreter the #! line of the script at path
// runs, as a command: "/usr/bin/python3", or "python3" for "/usr/bin/env
// python3" ("python3" when the script has no #! line).
func shebangPython(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("#!")) {
		return "python3"
	}
	line, _, _ := strings.Cut(string(b[2:]), "\n")
	words := strings.Fields(line)
	if len(words) > 1 && filepath.Base(words[0]) == "env" {
		words = words[1:]
	}
	if len(words) == 0 {
		return "python3"
	}
	return strings.Join(words, " ")
}

// NextSteps is what to run after Write made a lang plugin in dir: its
// tests, then cde-run plugins check. files is what Write returned.
func NextSteps(lang, dir string, files []string) string {
	switch lang {
	case "python":
		return fmt.Sprintf("next: %s -m unittest discover -s %s && cde-run plugins check %s", shebangPython(files[0]), dir, files[0])
	case "go":
		return fmt.Sprintf("next: go test ./%s && go build -o %s/plugin ./%s && cde-run plugins check %s/plugin", dir, dir, dir, dir)
	case "node":
		return fmt.Sprintf("next: (cd %s && npm install && node --test) && cde-run plugins check %s", dir, files[0])
	}
	return ""
}
