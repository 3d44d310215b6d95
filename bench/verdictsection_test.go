package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Verdicts section goes before "## Results" with one row per claim of verdicts.json: metric, paired seeds, d and its
// interval (4 significant digits), the verdict after Holm in bold.
func TestWithVerdicts(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, VerdictsFile), []byte(`[
 {"claim": "A beats B", "metric": "val/mean/avg@4", "arms": ["a", "b"], "family": "val/mean/avg@4", "family_size": 2, "seeds": [1, 2, 3],
  "delta_mean": 0.05, "ci_low": 0.012345, "ci_high": 0.0876, "verdict": "held", "verdict_holm": "held", "units": "none", "per_seed": [0.04, 0.05, 0.06]},
 {"claim": "C beats B", "metric": "val/mean/avg@4", "arms": ["c", "b"], "family": "val/mean/avg@4", "family_size": 2, "seeds": [1, 2],
  "delta_mean": -0.1, "ci_low": null, "ci_high": null, "verdict": "inconclusive", "verdict_holm": "inconclusive", "units": "none", "per_seed": [-0.1, -0.1]}
]`), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Claims: []Claim{{Name: "A beats B"}, {Name: "C beats B"}}}
	md := "# Bench: x\n\nintro\n\n## Results\n\nthe table\n"
	got, err := withVerdicts(md, spec, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, r := strings.Index(got, "## Verdicts\n"), strings.Index(got, "## Results\n")
	if !strings.HasPrefix(got, "# Bench: x\n\nintro\n\n## Verdicts\n\n") || v < 0 || r < v || !strings.HasSuffix(got, "## Results\n\nthe table\n") {
		t.Fatalf("layout:\n%s", got)
	}
	section := got[v:r]
	for _, want := range []string{
		"| claim | metric | seeds | d | 95% interval | verdict after Holm |\n|---|---|---|---|---|---|\n" +
			"| A beats B | val/mean/avg@4 | 3 | 0.05 | [0.01235, 0.0876] | **held** |\n" +
			"| C beats B | val/mean/avg@4 | 2 | -0.1 | missing | **inconclusive** |\n",
		"[Claims](#claims)", "accuracies as fractions"} {
		if !strings.Contains(section, want) {
			t.Errorf("the section lacks %q:\n%s", want, section)
		}
	}
	if strings.Contains(section, "forest") {
		t.Errorf("a forest plot without a drawer:\n%s", section)
	}
	// No claims: the report is unchanged.
	if got, err := withVerdicts(md, &Spec{}, t.TempDir(), nil); err != nil || got != md {
		t.Errorf("without claims: %v\n%s", err, got)
	}
}

// A sequential bench's Verdicts section says that its intervals are at
// their looks' levels, not 95%; a plain bench's says nothing of it.
func TestWithVerdictsSequentialLevel(t *testing.T) {
	for _, seq := range []bool{false, true} {
		dir := t.TempDir()
		extra := ""
		if seq {
			extra = `, "sequential": {"look": 2, "decided": true, "level": 0.98978}`
		}
		data := `[{"claim": "A beats B", "metric": "m", "arms": ["a", "b"], "seeds": [1, 2, 3, 4, 5], "delta_mean": 0.2, "ci_low": 0.07, "ci_high": 0.31, ` +
			`"verdict": "held", "verdict_holm": "held", "units": "none", "per_seed": [0.1, 0.2, 0.2, 0.2, 0.3]` + extra + `}]`
		if err := os.WriteFile(filepath.Join(dir, VerdictsFile), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := withVerdicts("# Bench: x\n\n## Results\n\nthe table\n", &Spec{Claims: []Claim{{Name: "A beats B"}}}, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, "## Verdicts\n") {
			t.Fatalf("no Verdicts section:\n%s", got)
		}
		if says := strings.Contains(got, "at the level of the look"); says != seq {
			t.Errorf("sequential %v: the section says the look's level: %v\n%s", seq, says, got)
		}
	}
}
