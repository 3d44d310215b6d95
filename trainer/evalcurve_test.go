package trainer

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestCurveKs(t *testing.T) {
	for _, c := range []struct {
		n    int
		want []int
	}{{64, []int{1, 2, 4, 8, 16, 32, 64}}, {6, []int{1, 2, 4, 6}}, {1, []int{1}}, {0, nil}} {
		if got := CurveKs(c.n); !slices.Equal(got, c.want) {
			t.Errorf("CurveKs(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// n = 4 samples, correct counts 0, 1 and 4, by hand: pass@1 = (0 + 1/4 +
// 1)/3 = 5/12; pass@2 of the one-correct problem is 1 - C(3,2)/C(4,2) =
// 1/2, so pass@2 = (0 + 1/2 + 1)/3 = 1/2; pass@4 = (0 + 1 + 1)/3 = 2/3.
func TestPassAtKCurve(t *testing.T) {
	got, err := PassAtKCurve(4, []int{0, 1, 4}, []int{1, 2, 4})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{5.0 / 12, 0.5, 2.0 / 3} {
		if math.Abs(got[i]-want) > 1e-12 {
			t.Errorf("k index %d: %v, want %v", i, got[i], want)
		}
	}
	if _, err := PassAtKCurve(4, nil, []int{1}); err == nil {
		t.Error("no problems accepted")
	}
	if _, err := PassAtKCurve(4, []int{5}, []int{1}); err == nil {
		t.Error("5 correct of 4 accepted")
	}
}

func TestEvalDetailRoundTrip(t *testing.T) {
	run := t.TempDir()
	d := EvalDetail{Step: 40, Set: "c3", N: 64, Problems: []string{"a", "b"}, Correct: []int{0, 64}}
	if err := WriteEvalDetail(run, d); err != nil {
		t.Fatal(err)
	}
	path := EvalDetailPath(run, "c3", 40)
	if !strings.HasSuffix(path, "evals/c3/step-000040.json") {
		t.Errorf("path %s", path)
	}
	got, err := ReadEvalDetail(path)
	if err != nil || got.Step != 40 || got.N != 64 || !slices.Equal(got.Correct, d.Correct) || !slices.Equal(got.Problems, d.Problems) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	for _, bad := range []EvalDetail{{Set: "../x", N: 1}, {Set: "c3", N: 1, Problems: []string{"a"}}} {
		if err := WriteEvalDetail(run, bad); err == nil {
			t.Errorf("%+v written", bad)
		}
	}
	if err := os.WriteFile(path, []byte(`{"step": 1, "set": "c3", "n": 4, "problems": ["a"], "correct": [5]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadEvalDetail(path); err == nil || !strings.Contains(err.Error(), "problem 0 (a): 5 correct of 4") {
		t.Errorf("bad count: %v", err)
	}
}
