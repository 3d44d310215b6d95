package repocheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsidePatterns are citations of files that lived next to the repository
// in its first checkout and that no clone has: the design notes, the paper's
// source and the engine notes beside the repository. The patterns are built
// from pieces so that this file does not match them itself.
// Each has a literal its matches contain (lit), a cheap filter before the
// regular expression; a match may span lines ("DESIGN\n// section 3").
var outsidePatterns = []struct {
	lit  string
	re   *regexp.Regexp
	what string
}{
	{"shared", regexp.MustCompile(`\.\./` + `shared\b`), "a path into the directory beside the repository"},
	{"DESIGN", regexp.MustCompile(`\bDESIGN` + `(\.md|'s\b|(\s|//|#)+section\b)`), "the design notes outside the repository (cite a file under docs/)"},
	{"NOTES", regexp.MustCompile(`GOMLX` + `-NOTES`), "engine notes outside the repository (state the fact inline)"},
	{"paper", regexp.MustCompile(`cde-paper` + `\.tex`), "the paper's source (cite the paper by title and arXiv entry)"},
}

// repoRoot is the directory holding go.mod, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// repoFiles lists the repository's files, slash-separated and relative to
// root: git's tracked files and the untracked ones it does not ignore, or,
// without git, a walk of the tree that skips .git, node_modules and the
// directories .gitignore names for outputs.
func repoFiles(t *testing.T, root string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, ".git")); err == nil {
		if git, err := exec.LookPath("git"); err == nil {
			cmd := exec.Command(git, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
			cmd.Dir = root
			if out, err := cmd.Output(); err == nil {
				var files []string
				for _, f := range strings.Split(string(out), "\x00") {
					if f != "" {
						files = append(files, f)
					}
				}
				return files
			}
		}
	}
	skip := map[string]bool{".git": true, "node_modules": true, "runs": true, "bin": true, "bench-results": true, ".gpucheck": true, "__pycache__": true}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skip[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// readText returns a file's contents, or ok false for a binary file (a NUL
// byte in its first 8000 bytes, git's rule) or one no longer there.
func readText(root, rel string) (text string, ok bool) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return "", false
	}
	if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
		return "", false
	}
	return string(b), true
}

// TestNoPathLeavesTheRepository fails on any citation of a file outside the
// repository: the patterns above in any text file, and a relative Markdown
// link that resolves above the repository's root or, inside it, to nothing.
func TestNoPathLeavesTheRepository(t *testing.T) {
	root := repoRoot(t)
	files := repoFiles(t, root)
	if len(files) == 0 {
		t.Fatal("no files found")
	}
	var problems []string
	for _, rel := range files {
		text, ok := readText(root, rel)
		if !ok {
			continue
		}
		for _, p := range outsidePatterns {
			if !strings.Contains(text, p.lit) {
				continue
			}
			for _, loc := range p.re.FindAllStringIndex(text, -1) {
				line := 1 + strings.Count(text[:loc[0]], "\n")
				problems = append(problems, fmt.Sprintf("%s:%d: %q: %s", rel, line, text[loc[0]:loc[1]], p.what))
			}
		}
		if strings.HasSuffix(strings.ToLower(rel), ".md") {
			problems = append(problems, checkMarkdownLinks(root, rel, text)...)
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d citations leave the repository or point at nothing:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

var (
	// inlineLink matches [text](target) and ![alt](target); the target
	// runs to the first space or closing parenthesis ("title" dropped).
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^()\s<>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refLink matches a reference definition, [label]: target.
	refLink  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	scheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// checkMarkdownLinks checks the relative links of one Markdown file (rel,
// relative to root) outside fenced code blocks and code spans: each must
// resolve inside root and name a file or directory that exists. Links with
// a scheme (https:, mailto:) and bare anchors are not checked, nor anchors.
func checkMarkdownLinks(root, rel, text string) []string {
	var problems []string
	inFence := ""
	for n, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if inFence != "" {
			if strings.HasPrefix(trimmed, inFence) {
				inFence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = trimmed[:3]
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if msg := checkLinkTarget(root, rel, target); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q %s", rel, n+1, target, msg))
			}
		}
	}
	return problems
}

// checkLinkTarget says what is wrong with one link target of the Markdown
// file rel, or "" when nothing is.
func checkLinkTarget(root, rel, target string) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "//") {
		return ""
	}
	if i := strings.IndexAny(target, "#?"); i >= 0 {
		target = target[:i]
	}
	if target == "" {
		return ""
	}
	var p string
	if strings.HasPrefix(target, "/") { // GitHub reads it from the repository's root
		p = filepath.Join(root, filepath.FromSlash(target))
	} else {
		p = filepath.Join(root, filepath.FromSlash(filepath.ToSlash(filepath.Dir(filepath.FromSlash(rel)))), filepath.FromSlash(target))
	}
	inside, err := filepath.Rel(root, p)
	if err != nil || inside == ".." || strings.HasPrefix(inside, ".."+string(filepath.Separator)) {
		return "resolves outside the repository"
	}
	if _, err := os.Stat(p); err != nil {
		return "names no file in the repository"
	}
	return ""
}

// The checks themselves: each pattern and each kind of bad link is caught,
// and what is allowed passes.
func TestCheckersCatchWhatTheyShould(t *testing.T) {
	for _, p := range outsidePatterns {
		var sample string
		switch p.lit {
		case "shared":
			sample = "train: ../" + "shared/data/x.jsonl"
		case "DESIGN":
			sample = "// (DESIGN\n// " + "section 3)"
		case "NOTES":
			sample = "see GOMLX" + "-NOTES.md"
		case "paper":
			sample = "cde-paper" + ".tex"
		}
		if !strings.Contains(sample, p.lit) || !p.re.MatchString(sample) {
			t.Errorf("pattern %s does not catch %q", p.re, sample)
		}
	}
	root := t.TempDir()
	for _, f := range []string{"docs/b.md", "README.md"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := strings.Join([]string{
		"[ok](b.md#anchor) [ok](../README.md) ![ok](/docs/b.md) [ok](https://x.org/a) [ok](#top) [ok](<b.md> \"t\")",
		"[out](../../elsewhere/notes.md)",
		"[missing](c.md)",
		"`[code span](../../x.md)` is text",
		"```",
		"[fenced](../../x.md)",
		"```",
		"[ref]: ../../ref.md",
	}, "\n")
	got := checkMarkdownLinks(root, "docs/a.md", text)
	want := []string{
		`docs/a.md:2: link "../../elsewhere/notes.md" resolves outside the repository`,
		`docs/a.md:3: link "c.md" names no file in the repository`,
		`docs/a.md:8: link "../../ref.md" resolves outside the repository`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("link problems\n got %q\nwant %q", got, want)
	}
}
