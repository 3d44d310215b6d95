package summary

import (
	"bytes"
	"math"
	"testing"
)

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	Write(&b, "train done", []Fact{{"run", "runs/x"}, {"wall time", "3.2 s"}},
		map[string]float64{"reward/mean": -0.25, "eval/a/pass@k": 0.5526, "eval/a/k": 4, "x/nan": math.NaN(),
			"perf/tokens": 26123, "tiny": 1.23456e-7, "big": -1234567.5})
	// Values stand on their decimal point: 4 decimals, an integer as is,
	// exponent form out of [1e-4, 1e6).
	want := `
== train done ==
run        runs/x
wall time  3.2 s

metric         value
big               -1.235e+06
eval/a/k           4
eval/a/pass@k      0.5526
perf/tokens    26123
reward/mean       -0.2500
tiny               1.235e-07
x/nan            NaN
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestRows(t *testing.T) {
	var b bytes.Buffer
	Rows(&b, "bench done", []Fact{{"results", "out/results.md"}}, []string{"arm", "seeds", "acc"},
		[][]string{{"grpo", "3", "0.50 ± 0.01"}, {"grpo_ppl", "3", "0.55 ± 0.02"}})
	want := `
== bench done ==
results  out/results.md

arm       seeds  acc
grpo      3      0.50 ± 0.01
grpo_ppl  3      0.55 ± 0.02
`
	if b.String() != want {
		t.Fatalf("got:\n%q\nwant:\n%q", b.String(), want)
	}
}

func TestNum(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{{3, "3"}, {-0.25, "-0.25"}, {0.123456, "0.1235"}, {1e20, "1e+20"}, {math.Inf(-1), "-Inf"}, {12345.678, "1.235e+04"}} {
		if got := Num(c.x); got != c.want {
			t.Errorf("Num(%v) = %q, want %q", c.x, got, c.want)
		}
	}
}

func TestAligned(t *testing.T) {
	got := Aligned([]float64{1, -12.5, 0.00012345, math.Inf(1)})
	want := []string{"   1     ", " -12.5000", "   0.0001", "+Inf     "}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cell %d: %q, want %q", i, got[i], want[i])
		}
	}
}
