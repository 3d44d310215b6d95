package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "github.com/cde-rl/cde/algos/all"
	"github.com/cde-rl/cde/core"
	_ "github.com/cde-rl/cde/strategies/all"
)

// The steps of docs/extending.md that no compiler checks: a strategy or
// algorithm package is imported by its all package (or cde-run and session
// never know its name), the all package's doc does not keep a stale list of
// names, and docs/config.md has the name's row. These tests read the
// source and the docs, and the registry this test binary links through the
// two all packages.

// module is the module path of go.mod.
const module = "github.com/cde-rl/cde"

// extensionKind is one directory of in-tree extensions and its registry.
type extensionKind struct {
	dir      string          // "strategies" or "algos", under the root
	register string          // the core function its packages call from init
	names    func() []string // the registry, sorted
}

var extensionKinds = []extensionKind{
	{"strategies", "RegisterStrategy", core.Strategies},
	{"algos", "RegisterAlgorithm", core.Algorithms},
}

// registeringPackages returns, for the packages under kind.dir (test files,
// internal/, all/ and testdata/ aside), the import path of each that calls
// core.<kind.register> in an init function, with the names it registers
// where they are string literals.
func registeringPackages(t *testing.T, root string, kind extensionKind) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	base := filepath.Join(root, kind.dir)
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != base {
			if n := d.Name(); n == "internal" || n == "all" || n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		importPath := module + "/" + filepath.ToSlash(rel)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			coreName := ""
			for _, imp := range af.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == module+"/core" {
					coreName = "core"
					if imp.Name != nil {
						coreName = imp.Name.Name
					}
				}
			}
			if coreName == "" {
				continue
			}
			for _, decl := range af.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || fn.Name.Name != "init" || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok || sel.Sel.Name != kind.register {
						return true
					}
					if x, ok := sel.X.(*ast.Ident); !ok || x.Name != coreName {
						return true
					}
					names := out[importPath]
					if len(call.Args) > 0 {
						if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if s, err := strconv.Unquote(lit.Value); err == nil {
								names = append(names, s)
							}
						}
					}
					out[importPath] = names
					return true
				})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// allFile parses DIR/all/all.go, with its comments.
func allFile(t *testing.T, root, dir string) *ast.File {
	t.Helper()
	path := filepath.Join(root, dir, "all", "all.go")
	af, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	return af
}

// Every package under strategies/ and algos/ that registers a name from
// init is imported by strategies/all or algos/all (docs/extending.md, step
// 3), and every package those import registers one. A forgotten line
// compiles and passes the new package's own tests, yet cde-run never knows
// the name.
func TestAllImportsEveryExtension(t *testing.T) {
	root := repoRoot(t)
	for _, kind := range extensionKinds {
		t.Run(kind.dir, func(t *testing.T) {
			pkgs := registeringPackages(t, root, kind)
			if len(pkgs) < 2 {
				t.Fatalf("found %d packages under %s/ calling core.%s from init: the walk is broken", len(pkgs), kind.dir, kind.register)
			}
			imported := map[string]bool{}
			for _, imp := range allFile(t, root, kind.dir).Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				imported[p] = true
			}
			var literal []string
			for _, p := range slices.Sorted(maps.Keys(pkgs)) {
				literal = append(literal, pkgs[p]...)
				if !imported[p] {
					t.Errorf("%s/all/all.go does not import %s, which registers %v: add `_ %q` to its imports", kind.dir, p, pkgs[p], p)
				}
			}
			for p := range imported {
				if _, ok := pkgs[p]; !ok {
					t.Errorf("%s/all/all.go imports %s, which calls core.%s from no init function", kind.dir, p, kind.register)
				}
			}
			// The names the source registers are the registry's, which this
			// test binary fills through the all packages alone.
			registered := kind.names()
			for _, n := range literal {
				if !slices.Contains(registered, n) {
					t.Errorf("%s registers %q in its source, but the registry (through %s/all) lacks it: %v", kind.dir, n, kind.dir, registered)
				}
			}
		})
	}
}

// nameWord matches what could be a strategy or algorithm name in prose.
var nameWord = regexp.MustCompile(`[a-z][a-z0-9_]*`)

// The package doc of strategies/all and algos/all names either none of the
// registered names or all of them: a partial list is a stale one.
func TestAllPackageDocNamesNoneOrAll(t *testing.T) {
	root := repoRoot(t)
	for _, kind := range extensionKinds {
		t.Run(kind.dir, func(t *testing.T) {
			af := allFile(t, root, kind.dir)
			if af.Doc == nil {
				t.Fatalf("%s/all/all.go has no package doc", kind.dir)
			}
			registered := kind.names()
			named := map[string]bool{}
			for _, w := range nameWord.FindAllString(af.Doc.Text(), -1) {
				if slices.Contains(registered, w) {
					named[w] = true
				}
			}
			if len(named) == 0 {
				return
			}
			var missing []string
			for _, n := range registered {
				if !named[n] {
					missing = append(missing, n)
				}
			}
			if len(missing) > 0 {
				t.Errorf("the package doc of %s/all names %v but not %v: list every registered name or none (core.%s() and docs/config.md have them)",
					kind.dir, slices.Sorted(maps.Keys(named)), missing, strings.TrimPrefix(kind.register, "Register")+"s")
			}
		})
	}
}

// mdSection returns the lines of docs/config.md's section whose heading is
// exactly heading, up to the next heading of the same or a higher level.
func mdSection(t *testing.T, lines []string, heading string) []string {
	t.Helper()
	level := strings.IndexFunc(heading, func(r rune) bool { return r != '#' })
	for i, l := range lines {
		if l != heading {
			continue
		}
		end := i + 1
		for end < len(lines) {
			if h := strings.IndexFunc(lines[end], func(r rune) bool { return r != '#' }); h > 0 && h <= level && strings.HasPrefix(lines[end][h:], " ") {
				break
			}
			end++
		}
		return lines[i+1 : end]
	}
	t.Fatalf("docs/config.md has no heading %q", heading)
	return nil
}

// tableRows returns the cells of the rows of the table under the header
// that starts with header (the header and separator rows excluded). A cell
// may hold an escaped `\|`.
func tableRows(t *testing.T, section []string, header string) [][]string {
	t.Helper()
	var rows [][]string
	in := false
	for _, l := range section {
		switch {
		case !in && strings.HasPrefix(l, header):
			in = true
		case in && strings.HasPrefix(l, "|---"):
		case in && strings.HasPrefix(l, "|"):
			rows = append(rows, splitRow(l))
		case in:
			return rows
		}
	}
	if !in {
		t.Fatalf("docs/config.md: no table with the header %q", header)
	}
	return rows
}

func splitRow(l string) []string {
	var cells []string
	var cur strings.Builder
	for i := 1; i < len(l); i++ { // l[0] is the leading |
		switch {
		case l[i] == '\\' && i+1 < len(l) && l[i+1] == '|':
			cur.WriteString(`\|`)
			i++
		case l[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(l[i])
		}
	}
	return cells
}

var backticked = regexp.MustCompile("`([^`]+)`")

// backtickedNames returns the `code` spans of s.
func backtickedNames(s string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// compareSets reports the names of want missing from got and those of got
// not in want.
func compareSets(want, got []string) (missing, extra []string) {
	for _, n := range want {
		if !slices.Contains(got, n) {
			missing = append(missing, n)
		}
	}
	for _, n := range got {
		if !slices.Contains(want, n) {
			extra = append(extra, n)
		}
	}
	return missing, extra
}

// Every registered strategy has its row in docs/config.md's strategies
// table, and every registered algorithm is named in the `name` row of the
// algorithm table, each of its keys has a row naming it, and one with no
// key is in the sentence listing those (docs/extending.md, step 4). A row
// of a name no longer registered is an error too.
func TestConfigDocumentsEveryExtension(t *testing.T) {
	root := repoRoot(t)
	text, err := os.ReadFile(filepath.Join(root, "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")

	t.Run("strategies", func(t *testing.T) {
		var rows []string
		for _, cells := range tableRows(t, mdSection(t, lines, "## `strategies`"), "| strategy |") {
			if names := backtickedNames(cells[0]); len(names) == 1 {
				rows = append(rows, names[0])
			} else {
				t.Errorf("docs/config.md, strategies table: first cell %q is not one `name`", cells[0])
			}
		}
		missing, extra := compareSets(core.Strategies(), rows)
		for _, n := range missing {
			t.Errorf("strategy %s is registered but has no row in docs/config.md's strategies table (| `%s` | keys (defaults) | hook |)", n, n)
		}
		for _, n := range extra {
			t.Errorf("docs/config.md's strategies table has a row for %s, which is not a registered strategy", n)
		}
	})

	t.Run("algorithms", func(t *testing.T) {
		section := mdSection(t, lines, "## `algorithm`")
		algos := core.Algorithms()
		var nameRow []string
		keyRows := map[string][]string{} // key -> the algorithms of its rows
		for _, cells := range tableRows(t, section, "| key | algorithm |") {
			if len(cells) < 4 {
				t.Errorf("docs/config.md, algorithm table: row %v has %d cells, want 4", cells, len(cells))
				continue
			}
			key := backtickedNames(cells[0])
			if len(key) != 1 {
				t.Errorf("docs/config.md, algorithm table: first cell %q is not one `key`", cells[0])
				continue
			}
			if key[0] == "name" {
				nameRow = backtickedNames(cells[3])
				continue
			}
			keyRows[key[0]] = append(keyRows[key[0]], nameWord.FindAllString(cells[1], -1)...)
		}
		missing, extra := compareSets(algos, nameRow)
		for _, n := range missing {
			t.Errorf("algorithm %s is registered but not among the names of docs/config.md's `name` row in the algorithm table", n)
		}
		for _, n := range extra {
			t.Errorf("docs/config.md's `name` row in the algorithm table names %s, which is not a registered algorithm", n)
		}
		var keyless []string
		for _, a := range algos {
			keys, _ := core.AlgorithmKeys(a)
			if len(keys) == 0 {
				keyless = append(keyless, a)
			}
			for _, k := range keys {
				if !slices.Contains(keyRows[k], a) {
					t.Errorf("algorithm %s declares key %s, and docs/config.md's algorithm table has no row | `%s` | %s | default | meaning |", a, k, k, a)
				}
			}
		}
		for k, owners := range keyRows {
			for _, a := range owners {
				if keys, ok := core.AlgorithmKeys(a); !ok || !slices.Contains(keys, k) {
					t.Errorf("docs/config.md's algorithm table gives key %s to %s, which does not declare it", k, a)
				}
			}
		}
		// The paragraph after the table names the algorithms with no key.
		var para []string
		for _, l := range section {
			if strings.TrimSpace(l) == "" {
				if slices.ContainsFunc(para, func(p string) bool { return strings.Contains(p, "no key besides") }) {
					break
				}
				para = nil
				continue
			}
			para = append(para, l)
		}
		sentence, _, ok := strings.Cut(strings.Join(para, " "), "no key besides")
		if !ok {
			t.Fatal("docs/config.md's algorithm section has no paragraph saying which algorithms take \"no key besides `name`\"")
		}
		var said []string
		for _, w := range nameWord.FindAllString(sentence, -1) {
			if slices.Contains(algos, w) {
				said = append(said, w)
			}
		}
		missing, extra = compareSets(keyless, said)
		for _, n := range missing {
			t.Errorf("algorithm %s declares no key, and docs/config.md's sentence %q does not name it", n, sentence+"no key besides")
		}
		for _, n := range extra {
			t.Errorf("docs/config.md's sentence %q names %s, which declares keys", sentence+"no key besides", n)
		}
	})
}
