package answer

import (
	"os/exec"
	"strings"
	"testing"
)

// The package is a leaf: it imports the standard library alone, so a
// plugin that reads answers links nothing of the tasks.
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.Contains(imp, ".") {
			t.Errorf("imports %s", imp)
		}
	}
}

func TestExtractNormalizeEqual(t *testing.T) {
	cases := []struct {
		response, want string
		ok             bool
	}{
		{"so\nAnswer: 1,000.\n", "1000", true},
		{"Answer: 3\nwait, Answer: $\\boxed{+0.50}$", "0.5", true},
		{"no marker here", "", false},
	}
	for _, c := range cases {
		raw, ok := Extract(c.response)
		if ok != c.ok || Normalize(raw) != c.want {
			t.Errorf("Extract(%q) = %q, %v; normalised %q; want %q, %v", c.response, raw, ok, Normalize(raw), c.want, c.ok)
		}
	}
	if !Equal("1,234.50", "1234.5") || Equal("", "") || Equal("1/2", "0.5") {
		t.Error("Equal")
	}
	if got, ok := CanonicalDecimal("-007.250"); got != "-7.25" || !ok {
		t.Errorf("CanonicalDecimal(-007.250) = %q, %v", got, ok)
	}
	if got, ok := CanonicalDecimal("1,234/5"); got != "1,234/5" || ok {
		t.Errorf("CanonicalDecimal(1,234/5) = %q, %v", got, ok)
	}
}
