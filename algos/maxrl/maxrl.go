// Package maxrl implements the MaxRL advantage estimator
// (docs/algorithms.md), registered as algorithm "maxrl": Tajwar et al.
// 2026, arXiv 2602.02710; TRL's MaxRLTrainer and SkyRL's "maxrl"
// implement the same estimator.
//
// For response i of a prompt group g with shaped reward r~_i, and the
// task's rewards of a correct and an incorrect answer r_cor and r_inc:
//
//	u_i = (r~_i - r_inc) / (r_cor - r_inc)           (the correctness, 0 or 1, for unshaped rewards)
//	A_i = (u_i - mean_g u) / (mean_g u + 1e-6)
//	A_i = 0 for every i of a group whose mean_g u is <= 0
//
// Dividing by the group's success rate instead of its std weights a hard
// prompt (few correct answers) more: a lone correct answer among G gets
// A ~ G - 1. A_i is copied to every valid token, Returns equal the
// advantages, and they are never whitened.
//
// Our choices (docs/algorithms.md): a group whose mean u is negative
// (shaping pushed rewards below r_inc) gets 0, as a group with none
// correct does, since the formula's denominator is meant to be a success
// rate; r_cor and r_inc are the task's (its correct_reward and
// incorrect_reward, +1 and -1 by default), or the algorithm's keys of the
// same names where no task says (cde-run shape).
//
// Config keys (`algorithm:` mapping, besides name): correct_reward
// (default the task's, else 1), incorrect_reward (default the task's,
// else -1); set, they must equal the task's.
package maxrl

import (
	"fmt"

	"github.com/cde-rl/cde/algos/internal/outcome"
	"github.com/cde-rl/cde/core"
)

func init() {
	core.RegisterAlgorithm("maxrl", New, "correct_reward", "incorrect_reward") // its keys besides name
}

// Eps is the 1e-6 of the denominator.
const Eps = 1e-6

// MaxRL is the MaxRL estimator.
type MaxRL struct {
	// Correct and Incorrect are r_cor and r_inc.
	Correct, Incorrect float64
	setCorrect         bool
	setIncorrect       bool
}

// New builds MaxRL from the `algorithm:` params.
func New(p *core.Params) (core.Algorithm, error) {
	a := &MaxRL{Correct: p.Float("correct_reward", 1), Incorrect: p.Float("incorrect_reward", -1),
		setCorrect: p.Has("correct_reward"), setIncorrect: p.Has("incorrect_reward")}
	p.Check(a.Correct > a.Incorrect, "correct_reward", "must be greater than incorrect_reward (%v), got %v", a.Incorrect, a.Correct)
	if err := p.Err(); err != nil {
		return nil, err
	}
	return a, nil
}

// Name returns "maxrl".
func (a *MaxRL) Name() string { return "maxrl" }

// NeedsCritic is false.
func (a *MaxRL) NeedsCritic() bool { return false }

// UseRewardLevels takes the task's r_inc and r_cor (core.RewardLevelsUser);
// a key set to another value is an error naming it.
func (a *MaxRL) UseRewardLevels(incorrect, correct float64) error {
	if a.setCorrect && a.Correct != correct {
		return fmt.Errorf("config: algorithm.correct_reward = %v, but the task rewards a correct answer %v (leave the key out to use the task's)", a.Correct, correct)
	}
	if a.setIncorrect && a.Incorrect != incorrect {
		return fmt.Errorf("config: algorithm.incorrect_reward = %v, but the task rewards an incorrect answer %v (leave the key out to use the task's)", a.Incorrect, incorrect)
	}
	if correct <= incorrect {
		return fmt.Errorf("maxrl: the task's correct reward %v is not above its incorrect reward %v", correct, incorrect)
	}
	a.Correct, a.Incorrect = correct, incorrect
	return nil
}

// Advantages sets every token of sequence i to A_i (the package doc) and
// Returns equal to Advantages.
func (a *MaxRL) Advantages(r *core.Rollout) error {
	rewards, err := outcome.ShapedRewards("maxrl", r)
	if err != nil {
		return err
	}
	adv := Estimate(rewards, r.Groups(), a.Incorrect, a.Correct)
	outcome.Broadcast(r, adv, adv)
	return nil
}

// Finalize is a no-op: MaxRL advantages are never whitened.
func (a *MaxRL) Finalize(r *core.Rollout) error { return nil }

// Estimate is A_i of the package doc for every reward; groups lists the
// indices of rewards that share a prompt; an index in no group gets 0.
func Estimate(rewards []float64, groups [][]int, incorrect, correct float64) []float64 {
	adv := make([]float64, len(rewards))
	for _, idx := range groups {
		if len(idx) == 0 {
			continue
		}
		u := make([]float64, len(idx))
		mean := 0.0
		for k, i := range idx {
			u[k] = (rewards[i] - incorrect) / (correct - incorrect)
			mean += u[k]
		}
		mean /= float64(len(idx))
		if mean <= 0 {
			continue
		}
		for k, i := range idx {
			adv[i] = (u[k] - mean) / (mean + Eps)
		}
	}
	return adv
}
