package core

import (
	"fmt"
	"math"
	"sort"
)

// Schedule is a bonus weight w_t as a function of the training clock
// f = step / total_steps (steps count from 0).
type Schedule interface {
	Weight(step, totalSteps int) float64
}

// Stair is one step of a staircase schedule: from fraction From on, Weight.
type Stair struct{ From, Weight float64 }

// WeightSchedule implements the four schedules of docs/config.md
// ("`weight` (any strategy)"):
//
//	constant:  w0
//	linear:    w0 + (w_end - w0) * f
//	cosine:    w_end + (w0 - w_end) * (1 + cos(pi f)) / 2
//	staircase: the weight of the last stair with f >= From (w0 before the first)
type WeightSchedule struct {
	Kind   string // constant | linear | cosine | staircase
	W0     float64
	WEnd   float64
	Stairs []Stair // sorted by From
}

// Weight returns w_t.
func (s WeightSchedule) Weight(step, totalSteps int) float64 {
	f := 0.0
	if totalSteps > 0 {
		f = float64(step) / float64(totalSteps)
	}
	switch s.Kind {
	case "linear":
		return s.W0 + (s.WEnd-s.W0)*f
	case "cosine":
		return s.WEnd + (s.W0-s.WEnd)*(1+math.Cos(math.Pi*f))/2
	case "staircase":
		w := s.W0
		for _, st := range s.Stairs {
			if f >= st.From {
				w = st.Weight
			}
		}
		return w
	default:
		return s.W0
	}
}

// ScheduleKinds lists the known schedule names.
var ScheduleKinds = []string{"constant", "linear", "cosine", "staircase"}

// ParseSchedule reads a `weight:` mapping: {schedule, w0, w_end, stairs}.
// Defaults: constant, w0 = 1, w_end = 0. Errors name the key.
//
// Pass the weight mapping itself, not the strategy entry that holds it:
//
//	w := p.Sub("weight") // p: the entry's (or a plugin's params') Params
//	s.Weight = core.ParseSchedule(w)
//	// then check p.Err() and w.Err() (or p.Finish(), which covers w)
//
// An absent `weight:` gives an empty mapping, hence the defaults. Given a
// mapping that holds none of the schedule keys but a strategy entry's keys
// (name, plugin, params or weight), ParseSchedule records an error instead
// of silently returning the constant default.
func ParseSchedule(p *Params) WeightSchedule {
	if looksLikeEntry(p.m) {
		if p.err == nil {
			where := p.Path
			if where == "" {
				where = "the mapping"
			}
			p.err = fmt.Errorf("config: %s: ParseSchedule was given a strategy entry, not its weight mapping "+
				"(pass p.Sub(\"weight\"))", where)
		}
		return WeightSchedule{Kind: "constant", W0: 1}
	}
	s := WeightSchedule{
		Kind: p.OneOf("schedule", "constant", ScheduleKinds...),
		W0:   p.Float("w0", 1),
		WEnd: p.Float("w_end", 0),
	}
	// A weight scales a bonus: a negative one would turn curiosity into a
	// penalty, which no schedule of the paper means.
	p.Check(s.W0 >= 0 && !math.IsInf(s.W0, 0), "w0", "must be a finite number >= 0, got %v", s.W0)
	p.Check(s.WEnd >= 0 && !math.IsInf(s.WEnd, 0), "w_end", "must be a finite number >= 0, got %v", s.WEnd)
	raw, ok := p.Raw("stairs")
	if ok {
		list, isList := raw.([]any)
		if !isList {
			p.Fail("stairs", "want a list of [f_from, weight] pairs, got %v", raw)
			return s
		}
		for i, item := range list {
			pair, isPair := item.([]any)
			if !isPair || len(pair) != 2 {
				p.Fail(fmt.Sprintf("stairs[%d]", i), "want a [f_from, weight] pair, got %v", item)
				return s
			}
			from, ok1 := ToFloat(pair[0])
			w, ok2 := ToFloat(pair[1])
			if !ok1 || !ok2 {
				p.Fail(fmt.Sprintf("stairs[%d]", i), "want two numbers, got %v", item)
				return s
			}
			if w < 0 || math.IsInf(w, 0) || math.IsNaN(w) {
				p.Fail(fmt.Sprintf("stairs[%d]", i), "weight = %v: must be a finite number >= 0", w)
				return s
			}
			if from < 0 || from > 1 {
				p.Fail(fmt.Sprintf("stairs[%d]", i), "f_from = %v: must be in [0, 1]", from)
				return s
			}
			s.Stairs = append(s.Stairs, Stair{From: from, Weight: w})
		}
		if !sort.SliceIsSorted(s.Stairs, func(i, j int) bool { return s.Stairs[i].From < s.Stairs[j].From }) {
			p.Fail("stairs", "must be sorted by f_from")
		}
		for i := 1; i < len(s.Stairs); i++ {
			if s.Stairs[i].From <= s.Stairs[i-1].From {
				p.Fail("stairs", "must be sorted by strictly increasing f_from")
				break
			}
		}
		if s.Kind != "staircase" {
			p.Fail("stairs", "only valid with schedule: staircase")
		}
	} else if s.Kind == "staircase" {
		p.Fail("stairs", "schedule staircase needs a list of [f_from, weight] stairs")
	}
	return s
}

// looksLikeEntry reports whether m, given to ParseSchedule, is a strategy
// entry (or a plugin's params holding `weight:`) rather than a weight
// mapping: none of the schedule keys, and a key no weight mapping has.
func looksLikeEntry(m map[string]any) bool {
	for _, k := range []string{"schedule", "w0", "w_end", "stairs"} {
		if _, ok := m[k]; ok {
			return false
		}
	}
	for _, k := range []string{"name", "plugin", "params", "weight"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}
