package core

import (
	"strings"
	"testing"
)

// needsStrategy declares fixed needs.
type needsStrategy struct {
	name string
	n    Needs
}

func (s needsStrategy) Name() string { return s.name }
func (s needsStrategy) Needs() Needs { return s.n }

// stubAlgo is an algorithm with or without a critic and nothing else;
// needyAlgo declares needs of its own.
type stubAlgo struct{ critic bool }

func (a stubAlgo) Name() string              { return "stub" }
func (a stubAlgo) NeedsCritic() bool         { return a.critic }
func (stubAlgo) Advantages(r *Rollout) error { return nil }
func (stubAlgo) Finalize(r *Rollout) error   { return nil }

type needyAlgo struct {
	stubAlgo
	n Needs
}

func (a needyAlgo) Needs() Needs { return a.n }

// RunNeeds merges, in one place, the algorithm's critic, its own needs and
// every strategy's; the expected unions are written out by hand.
func TestRunNeeds(t *testing.T) {
	passk := Needs{Correct: true, MinGroup: 4, MinGroupKey: "algorithm.k"}
	cases := []struct {
		name   string
		algo   Algorithm
		strats []Strategy
		want   Needs
		err    string
	}{
		{"nothing", stubAlgo{}, nil, Needs{}, ""},
		{"a critic algorithm: one head", stubAlgo{critic: true}, nil, Needs{ValueHeads: 1}, ""},
		{"a strategy asks for more heads", stubAlgo{critic: true}, []Strategy{needsStrategy{"mh", Needs{ValueHeads: 4, HeadMasks: true}}}, Needs{ValueHeads: 4, HeadMasks: true}, ""},
		{"the algorithm's own needs", needyAlgo{n: passk}, []Strategy{needsStrategy{"ent", Needs{Entropies: true}}},
			Needs{Entropies: true, Correct: true, MinGroup: 4, MinGroupKey: "algorithm.k"}, ""},
		{"the larger least group wins, with its key", needyAlgo{n: passk}, []Strategy{needsStrategy{"g", Needs{MinGroup: 6, MinGroupKey: "strategies[0].group"}}, needsStrategy{"h", Needs{MinGroup: 5, MinGroupKey: "x"}}},
			Needs{Correct: true, MinGroup: 6, MinGroupKey: "strategies[0].group"}, ""},
		{"one pooling twice is fine", stubAlgo{}, []Strategy{needsStrategy{"a", Needs{Pooling: "mean"}}, needsStrategy{"b", Needs{Pooling: "mean"}}}, Needs{Pooling: "mean"}, ""},
		{"two poolings conflict", stubAlgo{}, []Strategy{needsStrategy{"a", Needs{Pooling: "mean"}}, needsStrategy{"b", Needs{Pooling: "last"}}}, Needs{},
			`strategies[1] (b): asks for pooling "last" but another strategy asked for "mean"`},
	}
	for _, c := range cases {
		got, err := RunNeeds(c.algo, c.strats)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %+v (%v), want %+v", c.name, got, err, c.want)
		}
	}
	if err := passk.CheckGroupSize(4); err != nil {
		t.Errorf("rollout.n = k: %v", err)
	}
	if err := passk.CheckGroupSize(3); err == nil || !strings.Contains(err.Error(), "config: rollout.n = 3 is less than algorithm.k = 4") {
		t.Errorf("rollout.n < k: %v", err)
	}
}
