package core

import (
	"math"
	"strings"
	"testing"
)

func TestWeightSchedules(t *testing.T) {
	// f = step/4 for steps 0, 1, 2, 4 -> f = 0, 0.25, 0.5, 1.
	steps := []int{0, 1, 2, 4}
	c := math.Sqrt(2) / 2 // cos(pi/4)
	tests := []struct {
		name string
		s    WeightSchedule
		want [4]float64
	}{
		{"constant", WeightSchedule{Kind: "constant", W0: 2, WEnd: 7}, [4]float64{2, 2, 2, 2}},
		{"empty kind is constant", WeightSchedule{W0: 0.3}, [4]float64{0.3, 0.3, 0.3, 0.3}},
		// 3 + (1-3) f: 3, 3-0.5, 3-1, 3-2
		{"linear", WeightSchedule{Kind: "linear", W0: 3, WEnd: 1}, [4]float64{3, 2.5, 2, 1}},
		// 0 + (1-0)(1+cos(pi f))/2: (1+1)/2, (1+c)/2, (1+0)/2, (1-1)/2
		{"cosine", WeightSchedule{Kind: "cosine", W0: 1, WEnd: 0}, [4]float64{1, (1 + c) / 2, 0.5, 0}},
		// 1 + (3-1)(1+cos)/2: 1+2, 1+(1+c), 1+1, 1+0
		{"cosine rising", WeightSchedule{Kind: "cosine", W0: 3, WEnd: 1}, [4]float64{3, 2 + c, 2, 1}},
		// w0 = 1 before 0.25; from 0.25: 0.5; from 0.5: 0.1
		{"staircase", WeightSchedule{Kind: "staircase", W0: 1, Stairs: []Stair{{0.25, 0.5}, {0.5, 0.1}}}, [4]float64{1, 0.5, 0.1, 0.1}},
		// a stair at 0 overrides w0 from the start
		{"staircase from 0", WeightSchedule{Kind: "staircase", W0: 1, Stairs: []Stair{{0, 4}, {1, 9}}}, [4]float64{4, 4, 4, 9}},
	}
	for _, tc := range tests {
		for i, st := range steps {
			if got := tc.s.Weight(st, 4); math.Abs(got-tc.want[i]) > 1e-12 {
				t.Errorf("%s at step %d/4: got %v, want %v", tc.name, st, got, tc.want[i])
			}
		}
	}
	stairs := WeightSchedule{Kind: "staircase", W0: 1, Stairs: []Stair{{0.25, 0.5}, {0.5, 0.1}}}
	// 2/5 = 0.4: between stairs -> 0.5; just before the first, 1/5 = 0.2 -> w0.
	if got := stairs.Weight(2, 5); got != 0.5 {
		t.Errorf("f=0.4: got %v", got)
	}
	if got := stairs.Weight(1, 5); got != 1 {
		t.Errorf("f=0.2: got %v", got)
	}
	// totalSteps <= 0 means f = 0.
	if got := (WeightSchedule{Kind: "linear", W0: 3, WEnd: 1}).Weight(5, 0); got != 3 {
		t.Errorf("total 0: got %v", got)
	}
}

func TestParseSchedule(t *testing.T) {
	s := ParseSchedule(NewParams("strategies[0].weight", nil))
	if s.Kind != "constant" || s.W0 != 1 || s.WEnd != 0 || s.Stairs != nil {
		t.Fatalf("defaults: %+v", s)
	}
	p := NewParams("w", map[string]any{
		"schedule": "staircase", "w0": 2,
		"stairs": []any{[]any{0.25, 1}, []any{"0.5", 0.5}},
	})
	s = ParseSchedule(p)
	if err := p.Finish(); err != nil {
		t.Fatal(err)
	}
	if s.Kind != "staircase" || s.W0 != 2 || len(s.Stairs) != 2 || s.Stairs[1] != (Stair{0.5, 0.5}) {
		t.Fatalf("got %+v", s)
	}
	p = NewParams("w", map[string]any{"schedule": "cosine", "w0": 0.5, "w_end": 0.1})
	if s = ParseSchedule(p); p.Finish() != nil || s.Kind != "cosine" || s.W0 != 0.5 || s.WEnd != 0.1 {
		t.Fatalf("cosine: %+v %v", s, p.Finish())
	}

	bad := []struct {
		name string
		m    map[string]any
		want []string
	}{
		{"unsorted stairs", map[string]any{"schedule": "staircase", "stairs": []any{[]any{0.5, 1}, []any{0.25, 2}}},
			[]string{"strategies[0].weight.stairs", "sorted"}},
		{"duplicate stairs", map[string]any{"schedule": "staircase", "stairs": []any{[]any{0.5, 1}, []any{0.5, 2}}},
			[]string{"strategies[0].weight.stairs", "strictly increasing"}},
		{"unknown schedule", map[string]any{"schedule": "exponential"},
			[]string{"strategies[0].weight.schedule", "exponential"}},
		{"staircase without stairs", map[string]any{"schedule": "staircase"},
			[]string{"strategies[0].weight.stairs"}},
		{"stairs without staircase", map[string]any{"schedule": "linear", "stairs": []any{[]any{0.5, 1}}},
			[]string{"strategies[0].weight.stairs", "only valid"}},
		{"stairs not a list", map[string]any{"schedule": "staircase", "stairs": 3},
			[]string{"strategies[0].weight.stairs"}},
		{"stair not a pair", map[string]any{"schedule": "staircase", "stairs": []any{[]any{0.1, 1}, []any{0.5}}},
			[]string{"strategies[0].weight.stairs[1]"}},
		{"stair not numbers", map[string]any{"schedule": "staircase", "stairs": []any{[]any{0.1, "x"}}},
			[]string{"strategies[0].weight.stairs[0]"}},
		{"stair out of range", map[string]any{"schedule": "staircase", "stairs": []any{[]any{0.1, 1}, []any{1.5, 2}}},
			[]string{"strategies[0].weight.stairs[1]", "[0, 1]"}},
		{"negative w0", map[string]any{"w0": -0.5},
			[]string{"strategies[0].weight.w0", ">= 0"}},
		{"negative w_end", map[string]any{"schedule": "linear", "w_end": -1},
			[]string{"strategies[0].weight.w_end", ">= 0"}},
		{"negative stair weight", map[string]any{"schedule": "staircase", "stairs": []any{[]any{0.1, 1}, []any{0.5, -2}}},
			[]string{"strategies[0].weight.stairs[1]", ">= 0"}},
		{"w0 wrong type", map[string]any{"w0": true},
			[]string{"strategies[0].weight.w0"}},
		{"unknown key", map[string]any{"w1": 1},
			[]string{"strategies[0].weight.w1", "unknown key"}},
	}
	// The entry (or a plugin's params) instead of its weight mapping.
	for _, m := range []map[string]any{
		{"name": "ppl", "kappa": 3, "weight": map[string]any{"w0": 0.5}},
		{"plugin": "./bin/x", "weight": map[string]any{"w0": 0.5}},
		{"scale": 0.5, "weight": map[string]any{"schedule": "linear"}},
	} {
		p := NewParams("strategies[0]", m)
		s := ParseSchedule(p)
		err := p.Err()
		if err == nil || !strings.Contains(err.Error(), "config: strategies[0]: ParseSchedule was given a strategy entry") ||
			!strings.Contains(err.Error(), `p.Sub("weight")`) {
			t.Errorf("%v: err %v, want the entry-not-weight error", m, err)
		}
		if s.Kind != "constant" || s.W0 != 1 || s.WEnd != 0 || s.Stairs != nil {
			t.Errorf("%v: schedule %+v", m, s)
		}
	}
	for _, tc := range bad {
		p := NewParams("strategies[0].weight", tc.m)
		ParseSchedule(p)
		err := p.Finish()
		if err == nil {
			t.Errorf("%s: want an error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err %q does not mention %q", tc.name, err, w)
			}
		}
	}
}
