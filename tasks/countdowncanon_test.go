package tasks

import "testing"

// Canonical forms worked by hand from the rules of CountdownCanonical.
func TestCountdownCanonical(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"25 + 3*7", "25+3*7"},
		{"7*3+25", "25+3*7"},
		{"(3*7)+25", "25+3*7"},
		{"a", ""}, // not an expression
		{"10-(4-2)", "10+2-4"},
		{"10-4+2", "10+2-4"},
		{"(10+2)-4", "10+2-4"},
		{"100/(5/2)", "100*2/5"},
		{"100*2/5", "100*2/5"},
		{"2*100/5", "100*2/5"},
		{"3*(4+5)", "(4+5)*3"},
		{"(5+4)*3", "(4+5)*3"},
		{"3*4+3*5", "3*4+3*5"}, // no distributivity
		{"(7)", "7"},
		{"007+1", "1+7"},
		{"8/(4-2)", "8/(4-2)"},
		{"(4-2)*(3-1)", "(3-1)*(4-2)"},
		{"50-(25-(10-3))", "10+50-25-3"},
		{"6/(1/(2/3))", "2*6/1/3"},
	} {
		got, err := CountdownCanonical(c.in)
		if c.want == "" {
			if err == nil {
				t.Errorf("%q: %q, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q (%v), want %q", c.in, got, err, c.want)
		}
	}
}

// SolutionKey: the canonical form of a correct answer, "" for a wrong one.
func TestCountdownSolutionKey(t *testing.T) {
	v := CountdownVerifier{CorrectReward: 1, IncorrectReward: -1}
	p := CountdownProblem(3, []int{3, 7, 25}, 46)
	for _, c := range []struct{ resp, want string }{
		{"Answer: 25 + 3*7", "25+3*7"}, {"Answer: 7*3 + 25", "25+3*7"}, {"Answer: 25+7*7", ""}, {"Answer: 25+21", ""},
	} {
		if got := v.SolutionKey(p, c.resp); got != c.want {
			t.Errorf("%q: %q, want %q", c.resp, got, c.want)
		}
	}
}
